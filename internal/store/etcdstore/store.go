package etcdstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Defaults for Options.
const (
	DefaultPrefix         = "/fleetd"
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxObjectBytes = 512 << 10
	DefaultRetryInterval  = time.Second
)

// maxWriteAttempts bounds how often an unconditional Apply reads and writes
// again when another writer changed the object in between.
const maxWriteAttempts = 5

// The directories under the prefix, one per kind.
var kindDirs = map[string]string{
	v1alpha1.KindMember:  "members",
	v1alpha1.KindProfile: "profiles",
	v1alpha1.KindTenant:  "tenants",
}

// Options configure a Store. nil means defaults.
type Options struct {
	// Prefix is the key prefix every object lives under, without a
	// trailing slash; default DefaultPrefix.
	Prefix string
	// RequestTimeout bounds every request to etcd; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxObjectBytes is the size limit on one stored object, written or
	// read; default DefaultMaxObjectBytes.
	MaxObjectBytes int
	// RetryInterval is the base of the backoff before Run lists again after
	// etcd failed it; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock drives the retries and creation timestamps; default the wall
	// clock.
	Clock clock.Clock
	// Logger receives a line per change of etcd's availability and per
	// object etcd holds that does not decode; default slog.Default().
	Logger *slog.Logger
	// Node, if set, makes the snapshot show only the Members bound to this
	// node (bindings.go); Assignments still shows them all. Empty: every
	// Member, as with one node per prefix.
	Node string
	// StateDir is the node's state directory, where the store remembers
	// its fleet (fence.go: the identity, the highest revision seen, every
	// object's last good definition); "" remembers nothing across
	// restarts.
	StateDir string
	// CheckInterval is how often a running store compares etcd's identity
	// and revision with what it has seen; default DefaultCheckInterval.
	CheckInterval time.Duration
	// PruneHold is how long a mass removal of the node's members waits for
	// confirmation (store.Hold); 0 means store.DefaultPruneHold.
	PruneHold time.Duration
	// afterList, if set, is called by each informer between a list and the
	// watch from its revision, with the informer's directory ("members",
	// "bindings", …; tests: make changes and compact etcd there).
	afterList func(dir string, rev int64)
}

// Store is the desired state kept in etcd. See the package documentation.
type Store struct {
	store.Published // the snapshot of this node's members

	cli      *clientv3.Client
	prefix   string // Options.Prefix + "/"
	timeout  time.Duration
	maxBytes int
	clock    clock.Clock
	log      *slog.Logger
	node     string // Options.Node

	kinds    map[string]*informer.Informer[*entry] // PREFIX/members/, profiles/, tenants/ by kind
	bindings *informer.Informer[*Binding]          // PREFIX/bindings/; a nil value does not decode
	identity *informer.Informer[string]            // PREFIX/identity: the fleet's id (fence.go)

	hold       *store.Hold
	stateDir   string                     // Options.StateDir
	stateFile  string                     // etcd-store.json in it; "" for none
	checkEvery time.Duration              // Options.CheckInterval
	saved      map[string]v1alpha1.Object // last good objects by key, as remembered at start; read only
	base       *store.Snapshot            // the node's snapshot as remembered at start; nil for none
	baseFull   *store.Snapshot            // the fleet's, likewise
	memChanged notify.Signal              // what the node remembers changed (persistLoop)
	fleetSig   notify.Signal              // the fleet's objects or bindings changed (FleetChanged)

	buildMu sync.Mutex // serialises the informers' rebuilds
	listed  []int64    // each space's Listed when last checked; buildMu
	objs    objects    // the objects as last built; buildMu

	mu       sync.Mutex // guards what follows; held only to read or swap it
	full     *store.Snapshot
	fleetID  string          // the fleet's identity, as remembered or adopted
	idValue  []byte          // the identity key's value, which writes are fenced on
	idModRev int64           // and the revision it was written at
	seen     int64           // the highest etcd revision seen
	lost     error           // why the store is lost (store.ErrLost), or nil
	frozen   *store.Snapshot // the node's snapshot in effect when it was lost
	counts   map[string]int  // bindings by node (BoundCounts); replaced, never changed
}

// entry is what the store knows about one object's key, or a deleted
// member's tombstone.
type entry struct {
	good decode.FileResult // the last good object, alone; no Objects if none
	errs decode.ErrorList  // problems of the current value
	tomb bool              // PREFIX/members/.deleted/NAME (write.go)
}

var _ store.Store = (*Store)(nil)

// New returns a Store on cli. It reads nothing yet: Run lists and watches,
// and the snapshot is not Synced until its first list.
func New(cli *clientv3.Client, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if err := CheckPrefix(o.Prefix); err != nil {
		return nil, err
	}
	if o.MaxObjectBytes <= 0 {
		o.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.CheckInterval = cmp.Or(o.CheckInterval, DefaultCheckInterval)
	s := &Store{cli: cli, prefix: o.Prefix + "/", timeout: o.RequestTimeout, maxBytes: o.MaxObjectBytes,
		clock: o.Clock, log: o.Logger, node: o.Node, kinds: map[string]*informer.Informer[*entry]{}, full: store.NewSnapshot(),
		stateDir: o.StateDir, checkEvery: o.CheckInterval}
	if o.StateDir != "" {
		s.stateFile = statedir.At(o.StateDir).EtcdStore()
	}
	mem, err := loadMemory(s.stateFile, o.Prefix)
	if err != nil {
		return nil, err
	}
	s.fleetID, s.seen = mem.Identity, mem.Revision
	s.saved = mem.saved(s.prefix)
	s.base = rememberedSnapshot(s.saved, func(o v1alpha1.Object) bool {
		return o.GetObjectKind() != v1alpha1.KindMember || slices.Contains(mem.Members, o.GetName())
	})
	s.baseFull = rememberedSnapshot(s.saved, func(v1alpha1.Object) bool { return true })
	s.hold = store.NewHold(&s.Published, &store.HoldOptions{Duration: o.PruneHold, Clock: o.Clock, Logger: o.Logger, Baseline: s.base})
	afterList := func(dir string) func(int64) {
		if o.afterList == nil {
			return nil
		}
		return func(rev int64) { o.afterList(dir, rev) }
	}
	for kind, dir := range kindDirs {
		s.kinds[kind] = informer.New(informer.Options[*entry]{
			Client: cli, Prefix: s.prefix + dir + "/", Name: dir,
			Decode:         func(kv *mvccpb.KeyValue, prev *entry, _ bool) (*entry, bool) { return s.decode(kind, kv, prev) },
			OnChange:       s.rebuild,
			RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger, AfterList: afterList(dir),
		})
	}
	s.bindings = informer.New(informer.Options[*Binding]{
		Client: cli, Prefix: s.prefix + bindingsDir, Name: "bindings",
		Decode:         s.decodeBinding,
		OnChange:       s.rebuild,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger, AfterList: afterList("bindings"),
	})
	s.identity = informer.New(informer.Options[string]{
		Client: cli, Prefix: s.identityKey(), Name: "the fleet's identity",
		Decode:         s.decodeIdentity,
		OnChange:       s.rebuild,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger, AfterList: afterList(identityKey),
	})
	s.listed = make([]int64, len(s.spaces()))
	return s, nil
}

// CheckPrefix reports whether prefix can be a fleet's key prefix.
func CheckPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("etcd prefix %q: want a path that starts with / and does not end with one, e.g. %s", prefix, DefaultPrefix)
	}
	return nil
}

// KeyOf returns the etcd key of an object of a fleet under prefix
// (Options.Prefix).
func KeyOf(prefix, kind, name string) (string, error) {
	dir, ok := kindDirs[kind]
	if !ok {
		return "", fmt.Errorf("unknown kind %q; want Member, Profile or Tenant", kind)
	}
	return prefix + "/" + dir + "/" + name, nil
}

// Key returns the etcd key of an object.
func (s *Store) Key(kind, name string) (string, error) {
	return KeyOf(strings.TrimSuffix(s.prefix, "/"), kind, name)
}

// space is one key space of the store, mirrored by an informer.
type space interface {
	Run(context.Context) error
	Sync(context.Context) error
	Synced() bool
	Stale() error
	Unavailable() error
	Revision() int64
	Listed() int64
}

// spaces are the store's key spaces: the fleet's identity, the objects of
// each kind, the bindings.
func (s *Store) spaces() []space {
	return []space{s.identity, s.kinds[v1alpha1.KindMember], s.kinds[v1alpha1.KindProfile], s.kinds[v1alpha1.KindTenant], s.bindings}
}

// Sync checks that etcd is the fleet this node knew (fence.go; the first
// node of a new fleet writes its identity), then lists every key space
// once, so that a daemon serves the fleet from its first request rather
// than an empty one. A lost etcd is no error here: the store then serves
// what the node remembers, lost.
func (s *Store) Sync(ctx context.Context) error {
	if err := s.fence(ctx, true); err != nil {
		return err
	}
	for _, sp := range s.spaces() {
		if err := sp.Sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Run lists every key space of the store and watches it until ctx ends
// (package informer: listing again after a compaction or a failure). It
// returns nil on cancellation. From a failed watch (etcd unreachable, or
// without a leader) to the next successful list the snapshot is Stale;
// while etcd cannot be listed it keeps every object as last seen and says
// why in Unreadable too. Meanwhile it checks every Options.CheckInterval
// that etcd is still the fleet this node knew, and keeps what the node
// remembers in the state directory.
func (s *Store) Run(ctx context.Context) error {
	defer s.hold.Stop()
	var wg sync.WaitGroup
	for _, sp := range s.spaces() {
		wg.Go(func() { _ = sp.Run(ctx) }) // returns nil when ctx ends
	}
	wg.Go(func() { s.checkLoop(ctx) })
	wg.Go(func() { s.persistLoop(ctx) })
	wg.Wait()
	return nil
}

// PruneHold returns the node's prune hold: what it holds, and its
// confirmation.
func (s *Store) PruneHold() *store.Hold { return s.hold }

// rebuild makes the snapshots from the informers' items and state; every
// informer calls it after a change. An object whose key did not change
// keeps its pointer, so pointers change exactly with content. What the
// informers read is judged first (fence.go): an etcd that is not the
// fleet's publishes nothing of its own.
//
// The informers' state is read before their items: they list
// concurrently, and an informer sets its items with its state, so items
// read after a space was seen synced hold that space's list. Read the
// other way round, a list that lands while build runs would make a
// snapshot without its objects Synced.
func (s *Store) rebuild() {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	synced, stale, unavailable := true, error(nil), error(nil)
	for _, sp := range s.spaces() {
		synced = synced && sp.Synced()
		stale = cmpOr(stale, sp.Stale())
		unavailable = cmpOr(unavailable, sp.Unavailable())
	}
	full := s.build()
	full.Synced = synced
	if stale != nil {
		full.Stale = lastSeen(stale)
	}
	if unavailable != nil {
		full.Unreadable = lastSeen(unavailable)
	}
	s.checkRebuilt()
	if s.Lost() == nil { // else the fleet's snapshot stays as it was
		s.mu.Lock()
		s.full = full
		s.mu.Unlock()
	}
	s.publish()
}

// Changed is closed at the next change of the node's snapshot: with
// Options.Node, its own members (a change of another node's member, or of
// a binding that moves no member to or from it, leaves it asleep);
// [Store.FleetChanged] is closed at every change.
func (s *Store) Changed() <-chan struct{} { return s.Published.Changed() }

// FleetChanged is closed at the next change of the fleet the store reads —
// any member, profile, tenant or binding, whichever node it is bound to —
// or of whether it can read it.
func (s *Store) FleetChanged() <-chan struct{} { return s.fleetSig.Changed() }

// FleetSignal is FleetChanged's signal, for a notify.Signal that follows
// it among other sources.
func (s *Store) FleetSignal() *notify.Signal { return &s.fleetSig }

// publish publishes the node's snapshot through the prune hold, with
// s.buildMu held: the members bound to the node, or, while the store is
// lost, the snapshot frozen when it was lost, Stale and Unreadable with
// the reason.
func (s *Store) publish() {
	s.indexBindings()
	s.mu.Lock()
	full, lost, frozen := s.full, s.lost, s.frozen
	s.mu.Unlock()
	snap := full
	switch {
	case lost != nil:
		f := *frozen
		f.Synced, f.Stale, f.Unreadable, f.PruneHeld = true, lost, lost, nil
		snap = &f
	case s.node != "":
		snap = s.visible(full)
	}
	s.hold.Publish(snap, s.explicit(full))
	s.memChanged.Notify()
	s.fleetSig.Notify()
}

// explicit reports whether a member that left the node's snapshot left it
// on purpose, so that the prune hold lets it go: it is still in the fleet
// (bound to another node, or made again with another uid), or it was
// deleted through the store (its tombstone, write.go).
func (s *Store) explicit(full *store.Snapshot) func(name string) bool {
	items := s.kinds[v1alpha1.KindMember].Items()
	return func(name string) bool {
		if _, ok := full.Members[name]; ok {
			return true
		}
		it, ok := items[s.tombstoneKey(name)]
		return ok && it.Value != nil && it.Value.tomb
	}
}

// lastSeen is the store's words for etcd it cannot read: the objects stay
// as last seen. It matches ErrUnavailable (so store.ErrUnavailable).
func lastSeen(err error) error {
	return fmt.Errorf("%w; keeping every object as last seen: %w", ErrUnavailable, err)
}

// decode turns one object key's value into an entry; ok is false for a key
// that holds no object (one below an object's). A value that does not
// decode keeps prev's good object, like a manifest file that stops
// parsing.
func (s *Store) decode(kind string, kv *mvccpb.KeyValue, prev *entry) (*entry, bool) {
	key := string(kv.Key)
	name := strings.TrimPrefix(key, s.prefix+kindDirs[kind]+"/")
	if kind == v1alpha1.KindMember && strings.HasPrefix(name, tombstoneDir) {
		return &entry{tomb: true}, true
	}
	if name == "" || strings.Contains(name, "/") {
		return nil, false
	}
	e := &entry{}
	switch {
	case prev != nil:
		e.good = prev.good
	case s.saved[key] != nil:
		// The first read since a restart: the definition the node
		// remembers is the last good one.
		e.good = decode.FileResult{Path: key, Objects: []v1alpha1.Object{s.saved[key]}}
	}
	obj, errs := s.decodeValue(key, kind, name, kv.Value, kv.CreateRevision)
	if len(errs) > 0 {
		e.errs = errs
		s.log.Error("etcd holds an object that does not decode; its last good definition stays in effect", "key", key, "err", errs.Error())
		return e, true
	}
	obj.GetMeta().ResourceVersion = strconv.FormatInt(kv.ModRevision, 10)
	e.good = decode.FileResult{Path: key, Objects: []v1alpha1.Object{obj}}
	return e, true
}

// decodeValue decodes a stored object strictly, as a manifest file is
// decoded, and restores the metadata the store owns (which the decoder
// drops from files).
func (s *Store) decodeValue(key, kind, name string, value []byte, createRev int64) (v1alpha1.Object, decode.ErrorList) {
	fail := func(format string, args ...any) decode.ErrorList {
		return decode.ErrorList{&decode.Error{File: key, Msg: fmt.Sprintf(format, args...)}}
	}
	if len(value) > s.maxBytes {
		return nil, fail("value is %d bytes, over the limit of %d bytes on one object", len(value), s.maxBytes)
	}
	f := decode.Manifest(key, value)
	if len(f.Errors) > 0 {
		return nil, f.Errors
	}
	if len(f.Objects) != 1 {
		return nil, fail("want exactly one object, got %d", len(f.Objects))
	}
	obj := f.Objects[0]
	if obj.GetObjectKind() != kind || obj.GetName() != name {
		return nil, fail("holds %s/%s; the key names %s/%s", obj.GetObjectKind(), obj.GetName(), kind, name)
	}
	m := obj.GetMeta()
	m.UID, m.Generation, m.CreationTimestamp = ownedMeta(value, createRev)
	return obj, nil
}

// ownedMeta returns the metadata the store keeps in a value. A value put
// by hand (etcdctl put KEY "$(cat member.yaml)", YAML or JSON) has none:
// its uid is derived from the key's create revision, so that it is stable
// for the life of the key and kept when the store first writes the object,
// and its generation is 1.
func ownedMeta(value []byte, createRev int64) (uid string, gen int64, created *time.Time) {
	var owned storedMeta
	if json.Valid(value) {
		_ = json.Unmarshal(value, &owned) // a wrong type is as good as absent
	}
	uid = owned.Metadata.UID
	if uid == "" {
		uid = fmt.Sprintf("00000000-0000-4000-8000-%012x", createRev)
	}
	return uid, max(owned.Metadata.Generation, 1), owned.Metadata.CreationTimestamp
}

// storedMeta is the metadata the store writes with every object.
type storedMeta struct {
	Metadata struct {
		UID               string     `json:"uid"`
		Generation        int64      `json:"generation"`
		CreationTimestamp *time.Time `json:"creationTimestamp"`
	} `json:"metadata"`
}

// waitWritten returns once the snapshot reflects revision rev of kind's
// objects, so that a writer reads its own write; it needs Run.
func (s *Store) waitWritten(ctx context.Context, kind string, rev int64) error {
	return s.kinds[kind].WaitRevision(ctx, rev)
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
