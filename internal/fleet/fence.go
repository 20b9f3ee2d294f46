package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Fencing: a node that cannot confirm it is still the node its members
// are bound to must not run them on, because the scheduler moves them
// away from a node whose registration is gone. A node knows when its
// lease lives without asking etcd: etcd renews a lease when a keep-alive
// reaches it, never before the keep-alive was sent, and a new etcd leader
// only extends leases. So with S the moment the last keep-alive etcd
// answered was sent (session.Renewal), the node's registration lives at
// least until S + TTL, the scheduler sees the node lost no earlier, and
// rebinds its members no earlier than S + TTL + RescheduleAfter (its
// grace, counted on its own clock from when it saw the loss; a new
// scheduler counts again from its start). The fence works on S alone:
//
//   - hold at S + 2·TTL/3 — a renewal is sent every TTL/3, and one not
//     answered within the next TTL/3 is late — or at once when one
//     fails: the node types nothing into any pane (the messaging core's
//     prompts are held, not lost) and starts, restarts or replaces no
//     agent (the controllers treat the snapshot as stale);
//   - lose at S + TTL + RescheduleAfter − margin (never before S + TTL):
//     the node closes the panes of the members it would lose, every one
//     whose spec.nodeName does not pin it to this node (those wait for
//     it), so that they are gone before another node can start them.
//
// margin covers what could make the node's count end after the
// scheduler's: clock rates (FenceClockRate of TTL + RescheduleAfter: the
// node, etcd's leader and the scheduler each measure a duration on their
// own clock) and the closing itself (FenceCloseTime, at most half the
// grace: herdr's tab.close for each member, queued on the controllers'
// workers). With the defaults (TTL 10 s, --reschedule-after 5m) the node
// closes them 10 s + 5m − 11.2 s after its last renewal, 11.2 s before
// another node may start them. The node counts
// on the longer of its monotonic and wall clocks (session.Since), so that
// a machine that slept through the deadline closes at once when it
// wakes.
//
// A node is confirmed again — the hold lifts, nothing is closed any more,
// members still bound to it start again — once its registration's lease
// is renewed and its store has read the bindings up to the registration's
// first write under that lease: a node whose lease expired registers
// again, and a rebind that happened before that is in what its store
// reads (the scheduler never rebinds from a registered node: its
// transaction holds only while the node's key is absent). A registration
// another fleetd holds (Registration.Registered's Conflict) loses every
// member at once.

// Defaults of the fence's margin.
const (
	// FenceClockRate is the clock-rate difference the margin allows
	// between this node, etcd's leader and the scheduler: 2%.
	FenceClockRate = 0.02
	// FenceCloseTime is how long the margin allows for closing the panes
	// of the members a node would lose.
	FenceCloseTime = 5 * time.Second
)

// FenceOptions configure a [Fence].
type FenceOptions struct {
	Options
	// Client is the node's etcd client, whose watches the fence asks for
	// their progress (clientv3.Watcher.RequestProgress) when its store
	// has not read the bindings up to its registration: a watch with no
	// event since tells its revision only when asked.
	Client *clientv3.Client
	// Node is this node's name: a member whose spec.nodeName is this node
	// is held, never closed (the scheduler does not move it).
	Node string
	// RescheduleAfter is the fleet's --reschedule-after.
	RescheduleAfter time.Duration
}

// Fence is this node's hold on its members while it cannot confirm, in
// etcd, that they are still its own (see the comment above).
type Fence struct {
	cli      *clientv3.Client
	sessions *session.Session
	reg      *Registration
	// bindings is the revision up to which this node's store read the
	// bindings.
	bindings func() int64
	node     string
	o        Options
	holdAt   time.Duration // after the basis: hold
	loseAt   time.Duration // after the basis: lose the members another node may take
	takeover time.Duration // after the basis: the earliest another node may start them

	mu      sync.Mutex
	basis   time.Time // the last renewal sent of a lease the node was confirmed under
	state   fenceState
	changed notify.Signal
}

type fenceState int

const (
	fenceConfirmed fenceState = iota
	fenceHolding
	fenceLosing
)

// NewFence returns the fence of the node registered by reg under
// sessions, whose store reads the bindings up to bindings().
func NewFence(sessions *session.Session, reg *Registration, bindings func() int64, opts *FenceOptions) *Fence {
	fo := *opts
	o := fo.Options.withDefaults()
	ttl := sessions.TTL()
	margin := min(FenceCloseTime, fo.RescheduleAfter/2) + time.Duration(FenceClockRate*float64(ttl+fo.RescheduleAfter))
	f := &Fence{cli: fo.Client, sessions: sessions, reg: reg, bindings: bindings, node: fo.Node, o: o,
		holdAt: 2 * sessions.RenewEvery(), loseAt: max(ttl, ttl+fo.RescheduleAfter-margin), takeover: ttl + fo.RescheduleAfter,
		basis: sessions.Renewal().Sent}
	return f
}

// LoseAfter is how long after its last renewal the node closes the panes
// of the members it would lose.
func (f *Fence) LoseAfter() time.Duration { return f.loseAt }

// Deadlines returns, counted from now, when this node closes the panes of
// the members it would lose (lose) and the earliest moment another node
// may start them (takeover), from its last confirmed renewal: both shrink
// while the node is not confirmed, and are negative once past. A
// watchdog outside the process (package fencewatch) keeps them for a
// fleetd that does not run.
func (f *Fence) Deadlines() (lose, takeover time.Duration) {
	f.check()
	f.mu.Lock()
	defer f.mu.Unlock()
	age := session.Since(f.o.Clock, f.basis)
	return f.loseAt - age, f.takeover - age
}

// verdict is the fence as it stands now.
type verdict struct {
	state fenceState
	why   string // for a hold or a loss
	// behind: the store has not read the bindings up to the
	// registration.
	behind bool
}

// check brings the basis up to date and judges the fence now.
func (f *Fence) check() verdict {
	r := f.sessions.Renewal()
	reg := f.reg.Registered()
	seen := f.bindings()
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Failing == nil && r.Lease != 0 && r.Lease == reg.Lease && reg.Conflict == nil && seen >= reg.Since && r.Sent.After(f.basis) {
		f.basis = r.Sent
	}
	age := session.Since(f.o.Clock, f.basis)
	last := f.basis.UTC().Format(time.RFC3339)
	behind := seen < reg.Since
	switch {
	case reg.Conflict != nil:
		return verdict{state: fenceLosing, why: reg.Conflict.Error()}
	case age < f.holdAt && r.Failing == nil && r.Lease == reg.Lease && !behind:
		return verdict{state: fenceConfirmed}
	case age >= f.loseAt:
		return verdict{state: fenceLosing, behind: behind, why: fmt.Sprintf("this node has not confirmed its lease in etcd since %s (%s ago), so another node may take its members over from %s on",
			last, age.Round(time.Second), f.basis.Add(f.takeover).UTC().Format(time.RFC3339))}
	}
	why := "its renewals are late"
	switch {
	case r.Failing != nil:
		why = r.Failing.Error()
	case r.Lease != reg.Lease:
		why = "its lease was lost and it is not registered under the new one yet"
	case seen < reg.Since:
		why = "it has not read the bindings since it registered again"
	}
	return verdict{state: fenceHolding, behind: behind, why: fmt.Sprintf("this node has not confirmed its lease in etcd since %s (%s); holding every prompt and start until it does, and closing the panes of the members another node may take over at %s",
		last, why, f.basis.Add(f.loseAt).UTC().Format(time.RFC3339))}
}

// Hold returns why this node types nothing into panes and starts no
// agent now; nil while it is confirmed.
func (f *Fence) Hold() error {
	if v := f.check(); v.state != fenceConfirmed {
		return fenceError(v.why)
	}
	return nil
}

// Check returns, for member m, why no agent is started, restarted or
// typed to now (hold; nil while the node is confirmed) and why its pane
// is to close at once (lose: past the node's fence deadline, unless
// spec.nodeName pins m to this node).
func (f *Fence) Check(m *v1alpha1.Member) (hold, lose error) {
	v := f.check()
	if v.state == fenceConfirmed {
		return nil, nil
	}
	hold = fenceError(v.why)
	if v.state == fenceLosing && m.Spec.NodeName != f.node {
		lose = hold
	}
	return hold, lose
}

type fenceError string

func (e fenceError) Error() string { return string(e) }

// Changed returns a channel closed when the fence's state changes
// (confirmed, holding, losing); it needs Run.
func (f *Fence) Changed() <-chan struct{} { return f.changed.Changed() }

// Run follows the lease's renewals, the registration and the bindings
// read, and the fence's deadlines, so that Changed fires when the state
// changes, until ctx ends. It returns nil.
func (f *Fence) Run(ctx context.Context, bindingsChanged func() <-chan struct{}) error {
	asked := false // a progress request went out at the last wake, and the store is still behind
	for {
		renewed, registered, bound := f.sessions.RenewalChanged(), f.reg.Changed(), bindingsChanged()
		v := f.check()
		f.mu.Lock()
		was := f.state
		f.state = v.state
		next := f.basis.Add(f.holdAt)
		if v.state == fenceHolding {
			next = f.basis.Add(f.loseAt)
		}
		f.mu.Unlock()
		if v.state != was {
			f.report(was, v)
			f.changed.Notify()
		}
		if v.behind && f.cli != nil {
			// Asked again at the next wake, a renewal later at most. A
			// request unanswered since the last wake may wait on a watch
			// that began at etcd's newest revision: a write of the
			// registration moves the revision past it (Touch).
			next = f.o.Clock.Now().Add(f.sessions.RenewEvery())
			if asked {
				_ = f.reg.Touch(ctx) // failing, asked again at the next wake
			}
			pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), f.o.RequestTimeout)
			_ = f.cli.RequestProgress(pctx) // the informers' watches: same stream
			cancel()
		}
		asked = v.behind && f.cli != nil
		var wake <-chan time.Time
		stop := func() {}
		if v.state != fenceLosing || v.behind {
			t := f.o.Clock.NewTimer(max(next.Sub(f.o.Clock.Now()), time.Millisecond))
			wake, stop = t.C(), func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-renewed:
		case <-registered:
		case <-bound:
		case <-wake:
		}
		stop()
	}
}

// report logs a change of the fence's state.
func (f *Fence) report(was fenceState, v verdict) {
	switch v.state {
	case fenceConfirmed:
		f.o.Logger.Info("this node confirmed its lease in etcd again; prompts and starts go on", "node", f.node)
	case fenceHolding:
		f.o.Logger.Warn("holding every prompt and start", "node", f.node, "why", v.why)
	case fenceLosing:
		f.o.Logger.Error("fenced: closing the panes of the members another node may take over", "node", f.node, "why", v.why, "was", was)
	}
}
