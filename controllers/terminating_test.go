package controllers

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// While fleetd closes a member's tab — the member deleted, paused or
// replaced by a new definition — the member shows phase Terminating, with a
// condition naming the tab and why, until herdr confirmed the close: a
// slow close, a refused one and one herdr does not answer all leave it
// Terminating, the pane still open. After the close the member is gone,
// Paused or running its new definition, and nothing is left Terminating.
func TestManager_ClosingTabShowsTerminatingUntilHerdrClosedIt(t *testing.T) {
	slow := herdrsim.Fault{Latency: time.Second}
	// The refusal comes after a second: until then the member shows
	// Terminating with its pane open whatever else runs. A refusal at once
	// could be retried before the test looks — by a reconcile that
	// something else queued (the listing after a resubscription), not only
	// after the queue's backoff — and the pane be gone already.
	refused := herdrsim.Fault{Times: 1, Latency: time.Second, Garbage: []byte(`{"id":"x","error":{"code":"internal_error","message":"boom"}}`)}
	unanswered := herdrsim.Fault{Times: 1, Hang: true}
	deleteIt := func(e *env) { e.remove("alpha.yaml") }
	pauseIt := func(e *env) { e.write("alpha.yaml", memberYAML("alpha", "paused: true")) }
	gone := func(_ v1alpha1.Member, ok bool, _ string) bool { return !ok }
	paused := func(m v1alpha1.Member, ok bool, _ string) bool {
		return ok && m.Status.Phase == v1alpha1.PhasePaused && condition(m, v1alpha1.ConditionReady).Reason == v1alpha1.ReasonPaused
	}
	for _, tc := range []struct {
		name   string
		fault  herdrsim.Fault
		act    func(e *env)
		why    string // in the Terminating condition's message
		closed func(m v1alpha1.Member, ok bool, oldPane string) bool
		closes int // tab.close calls until herdr closed the tab
	}{
		{"deleted, herdr slow to close", slow, deleteIt, "the member was deleted", gone, 1},
		{"deleted, herdr refuses the first close", refused, deleteIt, "the member was deleted", gone, 2},
		{"paused, herdr slow to close", slow, pauseIt, "spec.paused is true", paused, 1},
		{"paused, herdr does not answer the first close", unanswered, pauseIt, "spec.paused is true", paused, 2},
		{
			name:  "replaced, herdr slow to close",
			fault: slow,
			act:   func(e *env) { e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp")) },
			why:   "spec changed (generation 1 → 2)",
			closed: func(m v1alpha1.Member, ok bool, oldPane string) bool {
				return ok && m.Status.Phase == v1alpha1.PhaseReady && m.Status.ObservedGeneration == 2 && m.Status.PaneID != oldPane
			},
			closes: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				e.start()
				old := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
				e.fake.InjectFault("tab.close", tc.fault)
				tc.act(e)

				ms := e.waitFor("alpha Terminating", func(ms map[string]v1alpha1.Member) bool {
					return ms["alpha"].Status.Phase == v1alpha1.PhaseTerminating
				})
				a := ms["alpha"]
				if got := a.DisplayPhase(); got != v1alpha1.PhaseTerminating {
					t.Errorf("get members shows phase %q while the tab closes, want Terminating", got)
				}
				if a.Spec.Profile != "codex-fast" {
					t.Errorf("the terminating member is listed without its spec: profile %q", a.Spec.Profile)
				}
				ready, progressing := condition(a, v1alpha1.ConditionReady), condition(a, v1alpha1.ConditionProgressing)
				if ready.Status != v1alpha1.ConditionFalse || ready.Reason != v1alpha1.ReasonTerminating ||
					!strings.Contains(ready.Message, old.TabID) || !strings.Contains(ready.Message, tc.why) {
					t.Errorf("Ready while terminating = %+v; want False, Terminating, naming tab %s and %q", ready, old.TabID, tc.why)
				}
				if progressing.Status != v1alpha1.ConditionTrue || progressing.Reason != v1alpha1.ReasonTerminating {
					t.Errorf("Progressing while terminating = %+v; want True, Terminating", progressing)
				}
				if !e.paneAlive(old.PaneID) {
					t.Error("the member showed Terminating only after its pane was closed")
				}

				e.waitFor("the close confirmed", func(ms map[string]v1alpha1.Member) bool {
					m, ok := ms["alpha"]
					return tc.closed(m, ok, old.PaneID)
				})
				if e.paneAlive(old.PaneID) {
					t.Error("the old pane is still open")
				}
				e.waitIdle()
				if m, ok := e.mgr.Member("alpha"); ok && m.Status.Phase == v1alpha1.PhaseTerminating {
					t.Errorf("left Terminating after the close: %+v", m.Status)
				}
				if got := testutil.ToFloat64(e.metrics.members.WithLabelValues(v1alpha1.PhaseTerminating)); got != 0 {
					t.Errorf("fleetd_members{phase=Terminating} = %v after the close", got)
				}
				if got := e.fake.Calls()["tab.close"]; got != tc.closes {
					t.Errorf("tab.close called %d times, want %d", got, tc.closes)
				}
			})
		})
	}
}

// A deleted member whose tab cannot be closed while herdr is away stays
// listed, Terminating, with Ready=Unknown saying what it waits for; its tab
// is closed, and the member gone, once herdr is back.
func TestManager_DeletedWhileHerdrIsAwayStaysTerminating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		old := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("herdr down visible", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonHerdrUnavailable
		})
		e.remove("alpha.yaml")
		ms := e.waitFor("alpha Terminating", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Status.Phase == v1alpha1.PhaseTerminating
		})
		if c := condition(ms["alpha"], v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionUnknown || c.Reason != v1alpha1.ReasonHerdrUnavailable ||
			!strings.Contains(c.Message, "waiting for herdr to close tab "+old.TabID+": the member was deleted") {
			t.Errorf("Ready of a deleted member while herdr is away = %+v", c)
		}
		if a := ms["alpha"]; a.DisplayPhase() != "Unknown (HerdrUnavailable)" {
			t.Errorf("get members shows %q, want Unknown (HerdrUnavailable)", a.DisplayPhase())
		}
		if err := e.fake.Restart(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { _, ok := ms["alpha"]; return !ok })
		if e.paneAlive(old.PaneID) {
			t.Error("the deleted member's pane is still open after herdr came back")
		}
	})
}
