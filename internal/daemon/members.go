package daemon

import (
	"context"
	"fmt"

	"github.com/fleetd-dev/fleetd/controllers/store"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// GoneReporter is the slice of the messaging core that ReportGoneMembers
// drives.
type GoneReporter interface {
	Busy() []string
	WorkerGone(name, reason string)
}

// AdmitMembers is the messaging core's Admit check (messaging.Options.Admit)
// against the desired state in st: a new message to a name that is not a
// member is refused with not_found, one to a paused member with worker_gone.
// Until the store has first read its source every name is admitted. It only
// reads st's current snapshot, so it may run under the core's lock.
func AdmitMembers(st store.Store) func(worker string) error {
	return func(worker string) error {
		snap := st.Snapshot()
		if !snap.Synced {
			return nil
		}
		if gone, why := notRunning(snap, worker); gone {
			code := messaging.CodeWorkerGone
			if snap.Members[worker] == nil {
				code = messaging.CodeNotFound
			}
			return &messaging.Error{Code: code, Msg: why}
		}
		return nil
	}
}

// ReportGoneMembers keeps the messaging core from waiting on members that
// will not run: once st has read its source, and again after every change
// of it, each worker the core is busy with (an open turn or a queued
// message) that is not a member, or is a paused one, is reported gone, so
// that its waiting calls fail with worker_gone and its queued messages end
// in the sender's mailbox. The controllers report a closed pane themselves;
// this covers a member paused or deleted while it had no pane, and, on the
// first pass after a restart, one deleted or paused while fleetd was down
// (being gone is not journalled). It blocks until ctx ends.
func ReportGoneMembers(ctx context.Context, st store.Store, core GoneReporter) {
	changed := st.Watch(ctx)
	for {
		if snap := st.Snapshot(); snap.Synced {
			for _, name := range core.Busy() {
				// Read the desired state again right before: a member
				// unpaused meanwhile must not lose its new messages.
				if gone, why := notRunning(st.Snapshot(), name); gone {
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

// notRunning reports whether name is not a running member of snap (absent or
// paused), and why.
func notRunning(snap *store.Snapshot, name string) (bool, string) {
	m := snap.Members[name]
	switch {
	case m == nil:
		return true, fmt.Sprintf("no member %s (deleted or never defined)", name)
	case m.Spec.Paused:
		return true, fmt.Sprintf("member %s is paused", name)
	}
	return false, ""
}
