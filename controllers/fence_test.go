package controllers

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// fakeFence is a node's fence as a test sets it: the same hold and lose
// for every member.
type fakeFence struct {
	mu         sync.Mutex
	hold, lose error
	changed    notify.Signal
}

func (f *fakeFence) Check(*v1alpha1.Member) (hold, lose error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hold, f.lose
}

func (f *fakeFence) Changed() <-chan struct{} { return f.changed.Changed() }

// set changes what Check returns and signals it.
func (f *fakeFence) set(hold, lose error) {
	f.mu.Lock()
	f.hold, f.lose = hold, lose
	f.mu.Unlock()
	f.changed.Notify()
}

// withFence wires a fakeFence, with policy, into the Manager e starts.
func (e *env) withFence(policy FencePolicy) *fakeFence {
	f := &fakeFence{}
	prev := e.tweak
	e.tweak = func(o *Options) {
		if prev != nil {
			prev(o)
		}
		o.Fence, o.FencePolicy = f, policy
	}
	return f
}

// interrupts counts the pane.send_keys of the fence's interrupt key into
// pane.
func (e *env) interrupts(pane string) int {
	n := 0
	for _, r := range e.fake.Requests() {
		if r.Method == "pane.send_keys" && strings.Contains(string(r.Params), `"pane_id":"`+pane+`"`) && strings.Contains(string(r.Params), `"esc"`) {
			n++
		}
	}
	return n
}

// startFenced runs member alpha on a Manager with a fakeFence and policy,
// and returns once alpha is Ready, with alpha's status then.
func startFenced(t *testing.T, policy FencePolicy) (*env, *fakeFence, v1alpha1.MemberStatus) {
	t.Helper()
	e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
	f := e.withFence(policy)
	e.start()
	return e, f, e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
}

func fenced(m v1alpha1.Member) bool {
	return m.Status.Phase == v1alpha1.PhasePending && condition(m, v1alpha1.ConditionReady).Reason == v1alpha1.ReasonNodeFenced
}

var (
	errHold = errors.New("this node's lease was not renewed for 4s")
	errLose = errors.New("fence deadline passed")
)

// At its fence deadline the node closes the tab of a member another node
// may take (the default policy), working agent or not, and holds the
// member with no pane until it is confirmed again: then it starts afresh.
func TestFence_CloseClosesTheTabAndStartsAgainOnceConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, f, old := startFenced(t, "")
		e.setStatus(old.PaneID, "working")

		f.set(errHold, errLose)
		m := e.waitFor("alpha fenced", func(ms map[string]v1alpha1.Member) bool { return fenced(ms["alpha"]) })["alpha"]
		if e.paneAlive(old.PaneID) || m.Status.PaneID != "" {
			t.Errorf("fenced with policy close: pane %s alive %v, status pane %q; want it closed", old.PaneID, e.paneAlive(old.PaneID), m.Status.PaneID)
		}
		if n := e.interrupts(old.PaneID); n != 0 {
			t.Errorf("policy close sent %d interrupts", n)
		}

		f.set(nil, nil)
		m = e.waitFor("alpha Ready again", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"]
		if m.Status.PaneID == old.PaneID {
			t.Errorf("alpha Ready in its closed pane %s", old.PaneID)
		}
	})
}

// With --fence-policy pause the node interrupts the agent (Esc, once per
// fencing) and keeps its pane, its conversation and its session: the
// member is held there, and goes on in the same pane once the node is
// confirmed, with nothing created. A later fencing interrupts again; a
// member no longer this node's (deleted here: rebound elsewhere) has its
// idle tab closed.
func TestFence_PauseInterruptsTheAgentAndKeepsItsPane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, f, old := startFenced(t, FencePause)
		e.setStatus(old.PaneID, "working")
		created := e.fake.Calls()["tab.create"]

		f.set(errHold, errLose)
		m := e.waitFor("alpha fenced", func(ms map[string]v1alpha1.Member) bool { return fenced(ms["alpha"]) })["alpha"]
		if !e.paneAlive(old.PaneID) || m.Status.PaneID != old.PaneID {
			t.Errorf("fenced with policy pause: pane %s alive %v, status pane %q; want it kept", old.PaneID, e.paneAlive(old.PaneID), m.Status.PaneID)
		}
		if msg := condition(m, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "interrupted") || !strings.Contains(msg, errLose.Error()) {
			t.Errorf("Ready message %q; want why and that its agent was interrupted", msg)
		}
		if n := e.interrupts(old.PaneID); n != 1 {
			t.Fatalf("%d interrupts of pane %s, want 1", n, old.PaneID)
		}
		// The agent stops (Esc); more reconciles while fenced send nothing more
		// (a second Esc opens some agents' history).
		e.setStatus(old.PaneID, "idle")
		f.set(errHold, errLose)
		synctest.Wait()
		if n := e.interrupts(old.PaneID); n != 1 {
			t.Errorf("%d interrupts of pane %s after more reconciles while fenced, want 1", n, old.PaneID)
		}

		f.set(nil, nil)
		m = e.waitFor("alpha Ready again", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"]
		if m.Status.PaneID != old.PaneID || e.fake.Calls()["tab.create"] != created {
			t.Errorf("alpha Ready in pane %s after %d tab.create; want its own pane %s, nothing created", m.Status.PaneID, e.fake.Calls()["tab.create"]-created, old.PaneID)
		}

		f.set(errHold, errLose)
		e.waitFor("alpha fenced again", func(ms map[string]v1alpha1.Member) bool { return fenced(ms["alpha"]) })
		if n := e.interrupts(old.PaneID); n != 2 {
			t.Errorf("%d interrupts of pane %s after a second fencing, want 2", n, old.PaneID)
		}
		e.remove("alpha.yaml")
		e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { _, ok := ms["alpha"]; return !ok })
		if e.paneAlive(old.PaneID) {
			t.Errorf("the paused pane %s of a member no longer this node's is still open", old.PaneID)
		}
	})
}

// herdr not answering at the fence deadline: with --fence-policy pause the
// node cannot tell a live pane from a gone one, so it closes nothing; once
// herdr is back it interrupts the agent and keeps its pane.
func TestFence_PauseWaitsForHerdrInsteadOfClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, f, old := startFenced(t, FencePause)
		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("herdr unavailable", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonHerdrUnavailable
		})
		f.set(errHold, errLose)
		e.waitFor("alpha fenced, waiting for herdr", func(ms map[string]v1alpha1.Member) bool {
			return fenced(ms["alpha"]) && strings.Contains(condition(ms["alpha"], v1alpha1.ConditionReady).Message, "once herdr answers")
		})
		if err := e.fake.Restart(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha's agent interrupted", func(ms map[string]v1alpha1.Member) bool {
			return fenced(ms["alpha"]) && strings.Contains(condition(ms["alpha"], v1alpha1.ConditionReady).Message, "was interrupted")
		})
		if !e.paneAlive(old.PaneID) || e.interrupts(old.PaneID) != 1 {
			t.Errorf("after herdr came back: pane %s alive %v, %d interrupts; want it kept, interrupted once", old.PaneID, e.paneAlive(old.PaneID), e.interrupts(old.PaneID))
		}
		if n := e.fake.Calls()["tab.close"]; n != 0 {
			t.Errorf("%d tab.close with --fence-policy pause", n)
		}
	})
}
