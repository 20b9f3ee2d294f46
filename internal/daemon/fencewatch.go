package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/fencewatch"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// fenceWatch keeps the node's fence watchdog (package fencewatch) armed:
// a process of its own that closes — or, with --fence-policy pause,
// interrupts — the panes of the members another node may take over, at the
// fence's deadline, when this fleetd does not run to do it (stopped, hung).
type fenceWatch struct {
	// argv runs the watchdog (EtcdConfig.FenceWatchdog), stderr is where
	// it logs.
	argv   []string
	stderr io.Writer
	fence  fenceDeadlines
	// renewed fires at each renewal of the node's lease, which moves the
	// deadline on.
	renewed func() <-chan struct{}
	// members are the node's members (those pinned to it are spared),
	// changed fires when they change.
	members func() *store.Snapshot
	changed func() <-chan struct{}
	node    string
	policy  controllers.FencePolicy
	log     *slog.Logger
	// clock paces the restarts of a watchdog that exited (nil: the wall
	// clock).
	clock clock.Clock
}

// fenceDeadlines is what the watchdog's plan is made of: the node's fence
// (package fleet's Fence).
type fenceDeadlines interface {
	Deadlines() (lose, takeover time.Duration)
	Changed() <-chan struct{}
}

// watchdogGrace is how long a watchdog whose input ended has to exit
// before it is killed.
const watchdogGrace = 5 * time.Second

// Run starts the watchdog on herdr's socket and arms it again at every
// change of the fence, renewal of the lease and change of the node's
// members, until ctx ends; then the watchdog exits without acting. A
// watchdog that cannot start or exits is started again, with backoff, and
// logged as an error: until then the node runs without it. It returns
// nil.
func (w *fenceWatch) Run(ctx context.Context, socket string) error {
	argv := append(slices.Clip(w.argv), "--herdr-socket", socket)
	b := retry.New(time.Second, w.clock)
	for {
		wd, err := fencewatch.Start(argv, w.stderr)
		if err != nil {
			w.log.Error("no fence watchdog: a fleetd stopped or hung past its fence deadline would leave its members' agents running beside their replacements", "err", err)
		} else {
			exited, why := wd.Exited()
			for stop := false; !stop; {
				renewed, fenced, changed := w.renewed(), w.fence.Changed(), w.changed()
				wd.Arm(w.plan())
				select {
				case <-ctx.Done():
					// A watchdog that did not stand down cleanly is this
					// node's trouble to report, not a reason to fail the stop.
					if err := wd.Close(watchdogGrace); err != nil {
						w.log.Warn("the fence watchdog did not exit cleanly", "err", err)
					}
					return nil
				case <-exited:
					w.log.Error("the fence watchdog exited; starting it again", "err", why())
					stop = true
				case <-renewed:
				case <-fenced:
				case <-changed:
				}
			}
		}
		if !b.Wait(ctx) {
			return nil
		}
	}
}

// plan is what the watchdog does if nothing arms it again: at the fence's
// deadline plus a quarter of the margin left before another node may
// start the members (this fleetd, if it runs, acts at the deadline
// itself), it closes or interrupts every member's tab but those pinned to
// this node.
func (w *fenceWatch) plan() fencewatch.Plan {
	now := fencewatch.BootTime() // read first: a pause from here on brings the plan forward, never back
	lose, takeover := w.fence.Deadlines()
	var keep []string
	for name, m := range w.members().Members {
		if m.Spec.NodeName == w.node {
			keep = append(keep, name)
		}
	}
	slices.Sort(keep)
	p := fencewatch.Plan{
		FireAt: now + int64(lose+(takeover-lose)/4), Policy: fencewatch.Close, Prefix: controllers.TabLabelPrefix, Keep: keep,
		Why: fmt.Sprintf("fleetd did not act on node %s's fence deadline, and another node may take its members over %s after it", w.node, (takeover - lose).Round(time.Millisecond)),
	}
	if w.policy == controllers.FencePause {
		p.Policy, p.Keys = fencewatch.Pause, controllers.FenceInterruptKeys
	}
	return p
}
