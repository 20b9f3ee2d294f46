package fleet

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// nodeRefresh is how often a node looks again at what it publishes about
// its herdr (and its member count, which also wakes it on change). It asks
// the controllers — whether herdr is reachable, and herdr's version and
// protocol as its last ping answered (their herdr cache) — nothing is
// asked of herdr or etcd, and it writes its registration only when
// something changed.
const nodeRefresh = 2 * time.Second

// nodeCoalesce is the least time between two rewrites of a node's
// registration for its member count: while the count changes fast (a
// fleet of hundreds converging), the changes of one second go into one
// write, the last value always written — not one write to etcd per
// member.
const nodeCoalesce = time.Second

// Local is what a node publishes about itself besides its flags: its herdr
// and how many members it reconciles (the controllers).
type Local interface {
	// Herdr is the node's herdr as the controllers see it: reachable (in
	// sync), and its version and protocol as its last ping answered.
	Herdr() v1alpha1.NodeHerdr
	// Members is how many members the node reconciles.
	Members() int
	// Changed is closed at the next change of the node's desired state or
	// of its members' status.
	Changed() <-chan struct{}
}

// Follow keeps the registration current with local until ctx ends: woken
// by every change of local and every nodeRefresh, it writes only what
// changed, and at most once per nodeCoalesce — a change less than that
// after the last write waits out the rest, then the value as it is then is
// written — except that herdr becoming reachable or unreachable (which
// makes the node Ready or not for the scheduler) is written at once.
func (r *Registration) Follow(ctx context.Context, local Local) {
	publishNode(ctx, r, local, r.o.Clock, r.o.Logger)
}

// nodeUpdater is what publishNode needs of the registration.
type nodeUpdater interface {
	Update(ctx context.Context, change func(*NodeInfo)) error
}

func publishNode(ctx context.Context, node nodeUpdater, local Local, clk clock.Clock, log *slog.Logger) {
	failing := false
	var lastWrite time.Time // when what was published last changed
	var last struct {
		h       v1alpha1.NodeHerdr
		members int
		set     bool
	}
	for {
		ch := local.Changed()
		h := local.Herdr()
		n := local.Members()
		if !last.set || n != last.members || h.Reachable != last.h.Reachable || h.Version != last.h.Version || h.Protocol != last.h.Protocol {
			lastWrite = clk.Now()
		}
		err := node.Update(ctx, func(info *NodeInfo) {
			since := info.Herdr.Since
			info.Herdr, info.Members = h, n
			info.Herdr.Since = since // Update moves it when Reachable changes
		})
		if err == nil {
			last.h, last.members, last.set = h, n, true
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("update the node's registration in etcd; retrying", "err", err)
			failing = true
		case err == nil && failing:
			log.Info("node registration updated again")
			failing = false
		}
		t := clk.NewTimer(nodeRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ch:
		case <-t.C():
		}
		t.Stop()
		// The count's rewrite waits out nodeCoalesce after the last one;
		// herdr's reachability does not: a change of it ends the wait.
		if wait := lastWrite.Add(nodeCoalesce).Sub(clk.Now()); wait > 0 {
			t := clk.NewTimer(wait)
		coalesce:
			for {
				ch := local.Changed()
				if local.Herdr().Reachable != last.h.Reachable {
					break
				}
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C():
					break coalesce
				case <-ch:
				}
			}
			t.Stop()
		}
	}
}
