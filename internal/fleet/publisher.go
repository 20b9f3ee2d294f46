package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/time/rate"

	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// Defaults for StatusPublisherOptions.
const (
	// DefaultStatusInterval is the least time between two writes of one
	// member's status once its burst is spent: changes in between are
	// coalesced into the next.
	DefaultStatusInterval = time.Second
	// DefaultStatusBurst is how many writes of one member's status may
	// follow each other without waiting (a member that starts goes
	// Pending, Starting, Ready at once); each Interval earns one back.
	DefaultStatusBurst = 3
	// DefaultStatusInFlight bounds the status writes in flight at once.
	DefaultStatusInFlight = 4
)

// StatusSource is what a node publishes: the members it runs now.
type StatusSource interface {
	// Changed is closed at the next change of what Statuses returns.
	Changed() <-chan struct{}
	// Statuses returns the status of every member the node runs, by
	// member name: MemberUID, Status and Worker (Node and
	// BindingRevision are the publisher's).
	Statuses() map[string]PublishedStatus
}

// StatusPublisherOptions configure [PublishStatuses]. nil means defaults;
// Node is required.
type StatusPublisherOptions struct {
	Options
	// Node is the publishing node's name.
	Node string
	// Interval and Burst bound the writes of one member's status: Burst
	// at once, then one per Interval; defaults DefaultStatusInterval and
	// DefaultStatusBurst.
	Interval time.Duration
	Burst    int
	// MaxInFlight bounds the writes in flight at once; default
	// DefaultStatusInFlight.
	MaxInFlight int
}

// PublishStatuses keeps PREFIX/status/MEMBER current with src for every
// member the node runs until ctx ends, through kv (the client's KV, or a
// wrapper of it): a member's status is written only when it differs from
// what this node last wrote, at most Burst times in a row and then once
// per Interval per member (a token bucket, golang.org/x/time/rate; the
// changes in between coalesced into one write of the latest), at most
// MaxInFlight writes at once, and deleted when the node stops running the
// member. A status is published under the member's binding as st reads it
// (none: nothing to publish under). An idle node makes no request at all.
//
// Every write is fenced on the key's revision as this node last wrote or
// read it. A write that finds another node's status there, published
// under a binding as new as this node's or newer, yields: this node no
// longer runs the member, it just has not seen its binding move yet. The
// statuses this node published before a restart for members it no longer
// runs (read from statuses) are deleted.
func PublishStatuses(ctx context.Context, kv clientv3.KV, st *etcdstore.Store, statuses *Statuses, src StatusSource, opts *StatusPublisherOptions) error {
	var o StatusPublisherOptions
	if opts != nil {
		o = *opts
	}
	if err := CheckNodeName(o.Node); err != nil {
		return err
	}
	o.Options = o.Options.withDefaults()
	if o.Interval <= 0 {
		o.Interval = DefaultStatusInterval
	}
	if o.Burst <= 0 {
		o.Burst = DefaultStatusBurst
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultStatusInFlight
	}
	p := &publisher{kv: kv, st: st, statuses: statuses, o: &o, sent: map[string]sentStatus{}, budget: map[string]*rate.Limiter{},
		busy: map[string]bool{}, cleared: map[string]int64{}, done: make(chan pubResult, o.MaxInFlight), boundAt: map[string]int64{}}
	return p.run(ctx, src)
}

type publisher struct {
	kv       clientv3.KV
	st       *etcdstore.Store
	statuses *Statuses
	o        *StatusPublisherOptions

	// Owned by run.
	sent    map[string]sentStatus    // what this node last wrote (or found) per member
	budget  map[string]*rate.Limiter // each member's writes
	busy    map[string]bool          // members with a request in flight
	cleared map[string]int64         // leftovers of a restart already deleted, at their revision
	done    chan pubResult
	failing bool
	// boundAt is the binding revision of each member the last pass
	// wanted published, as it read it (0: unbound).
	boundAt map[string]int64
}

// sentStatus is a member's key as this node last wrote or read it.
type sentStatus struct {
	value  string // "" when only the revision is known
	modRev int64
	// foreign: another node's status, newer by its binding; this node
	// does not write over it while what it would write stays value.
	foreign bool
}

type pubResult struct {
	member string
	del    bool
	value  string
	rev    int64            // the key's revision after a write, or found on a failed compare
	found  *PublishedStatus // the status found on a failed compare, if it decodes
	foundV string           // its raw value
	ok     bool             // the compare held
	err    error            // etcd did not answer
	ours   PublishedStatus  // what was written
}

func (p *publisher) run(ctx context.Context, src StatusSource) error {
	var srcCh, storeCh, bindCh <-chan struct{}
	var due time.Time // when a member's interval ends; zero for none
	for pass := true; ; {
		// Woken by what the node runs, by its own snapshot and by a
		// binding of one of its members that moved, never by other nodes'
		// members or statuses: a pass re-reads every member the node runs,
		// and the fleet's other changes cost it a look at its own bindings.
		if pass {
			srcCh, storeCh, bindCh = src.Changed(), p.st.Changed(), p.st.BindingsChanged()
			due = time.Time{}
			if wait := p.pass(ctx, src.Statuses()); wait > 0 {
				due = p.o.Clock.Now().Add(wait)
			}
		}
		pass = true
		var timer <-chan time.Time
		stop := func() {}
		if !due.IsZero() {
			t := p.o.Clock.NewTimer(max(due.Sub(p.o.Clock.Now()), 0))
			timer, stop = t.C(), func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			for len(p.busy) > 0 { // cancelled with ctx
				r := <-p.done
				delete(p.busy, r.member)
			}
			return nil
		case <-srcCh:
		case <-storeCh:
		case <-bindCh:
			bindCh = p.st.BindingsChanged()
			pass = p.rebound()
		case <-timer:
		case r := <-p.done:
			p.settle(r)
		}
		stop()
	}
}

// rebound reports whether the binding of a member the last pass
// published under moved since.
func (p *publisher) rebound() bool {
	for name, rev := range p.boundAt {
		if p.st.BindingRevision(name) != rev {
			return true
		}
	}
	return false
}

// pass starts the writes and deletes that are due and returns how long
// until the next one that waits for its interval (0 for none).
func (p *publisher) pass(ctx context.Context, want map[string]PublishedStatus) (wait time.Duration) {
	now := p.o.Clock.Now()
	clear(p.boundAt)
	for name := range want {
		p.boundAt[name] = p.st.BindingRevision(name)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if p.busy[name] {
			continue
		}
		rec := want[name]
		rec.Node = p.o.Node
		rec.BindingRevision = p.boundAt[name]
		if rec.BindingRevision == 0 {
			continue // not bound here as far as this node read: nothing to publish under
		}
		value := encodeStatus(&rec)
		prev, known := p.sent[name]
		if known && prev.value == value {
			continue
		}
		lim := p.budget[name]
		if lim == nil {
			lim = rate.NewLimiter(rate.Every(p.o.Interval), p.o.Burst)
			p.budget[name] = lim
		}
		r := lim.ReserveN(now, 1)
		if left := r.DelayFrom(now); left > 0 {
			r.CancelAt(now)
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		if len(p.busy) >= p.o.MaxInFlight {
			r.CancelAt(now)
			return wait // a completion wakes the loop
		}
		p.start(ctx, name, func(rctx context.Context) pubResult { return p.put(rctx, name, value, rec, prev) })
	}
	// Deletes: what this node wrote and no longer runs, and what it
	// published before a restart.
	gone := map[string]int64{}
	for name, s := range p.sent {
		if _, running := want[name]; !running && !s.foreign {
			gone[name] = s.modRev
		}
	}
	leftovers := p.statuses.publishedBy(p.o.Node)
	for name, rev := range leftovers {
		if _, running := want[name]; !running {
			if _, known := p.sent[name]; !known && p.cleared[name] != rev {
				gone[name] = rev
			}
		}
	}
	for name, rev := range p.cleared {
		if leftovers[name] != rev {
			delete(p.cleared, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gone)) {
		if p.busy[name] {
			continue
		}
		if len(p.busy) >= p.o.MaxInFlight {
			return wait
		}
		rev := gone[name]
		if _, known := p.sent[name]; !known {
			p.cleared[name] = rev
		}
		p.start(ctx, name, func(rctx context.Context) pubResult { return p.del(rctx, name, rev) })
	}
	for name, s := range p.sent {
		if _, running := want[name]; !running && s.foreign && !p.busy[name] {
			delete(p.sent, name)
		}
	}
	for name := range p.budget {
		if _, running := want[name]; !running {
			delete(p.budget, name)
		}
	}
	return wait
}

func (p *publisher) start(ctx context.Context, name string, req func(context.Context) pubResult) {
	p.busy[name] = true
	go func() {
		rctx, cancel := context.WithTimeout(ctx, p.o.RequestTimeout) // cancelled at shutdown: nothing is known written
		defer cancel()
		r := req(rctx)
		r.member = name
		p.done <- r
	}()
}

// put writes value over the revision this node knows of the key (none:
// over an absent key); on a failed compare it returns what it found.
func (p *publisher) put(ctx context.Context, name, value string, rec PublishedStatus, prev sentStatus) pubResult {
	key := statusKey(p.o.Prefix, name)
	resp, err := p.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", prev.modRev)).
		Then(clientv3.OpPut(key, value)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return pubResult{err: err}
	}
	r := pubResult{value: value, ok: resp.Succeeded, ours: rec, rev: resp.Header.Revision}
	if !resp.Succeeded {
		r.rev = 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			r.rev, r.foundV = kvs[0].ModRevision, string(kvs[0].Value)
			r.found, _ = decodePublished(kvs[0].Value)
		}
	}
	return r
}

func (p *publisher) del(ctx context.Context, name string, rev int64) pubResult {
	key := statusKey(p.o.Prefix, name)
	resp, err := p.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return pubResult{del: true, err: err}
	}
	return pubResult{del: true, ok: resp.Succeeded}
}

// settle records a finished request.
func (p *publisher) settle(r pubResult) {
	delete(p.busy, r.member)
	switch {
	case r.err != nil:
		if !p.failing && !errors.Is(r.err, context.Canceled) {
			p.o.Logger.Warn("publish member status to etcd; retrying", "member", r.member, "err", r.err)
		}
		p.failing = true
		return
	case p.failing:
		p.o.Logger.Info("member status published to etcd again")
		p.failing = false
	}
	switch {
	case r.del:
		delete(p.sent, r.member) // deleted, or someone else's now
	case r.ok:
		p.sent[r.member] = sentStatus{value: r.value, modRev: r.rev}
	case r.foundV == r.value && r.rev != 0:
		p.sent[r.member] = sentStatus{value: r.value, modRev: r.rev} // already there (a restart)
	case r.found != nil && r.found.Node != p.o.Node && r.found.BindingRevision >= r.ours.BindingRevision:
		p.sent[r.member] = sentStatus{value: r.value, foreign: true} // the member runs elsewhere now
	default:
		// Gone, stale, ours from before, or undecodable: write over what is
		// there at the next pass.
		p.sent[r.member] = sentStatus{modRev: r.rev}
	}
}

// encodeStatus is a record as it is stored, within DefaultMaxStatusBytes:
// over it, the worker's messaging state goes first, then the plan, then
// every message but the phase and the conditions' reasons.
func encodeStatus(rec *PublishedStatus) string {
	b, _ := json.Marshal(rec)
	if len(b) <= DefaultMaxStatusBytes {
		return string(b)
	}
	r := *rec
	r.Worker = nil
	if b, _ = json.Marshal(&r); len(b) <= DefaultMaxStatusBytes {
		return string(b)
	}
	r.Status.Plan = nil
	if b, _ = json.Marshal(&r); len(b) <= DefaultMaxStatusBytes {
		return string(b)
	}
	r.Status.LastError, r.Status.ResumedSession = "", nil
	conds := slices.Clone(r.Status.Conditions)
	for i := range conds {
		conds[i].Message = ""
	}
	r.Status.Conditions = conds
	b, _ = json.Marshal(&r)
	return string(b)
}
