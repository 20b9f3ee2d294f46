package messaging

import (
	"context"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Roster is the desired state of the fleet as the admit and gone policies
// read it: which members are declared, and whether a member is paused. The
// daemon passes a thin adapter over the controllers' store; this package
// never writes it.
type Roster interface {
	// Synced reports whether the desired state has been read from its
	// source yet. Until then every name is admitted and nobody is gone.
	Synced() bool
	// Member returns the member declared under name, or nil if there is
	// none. It must not block: [AdmitMembers] calls it under the core's
	// lock.
	Member(name string) *v1alpha1.Member
	// Watch returns a channel that receives a value after every change of
	// the desired state, until ctx ends.
	Watch(ctx context.Context) <-chan struct{}
	// Closing reports whether member name's pane still runs although the
	// desired state no longer runs the member (deleted or paused): its
	// agent finishes what it was given before its tab closes, and the
	// controllers report the close themselves. It must not block.
	Closing(name string) bool
}

// AdmitMembers is the core's Admit check ([Options.Admit]) against the
// desired state in r: a new message to a name that is not a member is
// refused with not_found, one to a paused member with worker_gone, and so
// is one to a member whose tab is closing (deleted or paused while its
// agent was busy): nothing new is typed into it, while what it was given
// goes on. Until r has first read its source every name is admitted. It
// only reads r's current state, so it may run under the core's lock.
func AdmitMembers(r Roster) func(worker string) error {
	return func(worker string) error {
		if !r.Synced() {
			return nil
		}
		m := r.Member(worker)
		gone, why := notRunning(m, worker)
		switch {
		case !gone:
			return nil
		case r.Closing(worker):
			what := "was deleted"
			if m != nil {
				what = "is paused"
			}
			return &Error{Code: CodeWorkerGone, Msg: fmt.Sprintf("member %s %s: it takes no new message; its agent finishes what it was given, then its tab closes", worker, what)}
		case m == nil:
			return &Error{Code: CodeNotFound, Msg: why}
		}
		return &Error{Code: CodeWorkerGone, Msg: why}
	}
}

// ReportGoneMembers keeps core from waiting on members that will not run:
// once r has read its source, and again after every change of it, each
// worker the core is busy with (an open turn or a queued message) that is
// not a member, or is a paused one, and has no pane left ([Roster.Closing]
// is false) is reported gone ([Core.WorkerGone]), so that its waiting
// calls fail with worker_gone and its queued messages end in the sender's
// mailbox. A member whose pane still runs is not gone: its tab closes
// once its agent finished what it was given, and the controllers report
// the closed pane themselves. This covers a member paused or deleted while
// it had no pane, and, on the first pass after a restart, one deleted or
// paused while fleetd was down (being gone is not journalled). It blocks
// until ctx ends.
func ReportGoneMembers(ctx context.Context, r Roster, core *Core) {
	changed := r.Watch(ctx)
	for {
		if r.Synced() {
			for _, name := range core.Busy() {
				// Read the desired state again right before: a member
				// unpaused meanwhile must not lose its new messages.
				if gone, why := notRunning(r.Member(name), name); gone && !r.Closing(name) {
					core.WorkerGone(name, why)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// notRunning reports whether the member declared under name, m, is not
// running (absent or paused), and why.
func notRunning(m *v1alpha1.Member, name string) (bool, string) {
	switch {
	case m == nil:
		return true, fmt.Sprintf("no member %s (deleted or never defined)", name)
	case m.Spec.Paused:
		return true, fmt.Sprintf("member %s is paused", name)
	}
	return false, ""
}
