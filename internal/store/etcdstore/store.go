package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Defaults for Options.
const (
	DefaultPrefix         = "/fleetd"
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxObjectBytes = 512 << 10
	DefaultRetryInterval  = time.Second
)

const (
	// listPage is how many keys one request of a full list reads.
	listPage = 500
	// maxWriteAttempts bounds how often an unconditional Apply reads and
	// writes again when another writer changed the object in between.
	maxWriteAttempts = 5
)

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
	// RetryInterval is how long Run waits before it lists again after etcd
	// failed it; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock drives the retries and creation timestamps; default the wall
	// clock.
	Clock clock.Clock
	// Logger receives a line per change of etcd's availability and per
	// object etcd holds that does not decode; default slog.Default().
	Logger *slog.Logger
	// Node, if set, makes the snapshot show only the Members bound to this
	// node (placement.go); Fleet still shows them all. Empty: every
	// Member, as with one node per prefix.
	Node string
}

// Store is the desired state kept in etcd. See the package documentation.
type Store struct {
	cli      *clientv3.Client
	prefix   string // Options.Prefix + "/"
	timeout  time.Duration
	maxBytes int
	retry    time.Duration
	clock    clock.Clock
	log      *slog.Logger

	entries   map[string]*entry        // by etcd key; owned by Run
	nodeKVs   map[string]*nodeEntry    // PREFIX/nodes/NAME by key; owned by Run
	bindKVs   map[string]*bindingEntry // PREFIX/bindings/MEMBER by key; owned by Run
	statusKVs map[string]*statusEntry  // PREFIX/status/MEMBER by key; owned by Run
	tokenKV   *tokenEntry              // PREFIX/tokens/primary; owned by Run
	node      string                   // Options.Node
	// listed, if set, is called by Run between a list and the watch from
	// its revision (tests: make changes and compact etcd there).
	listed func(rev int64)

	mu       sync.Mutex
	snap     *store.Snapshot
	rev      int64         // the etcd revision snap reflects; 0 before the first list
	advanced chan struct{} // closed (and replaced) whenever rev grows
	watchers map[chan struct{}]struct{}
	nodes    []NodeInfo               // the registered nodes, sorted by name
	full     *store.Snapshot          // every Member, whatever node; snap is it filtered by node
	binds    map[string]Binding       // by member name
	bindSeen map[string]*bindingEntry // bindKVs as of the last publish, for the scheduler
	fleetCh  chan struct{}            // closed (and replaced) whenever full, binds or nodes change
	// lost holds the nodes that have bindings but no registration (their
	// lease expired): when this store first saw them gone, and their last
	// registration if it saw one (nodes.go).
	lost map[string]lostNode
	// statuses are the published member statuses by member name
	// (status.go); statusCh is closed (and replaced) when they change.
	statuses map[string]statusRecord
	statusCh chan struct{}
	// primary is the fleet's primary token hash as last read (tokens.go);
	// tokenCh is closed (and replaced) when it changes.
	primary FleetToken
	tokenCh chan struct{}
}

// entry is what the store knows about one key.
type entry struct {
	modRev int64
	kind   string
	good   decode.FileResult // the last good object, alone; no Objects if none
	errs   decode.ErrorList  // problems of the current value
}

var _ store.Store = (*Store)(nil)

// defaultShared fills the options every entry point of the package has in
// common: the request timeout, the clock and the logger.
func defaultShared(timeout *time.Duration, clk *clock.Clock, log **slog.Logger) {
	if *timeout <= 0 {
		*timeout = DefaultRequestTimeout
	}
	if *clk == nil {
		*clk = clock.Real{}
	}
	if *log == nil {
		*log = slog.Default()
	}
}

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
	if !strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("etcd prefix %q: want a path that starts with / and does not end with one, e.g. %s", o.Prefix, DefaultPrefix)
	}
	if o.MaxObjectBytes <= 0 {
		o.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	defaultShared(&o.RequestTimeout, &o.Clock, &o.Logger)
	return &Store{
		cli:       cli,
		prefix:    o.Prefix + "/",
		timeout:   o.RequestTimeout,
		maxBytes:  o.MaxObjectBytes,
		retry:     o.RetryInterval,
		clock:     o.Clock,
		log:       o.Logger,
		entries:   map[string]*entry{},
		nodeKVs:   map[string]*nodeEntry{},
		bindKVs:   map[string]*bindingEntry{},
		statusKVs: map[string]*statusEntry{},
		statuses:  map[string]statusRecord{},
		statusCh:  make(chan struct{}),
		tokenCh:   make(chan struct{}),
		node:      o.Node,
		full:      emptySnapshot(),
		fleetCh:   make(chan struct{}),
		lost:      map[string]lostNode{},
		snap:      emptySnapshot(),
		advanced:  make(chan struct{}),
		watchers:  map[chan struct{}]struct{}{},
	}, nil
}

// Key returns the etcd key of an object.
func (s *Store) Key(kind, name string) (string, error) {
	dir, ok := kindDirs[kind]
	if !ok {
		return "", fmt.Errorf("unknown kind %q; want Member, Profile or Tenant", kind)
	}
	return s.prefix + dir + "/" + name, nil
}

// parseKey returns the kind and name an etcd key holds; ok is false for a
// key that is not an object's (nodes, and anything else under the prefix).
func (s *Store) parseKey(key string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return "", "", false
	}
	dir, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	for k, d := range kindDirs {
		if d == dir {
			return k, name, true
		}
	}
	return "", "", false
}

// Snapshot returns the desired state as last listed or watched. It never
// waits on etcd.
func (s *Store) Snapshot() *store.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// Revision returns the etcd revision the snapshot reflects.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Get returns one object by kind and name, from the snapshot.
func (s *Store) Get(kind, name string) (v1alpha1.Object, bool) {
	snap := s.Snapshot()
	switch kind {
	case v1alpha1.KindMember:
		o, ok := snap.Members[name]
		return o, ok
	case v1alpha1.KindProfile:
		o, ok := snap.Profiles[name]
		return o, ok
	case v1alpha1.KindTenant:
		o, ok := snap.Tenants[name]
		return o, ok
	}
	return nil, false
}

// List returns every object of one kind, sorted by name, from the snapshot.
func (s *Store) List(kind string) []v1alpha1.Object {
	snap := s.Snapshot()
	var out []v1alpha1.Object
	switch kind {
	case v1alpha1.KindMember:
		for _, n := range slices.Sorted(maps.Keys(snap.Members)) {
			out = append(out, snap.Members[n])
		}
	case v1alpha1.KindProfile:
		for _, n := range slices.Sorted(maps.Keys(snap.Profiles)) {
			out = append(out, snap.Profiles[n])
		}
	case v1alpha1.KindTenant:
		for _, n := range slices.Sorted(maps.Keys(snap.Tenants)) {
			out = append(out, snap.Tenants[n])
		}
	}
	return out
}

// Watch returns a channel signalled after every snapshot change until ctx
// ends. Signals coalesce.
func (s *Store) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	})
	return ch
}

// Sync lists the prefix once, so that the snapshot is Synced before
// anything reads it (fleetd calls it before it serves requests). It must
// not be called once Run runs.
func (s *Store) Sync(ctx context.Context) error {
	_, err := s.relist(ctx)
	return err
}

// Run lists the prefix and watches it from the listed revision until ctx
// ends, listing again after a compaction or a failure. It returns nil on
// cancellation. From a failed watch (etcd unreachable, or without a
// leader: the watch requires one) to the next successful list the snapshot
// is Stale; while etcd cannot be listed it keeps every object as last seen
// and says why in DirErr too.
func (s *Store) Run(ctx context.Context) error {
	for {
		rev, err := s.relist(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.unavailable(err)
			if !clock.Sleep(ctx, s.clock, s.retry) {
				return nil
			}
			continue
		}
		if s.listed != nil {
			s.listed(rev)
		}
		started := s.clock.Now()
		err = s.watch(ctx, rev+1)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			s.log.Info("etcd compacted past the watched revision; listing again", "prefix", s.prefix, "revision", rev)
			continue
		}
		s.log.Warn("etcd watch ended; listing again", "prefix", s.prefix, "err", err)
		s.stale(err)
		// A watch that fails as soon as it starts lists again at most
		// once per RetryInterval, never in a tight loop of requests.
		if d := s.retry - s.clock.Now().Sub(started); d > 0 && !clock.Sleep(ctx, s.clock, d) {
			return nil
		}
	}
}

// relist reads every key under the prefix at one revision, in pages, and
// publishes the result; it returns that revision.
func (s *Store) relist(ctx context.Context) (int64, error) {
	next := map[string]*entry{}
	nextNodes := map[string]*nodeEntry{}
	nextBinds := map[string]*bindingEntry{}
	nextStatus := map[string]*statusEntry{}
	var nextToken *tokenEntry
	var rev int64
	key, end := s.prefix, clientv3.GetPrefixRangeEnd(s.prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Get(rctx, key, opts...)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", s.prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			if e := s.decodeNode(k, kv.Value, kv.ModRevision, s.nodeKVs[k]); e != nil {
				nextNodes[k] = e
			} else if b := s.decodeBinding(k, kv.Value, kv.ModRevision, s.bindKVs[k]); b != nil {
				nextBinds[k] = b
			} else if st := s.decodeStatus(k, kv.Value, kv.ModRevision, s.statusKVs[k]); st != nil {
				nextStatus[k] = st
			} else if tok := s.decodeToken(k, kv.Value, kv.ModRevision, s.tokenKV); tok != nil {
				nextToken = tok
			} else if e := s.decode(k, kv.Value, kv.ModRevision, kv.CreateRevision, s.entries[k]); e != nil {
				next[k] = e
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	s.entries, s.nodeKVs, s.bindKVs, s.statusKVs, s.tokenKV = next, nextNodes, nextBinds, nextStatus, nextToken
	s.publishNodes()
	s.publishStatuses()
	s.publishToken()
	s.publish(rev, true)
	return rev, nil
}

// child returns the name a key holds if it is PREFIX/DIR/NAME (dir ends in
// a slash), one segment with nothing below it.
func (s *Store) child(dir, key string) (string, bool) {
	name, ok := strings.CutPrefix(key, s.prefix+dir)
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// applyEvent applies one watch event on key k to the entries of its kind:
// a delete removes k, a put stores its value as decode reads it.
func applyEvent[E any](m map[string]*E, k string, ev *clientv3.Event, decode func(key string, value []byte, modRev int64, prev *E) *E) {
	if ev.Type == clientv3.EventTypeDelete {
		delete(m, k)
		return
	}
	m[k] = decode(k, ev.Kv.Value, ev.Kv.ModRevision, m[k])
}

// watch applies the changes under the prefix from rev on until the watch
// fails; it returns why (rpctypes.ErrCompacted after a compaction). It
// also ends when the client's connection to etcd stays out of Ready for
// connGrace (no member reachable): the client's watch would wait quietly
// for etcd to come back.
func (s *Store) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	defer cancel(nil)
	if conn := s.cli.ActiveConnection(); conn != nil {
		go s.watchConn(wctx, conn, cancel)
	}
	ch := s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify())
	for resp := range ch {
		if err := resp.Err(); err != nil {
			return err
		}
		changed, nodesChanged, statusChanged, tokenChanged := false, false, false, false
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if _, ok := s.statusMember(k); ok {
				statusChanged = true
				applyEvent(s.statusKVs, k, ev, s.decodeStatus)
				continue
			}
			if k == s.tokenKey() {
				tokenChanged = true
				if ev.Type == clientv3.EventTypeDelete {
					s.tokenKV = nil
				} else {
					s.tokenKV = s.decodeToken(k, ev.Kv.Value, ev.Kv.ModRevision, s.tokenKV)
				}
				continue
			}
			if _, ok := s.nodeName(k); ok {
				nodesChanged = true
				applyEvent(s.nodeKVs, k, ev, s.decodeNode)
				continue
			}
			if _, ok := s.bindingMember(k); ok {
				changed = true
				applyEvent(s.bindKVs, k, ev, s.decodeBinding)
				continue
			}
			switch ev.Type {
			case clientv3.EventTypeDelete:
				if _, ok := s.entries[k]; ok {
					delete(s.entries, k)
					changed = true
				}
			case clientv3.EventTypePut:
				if e := s.decode(k, ev.Kv.Value, ev.Kv.ModRevision, ev.Kv.CreateRevision, s.entries[k]); e != nil {
					s.entries[k] = e
					changed = true
				}
			}
		}
		if nodesChanged {
			s.publishNodes()
		}
		if statusChanged {
			s.publishStatuses()
		}
		if tokenChanged {
			s.publishToken()
		}
		s.publish(resp.Header.Revision, changed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := context.Cause(wctx); err != nil {
		return err
	}
	return errors.New("watch channel closed")
}

// connGrace is how long the client's connection may stay out of Ready
// before the watch ends for want of a reachable member: three retry
// intervals, since a failover to another member, at once on an idle
// machine, has been seen to take over a second on a loaded one (its
// connections' keep-alives late).
const connGrace = 3

// watchConn cancels the watch (ctx) when conn leaves Ready and is not back
// within connGrace retry intervals: a failover to another member
// reconnects at once, no reachable member does not.
func (s *Store) watchConn(ctx context.Context, conn *grpc.ClientConn, cancel context.CancelCauseFunc) {
	for st := conn.GetState(); ; st = conn.GetState() {
		if st != connectivity.Ready {
			gctx, stop := context.WithCancel(ctx)
			t := s.clock.NewTimer(connGrace * s.retry)
			go func() {
				select {
				case <-t.C():
					stop()
				case <-gctx.Done():
				}
			}()
			for st != connectivity.Ready && conn.WaitForStateChange(gctx, st) {
				st = conn.GetState()
			}
			t.Stop()
			stop()
			if ctx.Err() != nil {
				return
			}
			if st != connectivity.Ready {
				cancel(fmt.Errorf("no etcd member reachable (connection %s for %s)", st, connGrace*s.retry))
				return
			}
		}
		if !conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// decode turns one key's value into an entry; nil for a key that holds no
// object. A value that does not decode keeps prev's good object, like a
// manifest file that stops parsing.
func (s *Store) decode(key string, value []byte, modRev, createRev int64, prev *entry) *entry {
	kind, name, ok := s.parseKey(key)
	if !ok {
		return nil
	}
	if prev != nil && prev.modRev == modRev {
		return prev
	}
	e := &entry{modRev: modRev, kind: kind}
	if prev != nil {
		e.good = prev.good
	}
	obj, errs := s.decodeValue(key, kind, name, value, createRev)
	if len(errs) > 0 {
		e.errs = errs
		s.log.Error("etcd holds an object that does not decode; its last good definition stays in effect", "key", key, "err", errs.Error())
		return e
	}
	obj.GetMeta().ResourceVersion = strconv.FormatInt(modRev, 10)
	e.good = decode.FileResult{Path: key, Objects: []v1alpha1.Object{obj}}
	return e
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

// unavailable records that etcd cannot be listed: the objects stay as last
// seen, DirErr and Stale say why.
func (s *Store) unavailable(err error) {
	err = fmt.Errorf("etcd unavailable; keeping every object as last seen: %w", err)
	s.mu.Lock()
	prev := s.snap
	s.mu.Unlock()
	if prev.DirErr != nil && prev.DirErr.Error() == err.Error() {
		return
	}
	if prev.DirErr == nil {
		s.log.Error("etcd unavailable; keeping every object as last seen", "prefix", s.prefix, "err", err)
	}
	next := *prev
	next.DirErr, next.Stale = err, err
	s.install(&next, 0)
}

// stale records that the watch ended for err: until a list succeeds the
// snapshot may be behind etcd (another node may have taken over a member
// meanwhile), so it is Stale; the objects stay as last seen.
func (s *Store) stale(err error) {
	s.mu.Lock()
	prev := s.snap
	s.mu.Unlock()
	if prev.Stale != nil {
		return
	}
	next := *prev
	next.Stale = fmt.Errorf("etcd unavailable; keeping every object as last seen: %w", err)
	s.install(&next, 0)
}

// publish installs a snapshot of the entries at rev if they changed (or
// the previous snapshot was not synced, had DirErr or was Stale), and
// records rev.
func (s *Store) publish(rev int64, changed bool) {
	s.mu.Lock()
	prev := s.snap
	s.mu.Unlock()
	if !changed && prev.Synced && prev.DirErr == nil && prev.Stale == nil {
		s.install(nil, rev)
		return
	}
	if prev.DirErr != nil {
		s.log.Info("etcd available again", "prefix", s.prefix, "revision", rev)
	}
	full := s.build()
	binds := map[string]Binding{}
	for k, e := range s.bindKVs {
		if name, _ := s.bindingMember(k); e.binding != nil {
			binds[name] = *e.binding
		}
	}
	snap := full
	if s.node != "" {
		snap = visible(full, s.bindKVs, s.prefix, s.node)
	}
	s.mu.Lock()
	s.full, s.binds, s.bindSeen = full, binds, maps.Clone(s.bindKVs)
	s.markLostLocked(nil)
	s.mu.Unlock()
	s.install(snap, rev)
}

// FleetChanged returns a channel closed at the next change of the fleet
// (Fleet: any Member, binding or node).
func (s *Store) FleetChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fleetCh
}

// fleetChangedLocked wakes whoever waits on FleetChanged.
func (s *Store) fleetChangedLocked() {
	close(s.fleetCh)
	s.fleetCh = make(chan struct{})
}

// install swaps in next (unless nil) and advances the revision (unless
// rev is 0), and wakes whoever waits on either.
func (s *Store) install(next *store.Snapshot, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if next != nil {
		s.snap = next
		s.fleetChangedLocked()
		for ch := range s.watchers {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if rev > s.rev {
		s.rev = rev
		close(s.advanced)
		s.advanced = make(chan struct{})
	}
}

// build assembles a snapshot from the entries. An entry whose revision did
// not change keeps its object, so pointers change exactly with content.
func (s *Store) build() *store.Snapshot {
	next := emptySnapshot()
	next.Synced = true
	keys := slices.Sorted(maps.Keys(s.entries))
	var goods []decode.FileResult
	for _, k := range keys {
		e := s.entries[k]
		next.Errors = append(next.Errors, e.errs...)
		if len(e.good.Objects) == 0 {
			continue
		}
		goods = append(goods, e.good)
		obj := e.good.Objects[0]
		next.Sources[store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}] = k
		switch o := obj.(type) {
		case *v1alpha1.Member:
			next.Members[o.Name] = o
		case *v1alpha1.Profile:
			next.Profiles[o.Name] = o
		case *v1alpha1.Tenant:
			next.Tenants[o.Name] = o
		}
	}
	next.Errors.Sort()
	next.Unresolved = decode.CheckReferences(goods, func(kind, name string) bool {
		switch kind {
		case v1alpha1.KindProfile:
			_, ok := next.Profiles[name]
			return ok
		case v1alpha1.KindTenant:
			_, ok := next.Tenants[name]
			return ok
		case v1alpha1.KindMember:
			_, ok := next.Members[name]
			return ok
		}
		return false
	}, "etcd under "+strings.TrimSuffix(s.prefix, "/"))
	next.Unresolved = append(next.Unresolved, decode.CheckWorktrees(goods, func(name string) *v1alpha1.Profile { return next.Profiles[name] })...)
	next.Unresolved.Sort()
	return next
}

func emptySnapshot() *store.Snapshot {
	return &store.Snapshot{
		Members:  map[string]*v1alpha1.Member{},
		Profiles: map[string]*v1alpha1.Profile{},
		Tenants:  map[string]*v1alpha1.Tenant{},
		Sources:  map[store.Key]string{},
	}
}

// waitRev returns once the snapshot reflects revision rev, so that a
// writer reads its own write; it needs Run to be running.
func (s *Store) waitRev(ctx context.Context, rev int64) error {
	for {
		s.mu.Lock()
		cur, ch := s.rev, s.advanced
		s.mu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("written at etcd revision %d, but this node's watch has not seen it yet (at %d): %w", rev, cur, ctx.Err())
		}
	}
}
