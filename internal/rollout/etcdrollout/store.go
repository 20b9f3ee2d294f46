// Package etcdrollout keeps the revision histories of a fleet's Profiles
// and Members (internal/rollout's [rollout.Store]) in etcd, under the
// fleet's prefix, where every node reads them:
//
//	PREFIX/revisions/profiles/NAME/rev/0000000003   one revision (its uid, number, cause, time, spec)
//	PREFIX/revisions/members/NAME/rev/0000000012
//	PREFIX/revisions/profiles/NAME/halt            the profile's stopped rollout, if any
//
// One key per revision keeps each value within etcd's request size (an
// object may be 512 KiB; ten of them would not fit in one value), and the
// keys are bounded: at most [rollout.MaxRevisions] revisions and one halt
// per object, and an object's keys are deleted with its history.
//
// Reads never wait on etcd: an informer (internal/etcd/informer) mirrors
// the keys, and Get builds a history from the mirror with the changes this
// node asked for and has not written yet applied on top. Update never
// blocks: Run writes in the background, for each object reading its keys,
// applying every change asked for to what etcd holds, and writing the
// difference in one transaction that holds only if no key of the object
// changed, appeared or went since it was read (read again and retried
// otherwise; retried with backoff while etcd does not answer). So every
// node may record a Profile's revision as it sees the change: the first
// writes it, the others find it written and change nothing. A
// transaction whose answer was lost may have committed: before its
// changes are applied again, etcd's history tells whether it was the
// object's next change — so a change is never applied twice, e.g. on a
// history another node cleared in between.
//
// It never holds its lock over etcd I/O and never writes another prefix's
// keys.
package etcdrollout

import (
	"bytes"
	"cmp"
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

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/rollout"
)

// Defaults for Options.
const (
	DefaultPrefix         = "/fleetd"
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryInterval  = 500 * time.Millisecond
	// DefaultMaxValueBytes bounds one revision or halt, written or read:
	// above the etcd store's largest object, below etcd's request limit.
	DefaultMaxValueBytes = 1 << 20
	// maxConflicts bounds the reads and transactions of one write that
	// other nodes keep beating; it is tried again later.
	maxConflicts = 5
)

// dirs are the key directories of each kind's histories.
var dirs = map[string]string{v1alpha1.KindProfile: "profiles", v1alpha1.KindMember: "members"}

// Options configure a Store. nil means defaults.
type Options struct {
	// Prefix is the fleet's key prefix, without a trailing slash; default
	// DefaultPrefix.
	Prefix         string
	RequestTimeout time.Duration
	RetryInterval  time.Duration
	MaxValueBytes  int
	Clock          clock.Clock
	Logger         *slog.Logger
}

// Store is the fleet's histories in etcd. It implements [rollout.Store].
type Store struct {
	cli  *clientv3.Client
	root string // PREFIX/revisions/
	o    Options
	inf  *informer.Informer[*entry]

	mu      sync.Mutex
	hist    map[key]rollout.History // built from the mirror at each change
	pending map[key][]func(*rollout.History) bool
	wake    chan struct{}
	changed notify.Signal

	// doubts are the objects whose last transaction's answer was lost:
	// it may have committed. Only Run's writer uses them.
	doubts map[key]doubt
}

// doubt is a transaction whose answer was lost (an error after it was
// sent): it may have committed.
type doubt struct {
	read    int64              // the revision its guard read the object's keys at
	changes map[string]*string // key → the value it put, nil for a delete
	n       int                // how many of the object's pending changes it applied
}

var _ rollout.Store = (*Store)(nil)

type key struct{ kind, name string }

// entry is one key: a revision or a halt of the object named by kind and
// name.
type entry struct {
	k    key
	rev  *stored
	halt *rollout.Halt
}

// stored is the value of a revision's key: the revision and its object's
// uid.
type stored struct {
	UID string `json:"uid,omitempty"`
	rollout.Revision
}

// New returns the Store of the histories under cli's fleet prefix;
// nothing is read until Sync or Run.
func New(cli *clientv3.Client, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	o.RequestTimeout = cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	o.RetryInterval = cmp.Or(o.RetryInterval, DefaultRetryInterval)
	o.MaxValueBytes = cmp.Or(o.MaxValueBytes, DefaultMaxValueBytes)
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.Logger = cmp.Or(o.Logger, slog.Default())
	s := &Store{cli: cli, root: o.Prefix + "/revisions/", o: o, hist: map[key]rollout.History{},
		pending: map[key][]func(*rollout.History) bool{}, wake: make(chan struct{}, 1), doubts: map[key]doubt{}}
	s.inf = informer.New(informer.Options[*entry]{
		Client: cli, Prefix: s.root, Name: "revisions", Decode: s.decode, OnChange: s.rebuild,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger,
	})
	s.changed.Follow(s.inf.Signal())
	return s
}

// Sync reads the histories once, before Run.
func (s *Store) Sync(ctx context.Context) error { return s.inf.Sync(ctx) }

// Run follows the histories and writes what Update asked for, until ctx
// ends; it returns nil.
func (s *Store) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.inf.Run(ctx) })
	wg.Go(func() { s.write(ctx) })
	wg.Wait()
	return nil
}

// objectPrefix is the prefix of every key of k's history.
func (s *Store) objectPrefix(k key) string { return s.root + dirs[k.kind] + "/" + k.name + "/" }

func (s *Store) revKey(k key, n int64) string {
	return fmt.Sprintf("%srev/%010d", s.objectPrefix(k), n)
}

func (s *Store) haltKey(k key) string { return s.objectPrefix(k) + "halt" }

// parseKey reads a key under the root; ok false for a key that is not a
// revision's or a halt's.
func (s *Store) parseKey(full string) (k key, rev int64, halt, ok bool) {
	rest, found := strings.CutPrefix(full, s.root)
	if !found {
		return key{}, 0, false, false
	}
	parts := strings.Split(rest, "/")
	for kind, dir := range dirs {
		if len(parts) < 3 || parts[0] != dir || !v1alpha1.IsObjectName(parts[1]) {
			continue
		}
		k = key{kind, parts[1]}
		switch {
		case len(parts) == 3 && parts[2] == "halt":
			return k, 0, true, true
		case len(parts) == 4 && parts[2] == "rev":
			n, err := strconv.ParseInt(parts[3], 10, 64)
			return k, n, false, err == nil && n > 0
		}
	}
	return key{}, 0, false, false
}

func (s *Store) decode(kv *mvccpb.KeyValue, _ *entry, _ bool) (*entry, bool) {
	e, err := s.decodeKV(kv)
	if err != nil {
		s.o.Logger.Error("etcd holds a revision that does not decode; it is left out", "key", string(kv.Key), "err", err)
		return nil, false
	}
	return e, e != nil
}

// decodeKV reads one key: nil (and no error) for a key that is not one of
// ours.
func (s *Store) decodeKV(kv *mvccpb.KeyValue) (*entry, error) {
	k, n, halt, ok := s.parseKey(string(kv.Key))
	if !ok {
		return nil, nil
	}
	if len(kv.Value) > s.o.MaxValueBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", len(kv.Value), s.o.MaxValueBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(kv.Value))
	dec.DisallowUnknownFields()
	e := &entry{k: k}
	if halt {
		e.halt = &rollout.Halt{}
		return e, dec.Decode(e.halt)
	}
	e.rev = &stored{}
	if err := dec.Decode(e.rev); err != nil {
		return nil, err
	}
	if e.rev.Number != n {
		return nil, fmt.Errorf("revision %d stored at the key of revision %d", e.rev.Number, n)
	}
	return e, nil
}

// rebuild makes the histories from the mirror (the informer's OnChange).
func (s *Store) rebuild() {
	hist := map[key]rollout.History{}
	for _, it := range s.inf.Items() {
		if it.Value != nil {
			add(hist, it.Value)
		}
	}
	for k, h := range hist {
		hist[k] = sorted(h)
	}
	s.mu.Lock()
	s.hist = hist
	s.mu.Unlock()
}

// add puts an entry into the history of its object.
func add(hist map[key]rollout.History, e *entry) {
	h := hist[e.k]
	switch {
	case e.halt != nil:
		h.Halt = e.halt
	case e.rev != nil:
		newest := !slices.ContainsFunc(h.Revisions, func(r rollout.Revision) bool { return r.Number > e.rev.Number })
		h.Revisions = append(h.Revisions, e.rev.Revision)
		if newest {
			h.UID = e.rev.UID // the object's uid is the newest revision's
		}
	}
	hist[e.k] = h
}

// sorted orders a history's revisions by number.
func sorted(h rollout.History) rollout.History {
	slices.SortFunc(h.Revisions, func(a, b rollout.Revision) int { return cmp.Compare(a.Number, b.Number) })
	return h
}

// Get implements [rollout.Store]: the history as mirrored, with the
// changes not written yet applied.
func (s *Store) Get(kind, name string) rollout.History {
	k := key{kind, name}
	s.mu.Lock()
	h := s.hist[k].Clone()
	fns := slices.Clone(s.pending[k])
	s.mu.Unlock()
	for _, fn := range fns {
		fn(&h)
	}
	return h
}

// Update implements [rollout.Store]: it never blocks; Run writes.
func (s *Store) Update(kind, name string, change func(*rollout.History) bool) error {
	if _, ok := dirs[kind]; !ok {
		return fmt.Errorf("%s has no revisions: only Profiles and Members do", kind)
	}
	k := key{kind, name}
	s.mu.Lock()
	s.pending[k] = append(s.pending[k], change)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.changed.Notify()
	return nil
}

// Names implements [rollout.Store].
func (s *Store) Names(kind string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.hist {
		if k.kind == kind {
			out = append(out, k.name)
		}
	}
	for k := range s.pending {
		if k.kind == kind && !slices.Contains(out, k.name) {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// Changed implements [rollout.Store].
func (s *Store) Changed() <-chan struct{} { return s.changed.Changed() }

// write writes what Update asked for, until ctx ends.
func (s *Store) write(ctx context.Context) {
	retry.New(s.o.RetryInterval, s.o.Clock).OnWake(ctx, s.wake, s.writeAll)
}

// writeAll writes every change Update asked for; failed says some could
// not be written (they stay asked for).
func (s *Store) writeAll(ctx context.Context) (failed bool) {
	s.mu.Lock()
	want := maps.Clone(s.pending)
	s.mu.Unlock()
	for k, fns := range want {
		if err := s.put(ctx, k, fns); err != nil {
			failed = true
			s.o.Logger.Warn("could not keep a revision history in etcd; retrying", "kind", k.kind, "name", k.name, "err", err)
			continue
		}
		s.mu.Lock()
		if left := s.pending[k][len(fns):]; len(left) > 0 {
			s.pending[k] = left
		} else {
			delete(s.pending, k)
		}
		s.mu.Unlock()
		// Get no longer applies them: its answer changes when the mirror
		// moved past the write before it was taken off.
		s.changed.Notify()
	}
	return failed
}

// errConflict: other nodes kept changing the object's keys.
var errConflict = errors.New("the history kept changing under the write")

// put applies fns to k's history as etcd holds it and writes the
// difference in one transaction guarded by every key it read. A
// transaction whose answer was lost is looked up first: the changes it
// applied are not applied again when it committed (the history may have
// changed since, e.g. been cleared by another node).
func (s *Store) put(ctx context.Context, k key, fns []func(*rollout.History) bool) error {
	if d, ok := s.doubts[k]; ok {
		landed, err := s.landed(ctx, k, d)
		if err != nil {
			return fmt.Errorf("find out whether a write whose answer was lost committed: %w", err)
		}
		delete(s.doubts, k)
		if landed {
			fns = fns[d.n:]
		}
	}
	for range maxConflicts {
		rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
		resp, err := s.cli.Get(rctx, s.objectPrefix(k), clientv3.WithPrefix())
		cancel()
		if err != nil {
			return err
		}
		cur := map[key]rollout.History{}
		held := map[string]int64{} // key → mod revision
		for _, kv := range resp.Kvs {
			held[string(kv.Key)] = kv.ModRevision
			if e, err := s.decodeKV(kv); err == nil && e != nil {
				add(cur, e)
			}
		}
		before := sorted(cur[k])
		next := before.Clone()
		changed := false
		for _, fn := range fns {
			changed = fn(&next) || changed
		}
		if !changed {
			return nil
		}
		ops, changes, err := s.ops(k, before, next, held)
		if err != nil || len(ops) == 0 {
			return err
		}
		// No key of the object changed, none was deleted, none was
		// created since the read: the transaction commits as the object's
		// first change after it, or not at all.
		read := resp.Header.Revision
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.objectPrefix(k)), "<", read+1).WithPrefix()}
		for key, rev := range held {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
		}
		rctx, cancel = context.WithTimeout(ctx, s.o.RequestTimeout)
		tr, err := s.cli.Txn(rctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			s.doubts[k] = doubt{read: read, changes: changes, n: len(fns)}
			return err
		}
		if tr.Succeeded {
			return nil
		}
	}
	return errConflict
}

// ops are the puts and deletes that take k's keys from before to next,
// and the same as changes (key → the value put, nil for a delete). Every
// key of the object etcd held (held) that next does not keep is deleted —
// a value that did not decode too.
func (s *Store) ops(k key, before, next rollout.History, held map[string]int64) ([]clientv3.Op, map[string]*string, error) {
	want := map[string][]byte{}
	for _, r := range next.Revisions {
		v, err := json.Marshal(stored{UID: next.UID, Revision: r})
		if err != nil {
			return nil, nil, err
		}
		want[s.revKey(k, r.Number)] = v
	}
	if next.Halt != nil {
		v, err := json.Marshal(next.Halt)
		if err != nil {
			return nil, nil, err
		}
		want[s.haltKey(k)] = v
	}
	var ops []clientv3.Op
	changes := map[string]*string{}
	for key := range held {
		if _, keep := want[key]; !keep {
			ops = append(ops, clientv3.OpDelete(key))
			changes[key] = nil
		}
	}
	old := map[string][]byte{}
	for _, r := range before.Revisions {
		if v, err := json.Marshal(stored{UID: before.UID, Revision: r}); err == nil {
			old[s.revKey(k, r.Number)] = v
		}
	}
	if before.Halt != nil {
		if v, err := json.Marshal(before.Halt); err == nil {
			old[s.haltKey(k)] = v
		}
	}
	for key, v := range want {
		if len(v) > s.o.MaxValueBytes {
			return nil, nil, fmt.Errorf("%s: %d bytes, over the limit of %d", key, len(v), s.o.MaxValueBytes)
		}
		if _, ok := held[key]; ok && bytes.Equal(old[key], v) {
			continue
		}
		ops = append(ops, clientv3.OpPut(key, string(v)))
		changes[key] = new(string(v))
	}
	return ops, changes, nil
}

// landed reports whether d committed. Guarded by the object's keys as
// read at d.read, it committed only as the object's first change after
// that revision: etcd's history from there is watched up to its newest
// revision, and the first change of the object compared with d's. A
// history compacted past d.read is an error: whether d committed cannot be
// told.
func (s *Store) landed(ctx context.Context, k key, d doubt) (bool, error) {
	// Not WithRequireLeader: the client puts watches whose contexts carry
	// the same metadata on one stream, and etcd answers a progress request
	// only once every watch of its stream has caught up — the mirror's
	// informer, on that stream, may not have under load (CI's run at stop
	// 30 waited 20 s so). Without a leader this watch just times out.
	wctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	defer cancel()
	ch := s.cli.Watch(wctx, s.objectPrefix(k), clientv3.WithPrefix(), clientv3.WithRev(d.read+1),
		clientv3.WithCreatedNotify(), clientv3.WithProgressNotify())
	if created, ok := <-ch; !ok || created.Err() != nil {
		return false, cmp.Or(created.Err(), wctx.Err(), errors.New("watch closed"))
	}
	resp, err := s.cli.Get(wctx, s.objectPrefix(k), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	newest := resp.Header.Revision
	if newest <= d.read {
		return false, nil
	}
	// A notice of the watch's progress, once it has sent every change up
	// to newest, says the object did not change. etcd answers a request
	// for it only once the watch has caught up (and drops it before): it
	// is asked again every RetryInterval.
	for {
		if err := s.cli.RequestProgress(wctx); err != nil {
			return false, err
		}
		again := s.o.Clock.NewTimer(s.o.RetryInterval)
		select {
		case wr, ok := <-ch:
			again.Stop()
			switch {
			case !ok:
				return false, cmp.Or(wctx.Err(), errors.New("watch closed"))
			case wr.Err() != nil:
				return false, wr.Err()
			case len(wr.Events) > 0:
				return sameChange(wr.Events, d.changes), nil
			case wr.IsProgressNotify() && wr.Header.Revision >= newest:
				return false, nil // the object did not change since d.read
			}
		case <-again.C():
		}
	}
}

// sameChange reports whether the events of the first revision in events
// (a watch sends one revision's events together) are changes.
func sameChange(events []*clientv3.Event, changes map[string]*string) bool {
	rev, n := events[0].Kv.ModRevision, 0
	for _, ev := range events {
		if ev.Kv.ModRevision != rev {
			break
		}
		n++
		v, ok := changes[string(ev.Kv.Key)]
		switch {
		case !ok:
			return false
		case ev.Type == clientv3.EventTypeDelete:
			if v != nil {
				return false
			}
		case v == nil || *v != string(ev.Kv.Value):
			return false
		}
	}
	return n == len(changes)
}
