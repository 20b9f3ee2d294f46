package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Store is the desired state the controllers read and tools write.
type Store interface {
	// Snapshot returns the current desired state. It is shared and must not
	// be modified; an object's pointer changes exactly when its content does.
	Snapshot() *Snapshot
	// Get returns one object by kind and name.
	Get(kind, name string) (v1alpha1.Object, bool)
	// List returns every object of one kind, sorted by name.
	List(kind string) []v1alpha1.Object
	// Watch returns a channel that receives a value (coalesced) whenever the
	// snapshot changes, until ctx ends.
	Watch(ctx context.Context) <-chan struct{}
	// Apply creates or replaces obj's definition. status, uid, generation and
	// creationTimestamp in obj are ignored: the store owns them. A
	// metadata.resourceVersion is a precondition for a store that keeps
	// versions (an error matching ErrConflict when the stored object has
	// another one); the directory store, which keeps none, ignores it. A
	// write the source did not answer fails with an error matching
	// ErrUnavailable.
	Apply(ctx context.Context, obj v1alpha1.Object) error
	// Delete removes the object's definition; ErrNotFound if there is none.
	// A Profile or Tenant that a Member references is not deleted: the
	// error matches ErrInUse and names the Members (see [InUse]).
	Delete(ctx context.Context, kind, name string) error
}

// ErrNotFound is returned (wrapped) by Delete for an object the store does
// not hold.
var ErrNotFound = errors.New("object not found")

// ErrInUse is returned (wrapped) by Delete of a Profile or Tenant that a
// Member references (spec.profile, spec.mcpTarget.tenantId): delete those
// Members, or point them elsewhere, first. Deleting it anyway would leave
// them at Ready=False until it comes back.
var ErrInUse = errors.New("object in use")

// ErrConflict is returned (wrapped) by a write whose precondition failed:
// the object's metadata.resourceVersion is not the stored object's, because
// someone else changed, created or deleted it since it was read. Read it
// again and write again.
var ErrConflict = errors.New("the object changed since it was read (stale resourceVersion)")

// ErrUnavailable is wrapped by a write whose source did not answer (etcd
// without quorum, no member reachable, a request timed out: nothing is
// known to be written), and by a [Snapshot.Unreadable] that says so: the
// source may come back on its own, and nothing is wrong with the
// definitions. A backend names its source in front of it ("etcd
// unavailable").
var ErrUnavailable = errors.New("unavailable")

// ErrLost is wrapped by the [Snapshot.Stale] and [Snapshot.Unreadable] of a
// store whose source is not the one this node knew — etcd restored empty or
// from an older backup (its revision behind the highest this node has
// seen), or another fleet's (its identity changed) — and by every write
// refused meanwhile. Unlike [ErrUnavailable] it does not pass by itself: an
// operator accepts the source as it is (the backend's message says how),
// and until then nothing is pruned or created from it.
var ErrLost = errors.New("store lost")

// InUse is Delete's refusal of key's object while members reference it,
// or nil when none does: an error matching ErrInUse that names, in name
// order, each Member and the field that references the object (the
// backend puts the object's key in front of it). members
// are every Member of the store — not only one node's.
func InUse(key Key, members []*v1alpha1.Member) error {
	var refs []string
	for _, m := range members {
		for _, ref := range m.References() {
			if ref.Kind == key.Kind && ref.Name == key.Name && key.Kind != v1alpha1.KindMember {
				refs = append(refs, fmt.Sprintf("member/%s (%s)", m.Name, ref.Field))
			}
		}
	}
	if len(refs) == 0 {
		return nil
	}
	slices.Sort(refs)
	return fmt.Errorf("referenced by %s; delete those members or change what they reference first: %w", strings.Join(refs, ", "), ErrInUse)
}

// Key names one object.
type Key struct {
	Kind string
	Name string
}

func (k Key) String() string { return k.Kind + "/" + k.Name }

// Snapshot is the desired state at one moment.
type Snapshot struct {
	Members  map[string]*v1alpha1.Member
	Profiles map[string]*v1alpha1.Profile
	Tenants  map[string]*v1alpha1.Tenant
	// Sources maps each object to where it is defined, as its errors name
	// it (decode.Error.File): a manifest file, an etcd key. Read an
	// object's problems with [Snapshot.ErrorsOf].
	Sources map[Key]string
	// Errors are the current definition problems, in source and line
	// order. A source with errors keeps the objects it last defined
	// without them.
	Errors decode.ErrorList
	// Unresolved are the Members' references that name no object of the
	// snapshot — a spec.profile without its Profile, a tenant target
	// without its Tenant — and the worktree branches two Members claim,
	// located where they are written, with the very errors `fleetd
	// validate` prints ([decode.CheckReferences], [decode.CheckWorktrees]).
	// Such a member is not an error of its source: it waits at Ready=False
	// for the object to appear, or the claim to end.
	Unresolved decode.ErrorList
	// Unreadable is set while the source cannot be read (a manifests
	// directory gone or unreadable, etcd that does not answer); the objects
	// are then the last ones read. Its message is the backend's and names
	// the source; it matches ErrUnavailable when the source did not answer
	// rather than being broken.
	Unreadable error
	// Stale, when set, says why the store cannot confirm that this is the
	// current desired state: it is the last state it saw of a source it has
	// lost (etcd unreachable or without quorum), and another node may have
	// taken over its members since. The controllers create no pane from a
	// stale snapshot — no first start, no restart, no replacement — and keep
	// running what runs. The directory store, the only reader of its own
	// source, never sets it.
	Stale error
	// Synced is false until the first successful read of the source.
	Synced bool
	// PruneHeld are the members whose definitions disappeared in one
	// observed change together with more than half of the members (and at
	// least [MinPruneHold]) without an explicit delete, by name: they are
	// in Members with their last definition until the hold is confirmed or
	// expires ([Hold]). nil when nothing is held.
	PruneHeld map[string]PruneHold
}

// Referenced returns the object a Member's reference names, or nil when the
// snapshot has none (see [v1alpha1.Member.References]).
func (s *Snapshot) Referenced(ref v1alpha1.Reference) v1alpha1.Object {
	if o, ok := s.Object(Key{Kind: ref.Kind, Name: ref.Name}); ok && ref.Kind != v1alpha1.KindMember {
		return o
	}
	return nil
}

// ErrorsIn returns the errors reported for one source (a file, an etcd
// key).
func (s *Snapshot) ErrorsIn(source string) decode.ErrorList {
	var out decode.ErrorList
	for _, e := range s.Errors {
		if e.File == source {
			out = append(out, e)
		}
	}
	return out
}

// ErrorsOf returns the errors of the source that defines key's object;
// none for an object the snapshot does not hold.
func (s *Snapshot) ErrorsOf(key Key) decode.ErrorList {
	source, ok := s.Sources[key]
	if !ok {
		return nil
	}
	return s.ErrorsIn(source)
}

// List returns the objects of one kind, sorted by name.
func (s *Snapshot) List(kind string) []v1alpha1.Object {
	switch kind {
	case v1alpha1.KindMember:
		return sortedObjects(s.Members)
	case v1alpha1.KindProfile:
		return sortedObjects(s.Profiles)
	case v1alpha1.KindTenant:
		return sortedObjects(s.Tenants)
	}
	return nil
}

func sortedObjects[T v1alpha1.Object](m map[string]T) []v1alpha1.Object {
	out := make([]v1alpha1.Object, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[name])
	}
	return out
}

// Object looks key up.
func (s *Snapshot) Object(key Key) (v1alpha1.Object, bool) {
	switch key.Kind {
	case v1alpha1.KindMember:
		o, ok := s.Members[key.Name]
		return o, ok
	case v1alpha1.KindProfile:
		o, ok := s.Profiles[key.Name]
		return o, ok
	case v1alpha1.KindTenant:
		o, ok := s.Tenants[key.Name]
		return o, ok
	}
	return nil, false
}

// Put adds obj to the snapshot, defined at source.
func (s *Snapshot) Put(obj v1alpha1.Object, source string) {
	switch o := obj.(type) {
	case *v1alpha1.Member:
		s.Members[o.Name] = o
	case *v1alpha1.Profile:
		s.Profiles[o.Name] = o
	case *v1alpha1.Tenant:
		s.Tenants[o.Name] = o
	default:
		return
	}
	s.Sources[Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}] = source
}

// sameAs reports whether s shows what o shows: the same objects (the same
// pointers: a backend keeps an unchanged object's), sources, problems and
// state. A backend's snapshot built again after a change it does not show
// — another node's member — is the same, and [Hold.Publish] does not wake
// the readers for it.
func (s *Snapshot) sameAs(o *Snapshot) bool {
	return s.Synced == o.Synced && sameErr(s.Stale, o.Stale) && sameErr(s.Unreadable, o.Unreadable) &&
		len(s.PruneHeld) == 0 && len(o.PruneHeld) == 0 &&
		maps.Equal(s.Members, o.Members) && maps.Equal(s.Profiles, o.Profiles) && maps.Equal(s.Tenants, o.Tenants) &&
		maps.Equal(s.Sources, o.Sources) && sameErrors(s.Errors, o.Errors) && sameErrors(s.Unresolved, o.Unresolved)
}

// sameErr reports whether a and b say the same: both nil, or the same
// words (a backend wraps its source's error anew at every build).
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}

// sameErrors reports whether two lists hold the same problems, in order.
func sameErrors(a, b decode.ErrorList) bool {
	return slices.EqualFunc(a, b, func(x, y *decode.Error) bool {
		return x == y || x.File == y.File && x.Line == y.Line && x.Field == y.Field && x.Msg == y.Msg && x.Kind == y.Kind && x.Name == y.Name
	})
}

// UnmarshalObject decodes an object of kind that json.Marshal encoded — a
// definition a backend persisted across restarts, metadata included — into
// its type. It is not the manifest decoder: nothing is checked or
// defaulted, and only a backend's own file is read with it.
func UnmarshalObject(kind string, data []byte) (v1alpha1.Object, error) {
	obj := v1alpha1.New(kind)
	if obj == nil {
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	return obj, nil
}

// NewSnapshot returns an empty snapshot (not Synced), every map made.
func NewSnapshot() *Snapshot {
	return &Snapshot{
		Members:  map[string]*v1alpha1.Member{},
		Profiles: map[string]*v1alpha1.Profile{},
		Tenants:  map[string]*v1alpha1.Tenant{},
		Sources:  map[Key]string{},
	}
}

// Published is a backend's current snapshot and its change signal: the
// reads every backend serves the same way — Snapshot, Get, List, Watch,
// Changed — from memory, never waiting on the source. A backend embeds it
// and calls Publish with each new snapshot. The zero value holds an empty
// snapshot, not Synced.
type Published struct {
	mu       sync.Mutex // held only to read or swap the pointer and to signal
	snap     *Snapshot
	watchers map[chan struct{}]struct{}
	changed  notify.Signal
}

// Snapshot returns the current desired state.
func (p *Published) Snapshot() *Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.snap == nil {
		p.snap = NewSnapshot()
	}
	return p.snap
}

// Publish makes next the current snapshot and wakes every watcher. The
// backend alone calls it.
func (p *Published) Publish(next *Snapshot) {
	p.mu.Lock()
	p.snap = next
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	p.changed.Notify()
}

// Get returns one object by kind and name.
func (p *Published) Get(kind, name string) (v1alpha1.Object, bool) {
	return p.Snapshot().Object(Key{Kind: kind, Name: name})
}

// List returns every object of one kind, sorted by name.
func (p *Published) List(kind string) []v1alpha1.Object {
	return p.Snapshot().List(kind)
}

// Changed returns a channel closed at the next Publish.
func (p *Published) Changed() <-chan struct{} { return p.changed.Changed() }

// Signal is the change signal itself, for a notify.Signal that follows
// the store among other sources ([notify.Signal.Follow]).
func (p *Published) Signal() *notify.Signal { return &p.changed }

// Watch returns a channel that receives a value at every Publish until ctx
// ends; values coalesce, so a slow reader sees one for many changes.
func (p *Published) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	p.mu.Lock()
	if p.watchers == nil {
		p.watchers = map[chan struct{}]struct{}{}
	}
	p.watchers[ch] = struct{}{}
	p.mu.Unlock()
	context.AfterFunc(ctx, func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	})
	return ch
}

// NewUID returns a new metadata.uid: a random (version 4) UUID. Every store
// mints its uids with it.
func NewUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails on supported platforms
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
