package controllers

import (
	"context"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Fence is a node's hold on its members in a fleet on etcd (package
// fleet's Fence, passed in [Options.Fence]; nil on one machine): while the
// node cannot confirm that a member is still its own, nothing is started,
// restarted or replaced for it (the snapshot counts as stale), and past
// the node's fence deadline the member's tab is closed at once, whatever
// its agent does, before another node may start it — or, with
// [FencePause], its agent's turn is interrupted and its tab kept.
type Fence interface {
	// Check returns why no agent may start for m now (hold) and why its
	// tab is to close at once (lose); nil, nil while the node is
	// confirmed. It must not block.
	Check(m *v1alpha1.Member) (hold, lose error)
	// Changed returns a channel closed at the next change of what Check
	// returns.
	Changed() <-chan struct{}
}

// FencePolicy is what a node does at its fence deadline with the panes of
// the members another node may take over ([Options.FencePolicy]).
type FencePolicy string

const (
	// FenceClose closes their tabs: never two live agents for one member.
	FenceClose FencePolicy = "close"
	// FencePause interrupts their agents' turns (the key every agent
	// herdr runs takes for it, FenceInterruptKeys) and keeps their tabs,
	// conversations and sessions: the agent stops working, and waits,
	// idle, until the node confirms the member is its own again (it goes
	// on in that pane) or finds it rebound elsewhere (its tab closes
	// then, as any member's that is no longer this node's). Until then
	// the member has two agents, one of them idle.
	FencePause FencePolicy = "pause"
)

// FencePolicies are the policies, in the order the flag lists them.
var FencePolicies = []FencePolicy{FenceClose, FencePause}

// FenceInterruptKeys are the keys that interrupt an agent's turn: Esc, for
// Claude Code, Codex, Gemini CLI and the other terminal agents herdr runs.
var FenceInterruptKeys = []string{"esc"}

// goneFenced is the Options.OnPaneGone reason of a tab closed by the
// fence.
const goneFenced = "fenced: this node could not confirm it still runs the member"

// fence closes the member's tab at once — or, with FencePause, interrupts
// its agent and keeps it: the node did not confirm, before its fence
// deadline, that the member is still its own (r.lose says why). The
// member is held until the node confirms it again.
func (r *memberReconcile) fence() (Result, error) {
	msg := r.lose.Error()
	if r.m.o.FencePolicy == FencePause && r.owned {
		if !r.m.cache.Synced() {
			// Nothing tells a live pane from a gone one: the agent is
			// interrupted once herdr answers (never closed for it).
			return r.heldByFence(msg + "; its agent is interrupted once herdr answers (--fence-policy pause)")
		}
		if p, alive, _ := r.m.findPane(r.name, r.rec); alive && p.PaneID == r.rec.PaneID {
			return r.fencePause(msg, p)
		}
	}
	if r.owned {
		tab := r.rec.TabID
		if closed, err := r.closeTab(goneFenced, msg); !closed {
			return Result{}, err
		}
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonNodeFenced, fmt.Sprintf("closed tab %s: %s", tab, msg))
	}
	r.rt.reset()
	r.b.clearPane()
	return r.heldByFence(msg)
}

// heldByFence writes the status of a member the fence holds (msg: why, and
// what became of its pane): Pending, Ready=Unknown NodeFenced.
func (r *memberReconcile) heldByFence(msg string) (Result, error) {
	r.b.set(v1alpha1.PhasePending, [3]string{v1alpha1.ConditionUnknown, v1alpha1.ReasonNodeFenced, msg},
		cFalse(v1alpha1.ReasonNodeFenced, msg), cFalse(v1alpha1.ReasonAsExpected, ""))
	r.write()
	return Result{}, nil
}

// fencePause interrupts the agent of the member's pane once per fencing
// (again after the node was confirmed in between) and keeps the pane: the
// member is held, its agent idle, until the node confirms it again.
func (r *memberReconcile) fencePause(msg string, p herdrcache.Pane) (Result, error) {
	if r.rt.peek().fencePaused != r.rec.PaneID {
		ctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
		err := r.m.herdr.SendKeys(ctx, r.rec.PaneID, FenceInterruptKeys)
		cancel()
		if err != nil {
			return Result{}, fmt.Errorf("interrupt the agent of pane %s (--fence-policy pause): %w", r.rec.PaneID, err)
		}
		r.rt.edit().fencePaused = r.rec.PaneID
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonNodeFenced, fmt.Sprintf("interrupted the agent of pane %s (Esc) and kept its tab %s: %s", r.rec.PaneID, r.rec.TabID, msg))
	}
	r.b.setPane(r.rec)
	r.b.st.AgentStatus = ""
	if p.HasAgent {
		r.b.st.AgentStatus = string(p.Agent.AgentStatus)
	}
	return r.heldByFence(msg + fmt.Sprintf("; its agent was interrupted and waits in pane %s (--fence-policy pause)", r.rec.PaneID))
}

// followFence looks at every member again whenever the fence changes.
func (m *Manager) followFence(ctx context.Context, f Fence) {
	notify.Each(ctx, f, m.enqueueAll)
}
