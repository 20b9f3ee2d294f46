package controllers

import (
	"context"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Fence is a node's hold on its members in a fleet on etcd (package
// fleet's Fence, passed in [Options.Fence]; nil on one machine): while the
// node cannot confirm that a member is still its own, nothing is started,
// restarted or replaced for it (the snapshot counts as stale), and past
// the node's fence deadline the member's tab is closed at once, whatever
// its agent does, before another node may start it.
type Fence interface {
	// Check returns why no agent may start for m now (hold) and why its
	// tab is to close at once (lose); nil, nil while the node is
	// confirmed. It must not block.
	Check(m *v1alpha1.Member) (hold, lose error)
	// Changed returns a channel closed at the next change of what Check
	// returns.
	Changed() <-chan struct{}
}

// goneFenced is the Options.OnPaneGone reason of a tab closed by the
// fence.
const goneFenced = "fenced: this node could not confirm it still runs the member"

// fence closes the member's tab at once: the node did not confirm, before
// its fence deadline, that the member is still its own (r.lose says why).
// The member is held, with no pane, until the node confirms it again.
func (r *memberReconcile) fence() (Result, error) {
	msg := r.lose.Error()
	if r.owned {
		tab := r.rec.TabID
		if closed, err := r.closeTab(goneFenced, msg); !closed {
			return Result{}, err
		}
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonNodeFenced, fmt.Sprintf("closed tab %s: %s", tab, msg))
	}
	*r.rt = runtime{}
	r.b.clearPane()
	r.b.set(v1alpha1.PhasePending, [3]string{v1alpha1.ConditionUnknown, v1alpha1.ReasonNodeFenced, msg},
		cFalse(v1alpha1.ReasonNodeFenced, msg), cFalse(v1alpha1.ReasonAsExpected, ""))
	r.write()
	return Result{}, nil
}

// followFence looks at every member again whenever the fence changes.
func (m *Manager) followFence(ctx context.Context, f Fence) {
	for {
		changed := f.Changed()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		m.enqueueAll()
	}
}
