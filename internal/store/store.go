package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
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
	// another one); the directory store, which keeps none, ignores it.
	Apply(ctx context.Context, obj v1alpha1.Object) error
	// Delete removes the object's definition; ErrNotFound if there is none.
	Delete(ctx context.Context, kind, name string) error
}

// ErrNotFound is returned by Delete for an object the store does not hold.
// It also matches fs.ErrNotExist, so that a consumer that declares its own
// interface over the store (package mcp) recognises it without importing
// this package.
var ErrNotFound error = notFoundError{}

type notFoundError struct{}

func (notFoundError) Error() string        { return "object not found" }
func (notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// ErrConflict is returned (wrapped) by a write whose precondition failed:
// the object's metadata.resourceVersion is not the stored object's, because
// someone else changed, created or deleted it since it was read. Read it
// again and write again. It has a Conflict method, so that a consumer that
// declares its own interface over the store (package mcp) recognises it
// without importing this package.
var ErrConflict error = conflictError{}

type conflictError struct{}

func (conflictError) Error() string {
	return "the object changed since it was read (stale resourceVersion)"
}
func (conflictError) Conflict() bool { return true }

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
	// Sources maps each object to the file that defines it.
	Sources map[Key]string
	// Errors are the current manifest problems, in file and line order. A
	// file with errors keeps the objects it last defined without them.
	Errors decode.ErrorList
	// Unresolved are the Members' references that name no object of the
	// snapshot — a spec.profile without its Profile, a tenant target
	// without its Tenant — and the worktree branches two Members claim,
	// located where they are written, with the very errors `fleetd
	// validate` prints ([decode.CheckReferences], [decode.CheckWorktrees]).
	// Such a member is not an error of its file: it waits at Ready=False
	// for the object to appear, or the claim to end.
	Unresolved decode.ErrorList
	// DirErr is set while the manifests directory cannot be read; the
	// objects are then the last ones read.
	DirErr error
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
}

// Referenced returns the object a Member's reference names, or nil when the
// snapshot has none (see [v1alpha1.Member.References]).
func (s *Snapshot) Referenced(ref v1alpha1.Reference) v1alpha1.Object {
	switch ref.Kind {
	case v1alpha1.KindProfile:
		if p, ok := s.Profiles[ref.Name]; ok {
			return p
		}
	case v1alpha1.KindTenant:
		if t, ok := s.Tenants[ref.Name]; ok {
			return t
		}
	}
	return nil
}

// ErrorsIn returns the errors reported for file.
func (s *Snapshot) ErrorsIn(file string) decode.ErrorList {
	var out decode.ErrorList
	for _, e := range s.Errors {
		if e.File == file {
			out = append(out, e)
		}
	}
	return out
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

// NewSnapshot returns an empty snapshot (not Synced), every map made.
func NewSnapshot() *Snapshot {
	return &Snapshot{
		Members:  map[string]*v1alpha1.Member{},
		Profiles: map[string]*v1alpha1.Profile{},
		Tenants:  map[string]*v1alpha1.Tenant{},
		Sources:  map[Key]string{},
	}
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
