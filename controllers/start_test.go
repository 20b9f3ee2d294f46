package controllers

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedb/statedbtest"
)

// A start holds no worker while the agent comes up: with one worker and
// agents that take 10 s to be ready, every member's agent.start is issued
// at once and the fleet is Ready after about one agent start, not one per
// member in turn.
func TestManager_StartsDoNotHoldAWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ready = 10 * time.Second
		names := []string{"alpha", "beta", "gamma", "delta"}
		files := map[string]string{"profile.yaml": testProfile}
		for _, n := range names {
			files[n+".yaml"] = memberYAML(n)
		}
		e := newEnv(t, files)
		e.fakeOpts = &herdrsim.Options{ReadyDelay: ready}
		e.tweak = func(o *Options) { o.Workers = 1 }
		t0 := time.Now()
		e.start()
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		if err := e.fake.WaitCalls(ctx, "agent.start", len(names)); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took >= ready {
			t.Errorf("the %d agent.start calls took %s with one worker; a start waited for the one before it", len(names), took)
		}
		e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		if took := time.Since(t0); took > ready+2*time.Second {
			t.Errorf("%d members with one worker took %s to be Ready; want about one agent start (%s)", len(names), took, ready)
		}
		if c := e.fake.Calls(); c["agent.start"] != len(names) || c["tab.close"] != 0 {
			t.Errorf("agent.start %d, tab.close %d; want %d and 0", c["agent.start"], c["tab.close"], len(names))
		}
	})
}

// Members starting alike keep one list of conditions: nothing of one
// member (its pane id) is in a starting member's messages, which the
// status's own fields carry, so a fleet's start keeps a handful of lists
// where it kept one a member (setStatus).
func TestManager_MembersStartingAlikeShareTheirConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"alpha", "beta", "gamma", "delta"}
		files := map[string]string{"profile.yaml": testProfile}
		for _, n := range names {
			files[n+".yaml"] = memberYAML(n)
		}
		e := newEnv(t, files)
		e.fakeOpts = &herdrsim.Options{ReadyDelay: 10 * time.Second}
		e.start()
		ms := e.waitFor("all Starting, each in a pane", func(ms map[string]v1alpha1.Member) bool {
			for _, n := range names {
				if st := ms[n].Status; st.Phase != v1alpha1.PhaseStarting || st.PaneID == "" {
					return false
				}
			}
			return true
		})
		synctest.Wait() // every status written
		e.mgr.mu.Lock()
		defer e.mgr.mu.Unlock()
		first := e.mgr.stateLocked(names[0]).status.Conditions
		for _, n := range names {
			if conds := e.mgr.stateLocked(n).status.Conditions; len(conds) == 0 || &conds[0] != &first[0] {
				t.Errorf("%s keeps a list of conditions of its own: %+v", n, conds)
			}
			for _, c := range ms[n].Status.Conditions {
				if strings.Contains(c.Message, ms[n].Status.PaneID) {
					t.Errorf("%s's %s condition names its pane: %q", n, c.Type, c.Message)
				}
			}
		}
	})
}

// A dropped connection on a start's check is retried promptly: the agent
// is seen Ready as soon as it is, and nothing is closed or started again.
// (Before, the failed readiness poll closed the tab; a dropped tab.close
// then parked the member until its startup timeout. The tab.close fault
// stays armed to catch a close.)
func TestManager_TransientFailuresDuringStartAreRetriedPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ready = time.Second
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.fakeOpts = &herdrsim.Options{ReadyDelay: ready}
		e.tweak = func(o *Options) { o.ResyncPeriod = time.Hour } // no resync comes to the rescue
		e.startFake(e.fakeOpts)
		e.fake.InjectFault("agent.get", herdrsim.Fault{Drop: true, Times: 1})
		e.fake.InjectFault("tab.close", herdrsim.Fault{Drop: true, Times: 1})
		t0 := time.Now()
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if took := time.Since(t0); took > ready+2*time.Second {
			t.Errorf("alpha Ready after %s; its agent was ready after %s", took, ready)
		}
		if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.create"] != 1 || c["tab.close"] != 0 || c["agent.get"] < 2 {
			t.Errorf("agent.start %d, tab.create %d, tab.close %d, agent.get %d; want 1, 1, 0 and the dropped check retried",
				c["agent.start"], c["tab.create"], c["tab.close"], c["agent.get"])
		}
		if !e.paneAlive(ms["alpha"].Status.PaneID) || ms["alpha"].Status.Restarts != 0 {
			t.Errorf("alpha's pane %s alive %v, restarts %d", ms["alpha"].Status.PaneID, e.paneAlive(ms["alpha"].Status.PaneID), ms["alpha"].Status.Restarts)
		}
	})
}

// An agent that never becomes ready is failed at its startup deadline by a
// timer, and its start is retried per restartPolicy.
func TestManager_StartupDeadlineIsATimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{
			"profile.yaml": strings.Replace(testProfile, "spec:\n", "spec:\n  startupTimeout: 20s\n", 1),
			"alpha.yaml":   memberYAML("alpha"),
		})
		e.fakeOpts = &herdrsim.Options{Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchNever}}
		e.tweak = func(o *Options) { o.Workers = 1; o.ResyncPeriod = time.Hour }
		t0 := time.Now()
		e.start()
		time.Sleep(19 * time.Second)
		if m, _ := e.mgr.Member("alpha"); m.Status.Phase != v1alpha1.PhaseStarting || m.Status.Restarts != 0 {
			t.Fatalf("before its deadline alpha is %s with %d restarts; want Starting", m.Status.Phase, m.Status.Restarts)
		}
		ms := e.waitFor("alpha's start failed", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.Restarts >= 1 })
		took := time.Since(t0)
		if took < 20*time.Second || took > 21*time.Second {
			t.Errorf("start failed after %s; want at its 20s deadline", took)
		}
		// herdr's own agent.start deadline (timeout_ms) falls at the same
		// moment and may be seen first.
		if got := ms["alpha"].Status.LastError; !strings.Contains(got, "not ready within 20s") && !strings.Contains(got, "gave up") {
			t.Errorf("lastError %q", got)
		}
		if n := e.fake.Calls()["agent.get"]; n > 20 {
			t.Errorf("%d agent.get checks in 20 s: the checks must back off", n)
		}
	})
}

// paneBusy is herdr's answer to agent.start while the pane's new shell is
// still starting.
var paneBusy = herdrsim.Fault{Garbage: []byte(`{"id":"x","error":{"code":"agent_pane_busy","message":"pane is busy: its shell is starting"}}`)}

// agent_pane_busy from agent.start (the new pane's shell is not up yet) is
// retried in the same pane until the start is accepted: no pane is closed,
// no tab created again, nothing counted as a restart.
func TestManager_PaneBusyIsRetriedInTheSamePane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.startFake(nil)
		busy := paneBusy
		busy.Times = 3
		e.fake.InjectFault("agent.start", busy)
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if c := e.fake.Calls(); c["agent.start"] != 4 || c["tab.create"] != 1 || c["tab.close"] != 0 {
			t.Errorf("agent.start %d, tab.create %d, tab.close %d; want 3 refused + 1 in one tab, nothing closed",
				c["agent.start"], c["tab.create"], c["tab.close"])
		}
		if a := ms["alpha"].Status; a.Restarts != 0 || a.LastError != "" {
			t.Errorf("restarts %d, lastError %q after a busy pane", a.Restarts, a.LastError)
		}
	})
}

// A pane that stays busy is retried within a bound and then fails with an
// error that says so; it is not closed while it is retried.
func TestManager_PaneBusyIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.tweak = func(o *Options) { o.RestartBackoff = time.Hour } // the recreation after the failure waits
		e.startFake(nil)
		e.fake.InjectFault("agent.start", paneBusy)
		t0 := time.Now()
		e.start()
		time.Sleep(PaneBusyWindow / 2)
		if c := e.fake.Calls(); c["tab.close"] != 0 || c["tab.create"] != 1 || c["agent.start"] < 3 {
			t.Errorf("while retrying: tab.create %d, tab.close %d, agent.start %d; want 1, 0 and several attempts",
				c["tab.create"], c["tab.close"], c["agent.start"])
		}
		ms := e.waitFor("alpha's start failed", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.Restarts == 1 })
		if took := time.Since(t0); took > PaneBusyWindow+time.Second {
			t.Errorf("failed after %s; the bound is %s", took, PaneBusyWindow)
		}
		if got := ms["alpha"].Status.LastError; !strings.Contains(got, "stayed busy") || !strings.Contains(got, "agent_pane_busy") {
			t.Errorf("lastError %q; want the busy pane named", got)
		}
		if n := e.fake.Calls()["agent.start"]; n > MaxPaneBusyTries {
			t.Errorf("agent.start tried %d times; the bound is %d", n, MaxPaneBusyTries)
		}
	})
}

// A busy pane that already runs another kind of agent fails at once, and
// so does one whose terminal changed (the pane was replaced): retrying
// cannot help either.
func TestManager_PaneBusyFailsFastOnKindMismatchOrReplacedPane(t *testing.T) {
	for _, tc := range []struct {
		name, agent, want string
	}{
		{"kind mismatch", `"agent":"claude","terminal_id":""`, "runs a claude agent, not codex"},
		{"replaced pane", `"terminal_id":"term_other"`, "was replaced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				e.tweak = func(o *Options) { o.RestartBackoff = time.Hour }
				e.startFake(nil)
				busy := paneBusy
				busy.Times = 1
				e.fake.InjectFault("agent.start", busy)
				// What herdr's agent.get then says of the pane.
				e.fake.InjectFault("agent.get", herdrsim.Fault{Times: 1, Garbage: []byte(`{"id":"x","result":{"type":"agent_info","agent":{` +
					`"agent_status":"idle","workspace_id":"w1","tab_id":"w1:t2","pane_id":"w1:p2","focused":false,"revision":1,"state_change_seq":1,` + tc.agent + `}}}`)})
				e.start()
				e.waitFor("alpha's start failed", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.Restarts == 1 })
				// Why is in the BackOff event. lastError said it too, but
				// only until the new tab's agent was Ready, which can come
				// before the test looks: nothing waits in between.
				if evs := e.mgr.MemberEvents("alpha"); !slices.ContainsFunc(evs, func(ev v1alpha1.Event) bool {
					return ev.Reason == v1alpha1.ReasonBackOff && strings.Contains(ev.Message, tc.want)
				}) {
					t.Errorf("events %+v; want a BackOff saying %q", evs, tc.want)
				}
				// The failed start is recreated in a new tab at once, by the
				// reconcile that wrote Restarts 1: the pane that failed has
				// had one agent.start, never retried.
				e.waitIdle()
				starts := map[string]int{} // by pane
				first := ""
				for _, r := range e.fake.Requests() {
					var p struct {
						PaneID string `json:"pane_id"`
					}
					if r.Method == "agent.start" && json.Unmarshal(r.Params, &p) == nil {
						starts[p.PaneID]++
						first = cmp.Or(first, p.PaneID)
					}
				}
				if starts[first] != 1 {
					t.Errorf("agent.start called %d times in the pane that failed (%s); want no retry", starts[first], first)
				}
			})
		})
	}
}

// An agent that comes up blocked at a dialog (a first-run trust prompt) is
// not a failed start: the member is Starting with Ready=False reason
// AwaitingInput and the dialog's text, with an event and a metric, is never
// killed for its startup timeout while it waits, and is Ready once the
// person answers it in herdr.
func TestManager_AgentAtADialogAwaitsInput(t *testing.T) {
	eachProtocol(t, map[string]string{
		"profile.yaml": strings.Replace(testProfile, "spec:\n", "spec:\n  startupTimeout: 20s\n", 1),
		"alpha.yaml":   memberYAML("alpha"),
	}, func(t *testing.T, e *env) {
		e.fakeOpts = &herdrsim.Options{ReadyDelay: time.Second, Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked,
			Dialog: "Do you trust the files in this folder?\x07\n\n  \u202e> 1. Yes, proceed   2. No, exit"}}
		e.tweak = func(o *Options) { o.ResyncPeriod = 15 * time.Second } // resyncs come and go while it waits
		e.start()
		e.waitFor("alpha AwaitingInput", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonAwaitingInput
		})
		time.Sleep(time.Minute) // three startup timeouts
		e.waitIdle()
		a, _ := e.mgr.Member("alpha")
		ready := condition(a, v1alpha1.ConditionReady)
		if a.Status.Phase != v1alpha1.PhaseStarting || ready.Status != v1alpha1.ConditionFalse || ready.Reason != v1alpha1.ReasonAwaitingInput {
			t.Errorf("phase %s, Ready %+v; want Starting, False, AwaitingInput", a.Status.Phase, ready)
		}
		if want := "Do you trust the files in this folder? / > 1. Yes, proceed 2. No, exit"; !strings.Contains(ready.Message, want) {
			t.Errorf("Ready message %q; want the dialog's text %q, control characters dropped", ready.Message, want)
		}
		if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.close"] != 0 || c["pane.read"] != 1 || a.Status.Restarts != 0 {
			t.Errorf("agent.start %d, tab.close %d, pane.read %d, restarts %d; want 1, 0, 1 (read once), 0",
				c["agent.start"], c["tab.close"], c["pane.read"], a.Status.Restarts)
		}
		var saw bool
		for _, ev := range e.mgr.MemberEvents("alpha") {
			saw = saw || (ev.Reason == v1alpha1.ReasonAwaitingInput && strings.Contains(ev.Message, "Do you trust"))
		}
		if !saw {
			t.Errorf("no AwaitingInput event with the dialog: %+v", e.mgr.MemberEvents("alpha"))
		}
		if got := metricValue(t, e.reg, "fleetd_members_awaiting_input"); got != 1 {
			t.Errorf("fleetd_members_awaiting_input = %v, want 1", got)
		}

		// The person answers the dialog in herdr.
		if err := e.fake.AnswerDialog(a.Status.PaneID); err != nil {
			t.Fatal(err)
		}
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if ms["alpha"].Status.PaneID != a.Status.PaneID {
			t.Errorf("alpha Ready in pane %s, waited in %s", ms["alpha"].Status.PaneID, a.Status.PaneID)
		}
		if got := metricValue(t, e.reg, "fleetd_members_awaiting_input"); got != 0 {
			t.Errorf("fleetd_members_awaiting_input = %v after the answer, want 0", got)
		}
	})
}

// The startup timeout counts from the answer to a dialog, not from the
// start: an agent that loads for a while after a person answered its
// trust prompt (long after the start's own deadline) is waited for the
// whole timeout again, and no longer.
func TestManager_ADialogAnsweredRestartsTheStartupTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{
			"profile.yaml": strings.Replace(testProfile, "spec:\n", "spec:\n  startupTimeout: 20s\n", 1),
			"alpha.yaml":   memberYAML("alpha"),
		})
		e.fakeOpts = &herdrsim.Options{ReadyDelay: time.Second, Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}}
		e.start()
		e.waitFor("alpha AwaitingInput", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonAwaitingInput
		})
		time.Sleep(time.Minute) // three startup timeouts at the dialog
		a, _ := e.mgr.Member("alpha")
		if err := e.fake.AnswerDialogLoading(a.Status.PaneID); err != nil {
			t.Fatal(err)
		}
		answered := func() bool {
			for _, ev := range e.mgr.MemberEvents("alpha") {
				if strings.Contains(ev.Message, "the dialog was answered") {
					return true
				}
			}
			return false
		}
		e.waitForHerdr("the answer seen", answered)
		notReady := func() bool {
			for _, ev := range e.mgr.MemberEvents("alpha") {
				if strings.Contains(ev.Message, "not ready within 20s") {
					return true
				}
			}
			return false
		}

		time.Sleep(15 * time.Second) // 75 s after the start, 15 s after the answer
		e.waitIdle()
		if a, _ := e.mgr.Member("alpha"); notReady() || a.Status.Restarts != 0 {
			t.Fatalf("15 s after the answer: restarts %d, events %+v; want the agent still waited for", a.Status.Restarts, e.mgr.MemberEvents("alpha"))
		}
		time.Sleep(10 * time.Second) // 25 s after the answer
		e.waitIdle()
		if !notReady() {
			t.Errorf("25 s after the answer, over the 20 s startup timeout, the start has not failed: %+v", e.mgr.MemberEvents("alpha"))
		}
	})
}

// A dialog answered before fleetd's subscription covers the agent's pane
// (herdr sends a pane's status events only to a subscription that names
// it) reaches fleetd only in the agent listing taken once the new
// subscription stands: that listing's status queues the member waiting
// at the dialog, which is Ready without waiting for the next resync.
func TestManager_ADialogAnsweredBeforeTheSubscriptionCoversThePane(t *testing.T) {
	eachProtocol(t, map[string]string{"profile.yaml": testProfile}, func(t *testing.T, e *env) {
		e.fakeOpts = &herdrsim.Options{ReadyDelay: 100 * time.Millisecond, Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}}
		e.tweak = func(o *Options) { o.ResyncPeriod = time.Hour }
		e.start()
		e.waitIdle()
		// The subscription that adds alpha's pane is answered late, within
		// the call timeout: alpha waits at its dialog meanwhile.
		e.fake.InjectFault("events.subscribe", herdrsim.Fault{Latency: 1500 * time.Millisecond, Times: 1})
		e.write("alpha.yaml", memberYAML("alpha"))
		ms := e.waitFor("alpha AwaitingInput", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonAwaitingInput
		})
		if n := e.fake.Calls()["events.subscribe"]; n != 2 {
			t.Fatalf("events.subscribe called %d times before the answer, want 2 (the first, and the one that adds alpha's pane, not answered yet)", n)
		}
		if err := e.fake.AnswerDialog(ms["alpha"].Status.PaneID); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
	})
}

// A reconcile that fails shows its error in the member's status (lastError
// and a condition with the error), not only in the log, and is retried.
func TestManager_ReconcileErrorsReachTheStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.tweak = func(o *Options) { o.QueueBaseDelay = 100 * time.Millisecond }
		e.start()
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		e.fake.InjectFault("tab.close", herdrsim.Fault{Times: 3,
			Garbage: []byte(`{"id":"x","error":{"code":"internal_error","message":"tab is locked"}}`)})
		e.write("alpha.yaml", memberYAML("alpha", "paused: true"))
		// Each try to close writes Terminating first, then the refusal: wait
		// for a status that shows the refusal, in lastError and in
		// Progressing, whichever try it comes from.
		e.waitFor("the refusal in the status", func(ms map[string]v1alpha1.Member) bool {
			c := condition(ms["alpha"], v1alpha1.ConditionProgressing)
			return strings.Contains(ms["alpha"].Status.LastError, "tab is locked") &&
				c.Status == v1alpha1.ConditionTrue && c.Reason == v1alpha1.ReasonHerdrError && strings.Contains(c.Message, "tab is locked")
		})
		e.waitFor("alpha Paused once herdr closes the tab", allPhase(v1alpha1.PhasePaused, "alpha"))
		if n := e.fake.Calls()["tab.close"]; n != 4 {
			t.Errorf("tab.close called %d times, want 3 refused + 1", n)
		}
	})
}

// A deleted member's workspace is closed when fleetd created it and it is
// now empty — no other member in it and nothing but the tab it was created
// with; a workspace someone opened a tab in, or that fleetd did not create,
// is kept.
func TestManager_DeletedMembersEmptyWorkspaceIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile,
			"beta.yaml": memberYAML("beta", "workspace: shared"), "gamma.yaml": memberYAML("gamma", "workspace: shared"),
			"delta.yaml": memberYAML("delta", "workspace: busy"), "eps.yaml": memberYAML("eps", "workspace: mine")})
		e.startFake(nil)
		ctx := context.Background()
		mine, err := e.client.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "mine"})
		if err != nil {
			t.Fatal(err)
		}
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "beta", "gamma", "delta", "eps"))
		workspaces := func() map[string]string {
			wss, err := e.client.ListWorkspaces(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, w := range wss {
				out[w.WorkspaceID] = w.Label
			}
			return out
		}
		shared, busy := ms["beta"].Status.WorkspaceID, ms["delta"].Status.WorkspaceID
		if _, err := e.client.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: busy, Label: "my notes"}); err != nil {
			t.Fatal(err)
		}

		e.remove("beta.yaml")
		e.waitForHerdr("beta's tab closed", func() bool { _, open := e.tabLabels()[ms["beta"].Status.TabID]; return !open })
		if workspaces()[shared] != "shared" {
			t.Fatal("the workspace closed while gamma still runs in it")
		}
		e.remove("gamma.yaml")
		e.waitForHerdr("the emptied workspace closed", func() bool { _, open := workspaces()[shared]; return !open })

		e.remove("delta.yaml")
		e.remove("eps.yaml")
		e.waitFor("delta and eps gone", func(ms map[string]v1alpha1.Member) bool { return len(ms) == 0 })
		e.waitIdle()
		now := workspaces()
		if now[busy] != "busy" {
			t.Error("a workspace with someone's tab in it was closed")
		}
		if now[mine.Workspace.WorkspaceID] != "mine" {
			t.Error("a workspace fleetd did not create was closed")
		}
	})
}

// A workspace fleetd created but someone opened linked worktree workspaces
// from (herdr 0.9) stays open when its last member goes, and so do they:
// fleetd never closes a group it did not make, and does not retry.
func TestManager_WorkspaceWithLinkedWorktreesIsLeftOpen(t *testing.T) {
	eachProtocol(t, map[string]string{"profile.yaml": testProfile, "beta.yaml": memberYAML("beta", "workspace: repo")}, func(t *testing.T, e *env) {
		e.start()
		ws := e.waitFor("beta Ready", allPhase(v1alpha1.PhaseReady, "beta"))["beta"].Status.WorkspaceID
		linked, err := e.fake.AddLinkedWorkspace(ws, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		e.remove("beta.yaml")
		e.waitFor("beta gone", func(ms map[string]v1alpha1.Member) bool { return len(ms) == 0 })
		e.waitIdle()
		open := map[string]bool{}
		wss, err := e.client.ListWorkspaces(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wss {
			open[w.WorkspaceID] = true
		}
		if e.fake.Protocol() >= 22 && !open[ws] {
			t.Errorf("workspace %s was closed with the worktree workspace %s linked to it", ws, linked)
		}
		if !open[linked] {
			t.Errorf("the linked worktree workspace %s was closed", linked)
		}
		if c := e.fake.Calls()["workspace.close"]; c > 1 {
			t.Errorf("workspace.close called %d times; want at most once, no retry", c)
		}
	})
}

func TestDialogText(t *testing.T) {
	long := strings.Repeat("é", maxDialogText) // two bytes each
	for _, tc := range []struct{ name, screen, want string }{
		{"lines joined, blanks dropped", "  Trust this folder?  \n\n\t1. Yes\t 2. No \n", "Trust this folder? / 1. Yes 2. No"},
		{"control and format characters dropped", "\x1b[1mLog in\x07 \u202eto continue\u200b\r", "[1mLog in to continue"},
		{"invalid UTF-8 dropped", "ok\xff?", "ok?"},
		{"cut on a rune boundary", long, strings.Repeat("é", maxDialogText/2) + "…"},
		{"empty screen", "\n \n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dialogText(tc.screen); got != tc.want {
				t.Errorf("dialogText(%q) = %q, want %q", tc.screen, got, tc.want)
			}
		})
	}
}

// No agent starts in a pane whose ownership record the disk refused: the
// pane is closed, and the member is created again after its backoff.
// Once the disk takes records the member runs in one pane, which a
// restart would adopt.
func TestManager_NoAgentStartsInAPaneWhoseRecordFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		var fail atomic.Bool
		e.dbOpts = &statedb.Options{Wrap: statedbtest.FailingWrites(&fail)}
		e.stateDB() // opened (its journal started) while writes go through
		e.tweak = func(o *Options) { o.RestartBackoff = 5 * time.Millisecond }
		fail.Store(true)
		e.start()
		e.waitForHerdr("alpha's tab created again after its record failed", func() bool { return e.fake.Calls()["tab.create"] >= 3 })
		if n := e.fake.Calls()["agent.start"]; n != 0 {
			t.Fatalf("agent.start called %d times while the disk refused every ownership record", n)
		}
		alphaTabs := func() int {
			n := 0
			for _, label := range e.tabLabels() {
				if label == TabLabelPrefix+"alpha" {
					n++
				}
			}
			return n
		}
		if n := alphaTabs(); n > 1 {
			t.Errorf("%d of alpha's tabs open, want at most the last one created: the others' records failed", n)
		}

		fail.Store(false)
		ms := e.waitFor("alpha Ready once the disk takes records", allPhase(v1alpha1.PhaseReady, "alpha"))
		e.waitIdle()
		if n := alphaTabs(); n != 1 {
			t.Errorf("%d of alpha's tabs open, want 1", n)
		}
		if n := e.fake.Calls()["agent.start"]; n != 1 {
			t.Errorf("agent.start called %d times, want once, in the pane whose record is durable", n)
		}
		e.stop()
		book, err := loadOwnership(e.stateDB())
		if err != nil {
			t.Fatal(err)
		}
		if rec, ok := book.get("alpha"); !ok || rec.PaneID != ms["alpha"].Status.PaneID {
			t.Errorf("durable record %+v (found %v), want alpha's pane %s", rec, ok, ms["alpha"].Status.PaneID)
		}
	})
}
