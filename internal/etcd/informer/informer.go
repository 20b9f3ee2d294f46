package informer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
)

// Defaults of [Options].
const (
	DefaultPageSize       = 500
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryInterval  = time.Second
)

// connGrace is how many retry intervals the client's connection may stay
// out of Ready before a watch ends for want of a reachable member: a
// failover to another member, at once on an idle machine, has been seen
// to take over a second on a loaded one (its connections' keep-alives
// late).
const connGrace = 3

// Item is one key as the informer last read it.
type Item[E any] struct {
	Value          E
	ModRevision    int64
	CreateRevision int64
	// Lease is the lease the key is under; 0 for none.
	Lease int64
}

// Options configure an [Informer]. Client, Prefix and Decode are required.
type Options[E any] struct {
	Client *clientv3.Client
	// Prefix selects the keys: every key that starts with it.
	Prefix string
	// Name says what the keys are in log lines ("members", "the fleet
	// mailbox"); default the prefix.
	Name string
	// Decode reads one key's value. prev is what it returned for that key
	// before (had is false for a key it has not seen). ok false leaves the
	// key out: it is not one of this informer's (a key below one it reads,
	// say). A value Decode cannot read is Decode's to log and to show; it
	// may keep prev's last good form. It runs on Run's goroutine, without a
	// lock held.
	Decode func(kv *mvccpb.KeyValue, prev E, had bool) (value E, ok bool)
	// OnChange, if set, runs on Run's goroutine after every change of the
	// items or of the state, before the revision they reflect is
	// published.
	OnChange func()
	// PageSize is how many keys one list request reads; default
	// DefaultPageSize.
	PageSize int64
	// RequestTimeout bounds each list request; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryInterval is the base of the backoff between lists after etcd
	// failed one, and a third of how long the connection may stay out of
	// Ready during a watch; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock drives the backoff and the connection's grace; default the
	// wall clock.
	Clock clock.Clock
	// Logger receives a line when etcd becomes unavailable and available
	// again and when a watch ends; default slog.Default().
	Logger *slog.Logger
	// AfterList, if set, is called by Run between a list and the watch
	// from its revision (tests write and compact etcd there).
	AfterList func(rev int64)
}

// Informer mirrors the keys under one prefix. See the package
// documentation.
type Informer[E any] struct {
	o Options[E]

	mu          sync.Mutex
	items       map[string]Item[E] // replaced, never changed, once published
	itemsRev    int64              // the revision items reflect, set with them
	rev         int64              // published after OnChange
	listed      int64              // the revision of the last good list
	synced      bool
	stale       error
	unavailable error
	changed     notify.Signal
}

// New returns an Informer; nothing is read until Sync or Run.
func New[E any](o Options[E]) *Informer[E] {
	o.Name = cmp.Or(o.Name, o.Prefix)
	o.PageSize = cmp.Or(o.PageSize, DefaultPageSize)
	o.RequestTimeout = cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	o.RetryInterval = cmp.Or(o.RetryInterval, DefaultRetryInterval)
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return &Informer[E]{o: o, items: map[string]Item[E]{}}
}

// Items returns every key's item as last read. The map is shared and must
// not be modified; it is replaced, not changed, at the next change.
func (i *Informer[E]) Items() map[string]Item[E] {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.items
}

// Get returns one key's item as last read.
func (i *Informer[E]) Get(key string) (Item[E], bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	it, ok := i.items[key]
	return it, ok
}

// Lookup returns one key's item as last read, with the revision the
// items reflect — set with them, before OnChange runs for them, so that
// OnChange can tell a key that is gone from one the items have not
// reached yet (unlike [Informer.Revision], published after OnChange).
// 0 before the first list.
func (i *Informer[E]) Lookup(key string) (it Item[E], ok bool, rev int64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	it, ok = i.items[key]
	return it, ok, i.itemsRev
}

// Revision returns the etcd revision the items reflect once OnChange has
// run for them; 0 before the first list.
func (i *Informer[E]) Revision() int64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.rev
}

// Listed returns the revision of the last good list, set before OnChange
// runs for it; 0 before the first. Unlike [Informer.Revision] it can go
// down: a list of an etcd restored from an older backup is at that etcd's
// revision, which a consumer that remembers a higher one can tell.
func (i *Informer[E]) Listed() int64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.listed
}

// Synced reports whether a list has succeeded yet.
func (i *Informer[E]) Synced() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.synced
}

// Stale returns why the items may be behind etcd (from the end of a watch
// to the next good list); nil while they are current.
func (i *Informer[E]) Stale() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.stale
}

// Unavailable returns why etcd cannot be listed, while it cannot; the
// items are then the last ones read.
func (i *Informer[E]) Unavailable() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.unavailable
}

// Changed returns a channel closed at the next change: of the items, of
// the state, of the revision.
func (i *Informer[E]) Changed() <-chan struct{} { return i.changed.Changed() }

// Signal is the change signal itself, for a notify.Signal that follows
// this informer among other sources ([notify.Signal.Follow]).
func (i *Informer[E]) Signal() *notify.Signal { return &i.changed }

// WaitRevision returns once the items (and what OnChange built from them)
// reflect revision rev, or an error when ctx ends first. It needs Run.
func (i *Informer[E]) WaitRevision(ctx context.Context, rev int64) error {
	if err := notify.Wait(ctx, &i.changed, func() bool { return i.Revision() >= rev }); err != nil {
		return fmt.Errorf("written at etcd revision %d, but this node's watch of %s has not seen it yet (at %d): %w", rev, i.o.Name, i.Revision(), err)
	}
	return nil
}

// Sync lists the prefix once, so that a reader started before Run sees the
// keys rather than none.
func (i *Informer[E]) Sync(ctx context.Context) error {
	_, err := i.list(ctx)
	return err
}

// Run lists the prefix and watches it from the listed revision until ctx
// ends, listing again after a compaction or a failure (see the package
// documentation). It returns nil when ctx ends.
func (i *Informer[E]) Run(ctx context.Context) error {
	b := retry.New(i.o.RetryInterval, i.o.Clock)
	healthy := retry.MaxFactor * i.o.RetryInterval // a watch that lasted this long was no failure in a row
	for {
		rev, err := i.list(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			i.failed(err)
			if !b.Wait(ctx) {
				return nil
			}
			continue
		}
		if i.o.AfterList != nil {
			i.o.AfterList(rev)
		}
		started := i.o.Clock.Now()
		err = i.watch(ctx, rev+1)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			i.o.Logger.Info("etcd compacted past the watched revision; listing again", "keys", i.o.Name, "revision", rev)
			continue
		}
		i.o.Logger.Warn("etcd watch ended; listing again", "keys", i.o.Name, "err", err)
		i.setStale(err)
		if i.o.Clock.Now().Sub(started) >= healthy {
			b.Reset()
		}
		if !b.Wait(ctx) {
			return nil
		}
	}
}

// list reads every key under the prefix at one revision, in pages,
// publishes them, and returns that revision.
func (i *Informer[E]) list(ctx context.Context) (int64, error) {
	prev := i.Items()
	next := make(map[string]Item[E], len(prev))
	var rev int64
	key, end := i.o.Prefix, clientv3.GetPrefixRangeEnd(i.o.Prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(i.o.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, i.o.RequestTimeout)
		resp, err := i.o.Client.Get(rctx, key, opts...)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", i.o.Prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if it, ok := i.decode(kv, prev); ok {
				next[string(kv.Key)] = it
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	i.mu.Lock()
	wasDown := i.unavailable != nil
	i.items, i.itemsRev, i.synced, i.stale, i.unavailable, i.listed = next, rev, true, nil, nil, rev
	i.mu.Unlock()
	if wasDown {
		i.o.Logger.Info("etcd available again", "keys", i.o.Name, "revision", rev)
	}
	i.published(rev)
	return rev, nil
}

// decode is one key's item, decoded unless its mod revision is the one in
// prev; ok false for a key Decode leaves out.
func (i *Informer[E]) decode(kv *mvccpb.KeyValue, prev map[string]Item[E]) (Item[E], bool) {
	old, had := prev[string(kv.Key)]
	if had && old.ModRevision == kv.ModRevision {
		return old, true
	}
	v, ok := i.o.Decode(kv, old.Value, had)
	return Item[E]{Value: v, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision, Lease: kv.Lease}, ok
}

// published runs OnChange, then publishes rev (unless 0) and fires
// Changed.
func (i *Informer[E]) published(rev int64) {
	if i.o.OnChange != nil {
		i.o.OnChange()
	}
	i.advance(rev)
}

// advance publishes rev (unless 0) and fires Changed.
func (i *Informer[E]) advance(rev int64) {
	i.mu.Lock()
	i.rev = max(i.rev, rev)
	i.mu.Unlock()
	i.changed.Notify()
}

// failed records that etcd cannot be listed: the items stay as last read,
// Stale and Unavailable say why.
func (i *Informer[E]) failed(err error) {
	i.mu.Lock()
	first := i.unavailable == nil
	same := !first && i.unavailable.Error() == err.Error()
	i.unavailable, i.stale = err, err
	i.mu.Unlock()
	if first {
		i.o.Logger.Error("etcd unavailable; keeping every key as last read", "keys", i.o.Name, "err", err)
	}
	if !same {
		i.published(0)
	}
}

// setStale records that the watch ended for err: until a list succeeds the
// items may be behind etcd.
func (i *Informer[E]) setStale(err error) {
	i.mu.Lock()
	was := i.stale
	if was == nil {
		i.stale = err
	}
	i.mu.Unlock()
	if was == nil {
		i.published(0)
	}
}

// watch applies the changes under the prefix from rev on until the watch
// fails, and returns why (rpctypes.ErrCompacted after a compaction). It
// also ends when the client's connection stays out of Ready for connGrace
// retry intervals.
func (i *Informer[E]) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancelCause(clientv3.WithRequireLeader(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	if conn := i.o.Client.ActiveConnection(); conn != nil {
		wg.Go(func() { i.watchConn(wctx, conn, cancel) })
	}
	ch := i.o.Client.Watch(wctx, i.o.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify())
	// The responses are read into a queue of their own, so that those
	// that came while the last ones were applied are applied together.
	queue := make(chan clientv3.WatchResponse, watchBatch)
	wg.Go(func() {
		defer close(queue)
		for resp := range ch {
			select {
			case queue <- resp:
			case <-wctx.Done():
				return
			}
		}
	})
	for resp := range queue {
		events, rev, err := batch(resp, queue)
		if rev != 0 {
			i.apply(events, rev)
		}
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := context.Cause(wctx); err != nil {
		return err
	}
	return errors.New("watch channel closed")
}

// watchBatch bounds the watch responses applied together: one copy of
// the items and one OnChange for all of them.
const watchBatch = 256

// batch returns the events of first and of the responses queued behind
// it (up to watchBatch in all), in order, and the revision they reach;
// err is the first failed response's, whose events and those behind it
// are not taken (rev 0 if first failed).
func batch(first clientv3.WatchResponse, queue <-chan clientv3.WatchResponse) (events []*clientv3.Event, rev int64, err error) {
	if err := first.Err(); err != nil {
		return nil, 0, err
	}
	events, rev = first.Events, first.Header.Revision
	for range watchBatch - 1 {
		select {
		case resp, ok := <-queue:
			if !ok {
				return events, rev, nil
			}
			if err := resp.Err(); err != nil {
				return events, rev, err
			}
			events = append(events[:len(events):len(events)], resp.Events...)
			rev = resp.Header.Revision
		default:
			return events, rev, nil
		}
	}
	return events, rev, nil
}

// apply applies a watch's events, in order, and publishes rev.
func (i *Informer[E]) apply(events []*clientv3.Event, rev int64) {
	cur := i.Items()
	var next map[string]Item[E] // made on the first change
	edit := func() map[string]Item[E] {
		if next == nil {
			next = maps.Clone(cur)
		}
		return next
	}
	for _, ev := range events {
		k := string(ev.Kv.Key)
		base := cur // as the events before this one of the response left it
		if next != nil {
			base = next
		}
		if ev.Type == clientv3.EventTypeDelete {
			if _, ok := base[k]; ok {
				delete(edit(), k)
			}
			continue
		}
		if it, ok := i.decode(ev.Kv, base); ok {
			edit()[k] = it
		} else if _, had := base[k]; had {
			delete(edit(), k)
		}
	}
	i.mu.Lock()
	i.itemsRev = max(i.itemsRev, rev)
	if next != nil {
		i.items = next
	}
	i.mu.Unlock()
	if next == nil {
		i.advance(rev) // only the revision moved: nothing for OnChange to build
		return
	}
	i.published(rev)
}

// watchConn cancels the watch (ctx) when conn leaves Ready and is not back
// within connGrace retry intervals: a failover to another member
// reconnects at once, no reachable member does not.
func (i *Informer[E]) watchConn(ctx context.Context, conn *grpc.ClientConn, cancel context.CancelCauseFunc) {
	grace := connGrace * i.o.RetryInterval
	for st := conn.GetState(); ; st = conn.GetState() {
		if st != connectivity.Ready {
			gctx, stop := context.WithCancel(ctx)
			t := i.o.Clock.AfterFunc(grace, stop)
			for st != connectivity.Ready && conn.WaitForStateChange(gctx, st) {
				st = conn.GetState()
			}
			t.Stop()
			stop()
			if ctx.Err() != nil {
				return
			}
			if st != connectivity.Ready {
				cancel(fmt.Errorf("no etcd member reachable (connection %s for %s)", st, grace))
				return
			}
		}
		if !conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}
