package controllers

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
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
		e.fakeOpts = &herdrtest.Options{ReadyDelay: ready}
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

// A member whose start check and tab.close each met a dropped connection
// once is not parked until its startup timeout: its agent is seen Ready
// as soon as it is, and nothing is closed or started again.
func TestManager_TransientFailuresDuringStartAreRetriedPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ready = time.Second
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.fakeOpts = &herdrtest.Options{ReadyDelay: ready}
		e.tweak = func(o *Options) { o.ResyncPeriod = time.Hour } // no resync comes to the rescue
		e.startFake(e.fakeOpts)
		e.fake.InjectFault("agent.get", herdrtest.Fault{Drop: true, Times: 1})
		e.fake.InjectFault("tab.close", herdrtest.Fault{Drop: true, Times: 1})
		t0 := time.Now()
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if took := time.Since(t0); took > ready+2*time.Second {
			t.Errorf("alpha Ready after %s; its agent was ready after %s", took, ready)
		}
		if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.create"] != 1 || c["agent.get"] < 2 {
			t.Errorf("agent.start %d, tab.create %d, agent.get %d; want 1, 1 and the dropped check retried", c["agent.start"], c["tab.create"], c["agent.get"])
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
		e.fakeOpts = &herdrtest.Options{Behavior: herdrtest.Behavior{Launch: herdrtest.LaunchNever}}
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
