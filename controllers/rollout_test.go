package controllers

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/rollout"
)

// rolloutProfile is testProfile with the env value mode and the extra
// spec lines (rollout settings).
func rolloutProfile(mode string, extra ...string) string {
	s := strings.Replace(testProfile, "REVIEW_MODE: strict", "REVIEW_MODE: "+mode, 1)
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

// rolloutFiles are a profile (with extra spec lines) and members of it.
func rolloutFiles(profileExtra []string, names ...string) map[string]string {
	files := map[string]string{"profile.yaml": rolloutProfile("strict", profileExtra...)}
	for _, n := range names {
		files[n+".yaml"] = memberYAML(n)
	}
	return files
}

// rolloutSeen is what a watch of a rollout saw: the most members being
// replaced at once, and every reason a member's UpToDate condition was
// False for.
type rolloutSeen struct {
	maxReplacing int
	reasons      map[string]bool
}

// watchRollout waits until cond holds, noting what the members show on
// the way.
func (e *env) watchRollout(what string, seen *rolloutSeen, cond func(map[string]v1alpha1.Member) bool) map[string]v1alpha1.Member {
	e.t.Helper()
	if seen.reasons == nil {
		seen.reasons = map[string]bool{}
	}
	return e.waitFor(what, func(ms map[string]v1alpha1.Member) bool {
		n := 0
		for _, m := range ms {
			if m.Status.Rollout != "" {
				n++
			}
			if c := condition(m, v1alpha1.ConditionUpToDate); c.Status == v1alpha1.ConditionFalse {
				seen.reasons[c.Reason] = true
			}
		}
		seen.maxReplacing = max(seen.maxReplacing, n)
		return cond(ms)
	})
}

// readyOnNewPanes holds when every named member's agent is Ready and up to
// date in a pane other than its old one.
func readyOnNewPanes(old map[string]string) func(map[string]v1alpha1.Member) bool {
	return func(ms map[string]v1alpha1.Member) bool {
		for name, pane := range old {
			m := ms[name]
			if condition(m, v1alpha1.ConditionReady).Status != v1alpha1.ConditionTrue || m.Status.PaneID == "" || m.Status.PaneID == pane ||
				condition(m, v1alpha1.ConditionUpToDate).Status != v1alpha1.ConditionTrue || m.Status.Rollout != "" {
				return false
			}
		}
		return true
	}
}

// panesOf maps each named member to its pane.
func panesOf(ms map[string]v1alpha1.Member, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = ms[n].Status.PaneID
	}
	return out
}

// progressing is a profile's Progressing condition as the Manager shows it.
func (e *env) progressing(profile string) (v1alpha1.Profile, v1alpha1.Condition) {
	e.t.Helper()
	p, ok := e.mgr.Profile(profile)
	if !ok {
		e.t.Fatalf("no profile %s", profile)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionProgressing {
			return p, c
		}
	}
	e.t.Fatalf("profile %s has no Progressing condition: %+v", profile, p.Status)
	return p, v1alpha1.Condition{}
}

// A Profile change rolls out to its three members: each agent is
// replaced by one running the new profile (its env in the new pane), never
// more than spec.rollout.maxUnavailable at once — the others keep their
// agents, UpToDate=False (RolloutPending) — each new agent Ready before the
// next turn; then the profile shows the rollout complete and the metrics
// count it. Issue 21 item 4: a Profile change did not roll out at all.
func TestRollout_ProfileChangeReplacesMaxUnavailableAtATime(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    int
	}{{"", 1}, {"rollout: {maxUnavailable: 2}", 2}, {`rollout: {maxUnavailable: "67%"}`, 2}} {
		t.Run(fmt.Sprintf("maxUnavailable %d (%q)", tc.want, tc.setting), func(t *testing.T) {
			var extra []string
			if tc.setting != "" {
				extra = []string{tc.setting}
			}
			eachProtocol(t, rolloutFiles(extra, "alpha", "bravo", "charlie"), func(t *testing.T, e *env) {
				e.fakeOpts = &herdrsim.Options{ReadyDelay: 5 * time.Second}
				e.start()
				ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo", "charlie"))
				old := panesOf(ms, "alpha", "bravo", "charlie")
				t0 := time.Now()
				e.write("profile.yaml", rolloutProfile("lax", extra...))

				var seen rolloutSeen
				ms = e.watchRollout("every member replaced", &seen, readyOnNewPanes(old))
				if seen.maxReplacing != tc.want {
					t.Errorf("at most %d members were replaced at once; want %d", seen.maxReplacing, tc.want)
				}
				if !seen.reasons[v1alpha1.ReasonRolloutPending] {
					t.Errorf("no member waited for its turn (UpToDate reasons seen: %v)", seen.reasons)
				}
				// Each turn lasts the new agent's start (5 s): ⌈3/n⌉ turns.
				if took, least := time.Since(t0), time.Duration((3+tc.want-1)/tc.want)*5*time.Second; took < least {
					t.Errorf("the rollout took %s; want at least %s (each new agent Ready before the next turn)", took, least)
				}
				for name, m := range ms {
					if p, _ := e.fake.Pane(m.Status.PaneID); p.Env["REVIEW_MODE"] != "lax" {
						t.Errorf("%s's new agent runs with REVIEW_MODE=%q; want lax", name, p.Env["REVIEW_MODE"])
					}
				}
				e.waitIdle()
				p, c := e.progressing("codex-fast")
				if c.Status != v1alpha1.ConditionFalse || c.Reason != v1alpha1.ReasonRolloutComplete ||
					p.Status.Members != 3 || p.Status.UpdatedMembers != 3 || p.Status.ReadyMembers != 3 || len(p.Status.Updating) != 0 {
					t.Errorf("profile status after the rollout = %+v; want 3 of 3 updated and Ready, RolloutComplete", p.Status)
				}
				if got := testutil.ToFloat64(e.metrics.rollouts.replacements.WithLabelValues("codex-fast", replacementReady)); got != 3 {
					t.Errorf("fleetd_rollout_replacements_total{result=ready} = %v, want 3", got)
				}
				if got := metricValue(t, e.reg, "fleetd_rollout_members_updated"); got != 3 {
					t.Errorf("fleetd_rollout_members_updated = %v, want 3", got)
				}
				if c := e.fake.Calls(); c["tab.close"] != 3 || c["agent.start"] != 6 {
					t.Errorf("tab.close %d, agent.start %d; want each member replaced once (3, 6)", c["tab.close"], c["agent.start"])
				}
			})
		})
	}
}

// A member whose agent is working delays its replacement: the turn it
// holds waits for the agent's idle moment (Updating), the other member
// waits for the turn (RolloutPending) and keeps its agent, however long
// the turn lasts; once the agent is idle it is replaced, and then the
// other one.
func TestRollout_AWorkingMemberDelaysItsReplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, rolloutFiles(nil, "alpha", "bravo"))
		e.tweak = func(o *Options) { o.Workers = 1 } // alpha, first in the queue, takes the turn
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo"))
		old := panesOf(ms, "alpha", "bravo")
		e.setStatus(old["alpha"], "working")
		e.write("profile.yaml", rolloutProfile("lax"))

		ms = e.waitFor("alpha Updating, bravo waiting", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"]
			return a.DisplayPhase() == v1alpha1.PhaseUpdating &&
				condition(ms["bravo"], v1alpha1.ConditionUpToDate).Reason == v1alpha1.ReasonRolloutPending
		})
		if c := condition(ms["alpha"], v1alpha1.ConditionUpToDate); !strings.Contains(c.Message, "profile/codex-fast's rollout replaces the agent once it is idle — the agent is working") {
			t.Errorf("alpha's UpToDate while it works: %q", c.Message)
		}
		if c := condition(ms["bravo"], v1alpha1.ConditionUpToDate); !strings.Contains(c.Message, "waits for its turn in profile/codex-fast's rollout (maxUnavailable 1; being replaced: alpha)") {
			t.Errorf("bravo's UpToDate while it waits: %q", c.Message)
		}
		if ms["alpha"].Status.Rollout != "codex-fast" || ms["bravo"].Status.Rollout != "" {
			t.Errorf("status.rollout: alpha %q, bravo %q; want codex-fast, none", ms["alpha"].Status.Rollout, ms["bravo"].Status.Rollout)
		}
		time.Sleep(time.Hour) // a long turn
		e.waitIdle()
		if c := e.fake.Calls(); c["tab.close"] != 0 || !e.paneAlive(old["alpha"]) || !e.paneAlive(old["bravo"]) {
			t.Fatalf("an agent was replaced while alpha worked (tab.close %d)", c["tab.close"])
		}
		_, c := e.progressing("codex-fast")
		if c.Status != v1alpha1.ConditionTrue || c.Reason != v1alpha1.ReasonRollingOut || !strings.Contains(c.Message, "0 of 2 members updated") || !strings.Contains(c.Message, "replacing alpha") {
			t.Errorf("profile's Progressing while alpha works: %+v", c)
		}

		e.setStatus(old["alpha"], "idle")
		e.waitFor("every member replaced", readyOnNewPanes(old))
	})
}

// A replacement whose new agent does not become Ready stops the rollout:
// the profile's Progressing is False (RolloutFailed) naming the member, a
// RolloutFailed event says so, fleetd_rollout_failed is 1, and no other
// member is replaced, however long; the stop is kept with the profile's
// revisions, and clearing it (`fleetd rollout resume`) lets the rollout go
// on.
func TestRollout_AFailedReplacementStopsTheRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, rolloutFiles(nil, "alpha", "bravo", "charlie"))
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo", "charlie"))
		old := panesOf(ms, "alpha", "bravo", "charlie")
		ready := e.fake.SetDefaultBehavior(herdrsim.Behavior{Launch: herdrsim.LaunchExit})
		e.write("profile.yaml", rolloutProfile("lax"))

		var failed string
		e.waitFor("the rollout stopped", func(ms map[string]v1alpha1.Member) bool {
			h := e.mgr.Revisions().Get(v1alpha1.KindProfile, "codex-fast")
			if h.Halt == nil {
				return false
			}
			failed = h.Halt.Member
			return true
		})
		_, c := e.progressing("codex-fast")
		if c.Status != v1alpha1.ConditionFalse || c.Reason != v1alpha1.ReasonRolloutFailed ||
			!strings.Contains(c.Message, "member "+failed+" did not become Ready after its replacement") {
			t.Errorf("profile's Progressing after the failure: %+v", c)
		}
		if !hasEvent(e.mgr.MemberEvents(failed), v1alpha1.ReasonRolloutFailed, "profile/codex-fast's rollout stopped") ||
			!hasEvent(e.mgr.ProfileEvents("codex-fast"), v1alpha1.ReasonRolloutFailed, "member "+failed) {
			t.Errorf("no RolloutFailed event: member %v, profile %v", e.mgr.MemberEvents(failed), e.mgr.ProfileEvents("codex-fast"))
		}
		if got := metricValue(t, e.reg, "fleetd_rollout_failed"); got != 1 {
			t.Errorf("fleetd_rollout_failed = %v, want 1", got)
		}
		time.Sleep(time.Hour)
		e.waitIdle()
		for _, m := range e.mgr.Members() {
			if m.Name == failed {
				continue
			}
			up := condition(m, v1alpha1.ConditionUpToDate)
			if m.Status.PaneID != old[m.Name] || up.Reason != v1alpha1.ReasonRolloutFailed {
				t.Errorf("%s after the rollout stopped: pane %s (was %s), UpToDate %+v; want its agent kept, RolloutFailed", m.Name, m.Status.PaneID, old[m.Name], up)
			}
		}

		e.fake.SetDefaultBehavior(ready)
		if err := e.mgr.Revisions().Update(v1alpha1.KindProfile, "codex-fast", func(h *rollout.History) bool {
			h.Halt = nil
			return true
		}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("every member replaced", readyOnNewPanes(old))
		if _, c := e.progressing("codex-fast"); c.Reason != v1alpha1.ReasonRolloutComplete {
			t.Errorf("after resuming: %+v", c)
		}
	})
}

// spec.rollout.paused holds a profile's rollout: no member is replaced,
// each shows UpToDate=False (RolloutPaused), the profile RolloutPaused and
// fleetd_rollout_paused 1; a turn already waiting for a busy agent is
// given back. Un-pausing goes on.
func TestRollout_PauseHoldsAndResumeGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, rolloutFiles(nil, "alpha", "bravo"))
		e.tweak = func(o *Options) { o.Workers = 1 }
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo"))
		old := panesOf(ms, "alpha", "bravo")
		e.setStatus(old["alpha"], "working")
		e.write("profile.yaml", rolloutProfile("lax"))
		e.waitFor("alpha's turn waits for idle", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"]
			return a.DisplayPhase() == v1alpha1.PhaseUpdating
		})

		e.write("profile.yaml", rolloutProfile("lax", "rollout: {paused: true}"))
		e.waitFor("both paused", func(ms map[string]v1alpha1.Member) bool {
			for _, n := range []string{"alpha", "bravo"} {
				if c := condition(ms[n], v1alpha1.ConditionUpToDate); c.Reason != v1alpha1.ReasonRolloutPaused || ms[n].Status.Rollout != "" {
					return false
				}
			}
			return true
		})
		e.setStatus(old["alpha"], "idle")
		time.Sleep(time.Hour)
		e.waitIdle()
		if c := e.fake.Calls(); c["tab.close"] != 0 {
			t.Fatalf("tab.close %d while the rollout was paused; want 0", c["tab.close"])
		}
		if _, c := e.progressing("codex-fast"); c.Reason != v1alpha1.ReasonRolloutPaused || !strings.Contains(c.Message, "fleetd rollout resume profile/codex-fast") {
			t.Errorf("profile's Progressing while paused: %+v", c)
		}
		if got := metricValue(t, e.reg, "fleetd_rollout_paused"); got != 1 {
			t.Errorf("fleetd_rollout_paused = %v, want 1", got)
		}

		e.write("profile.yaml", rolloutProfile("lax", "rollout: {paused: false}"))
		e.waitFor("every member replaced", readyOnNewPanes(old))
	})
}

// A change of the Tenant its members target rolls out to them as a
// profile change does, one at a time; writing the profile back as it was
// (an undo) rolls the members back.
func TestRollout_TenantChangeAndUndoRollOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tenant := func(url string) string {
			return "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: " + url + ", credentialEnv: ACME_FLEETD_TOKEN}\n"
		}
		files := rolloutFiles(nil)
		files["tenant.yaml"] = tenant("https://a.example/mcp")
		for _, n := range []string{"alpha", "bravo"} {
			files[n+".yaml"] = memberYAML(n, "mcpTarget: {kind: tenant, tenantId: acme}")
		}
		e := newEnv(t, files)
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo"))
		old := panesOf(ms, "alpha", "bravo")

		e.write("tenant.yaml", tenant("https://b.example/mcp"))
		var seen rolloutSeen
		ms = e.watchRollout("the tenant change rolled out", &seen, readyOnNewPanes(old))
		if seen.maxReplacing != 1 {
			t.Errorf("at most %d members replaced at once; want 1", seen.maxReplacing)
		}

		second := panesOf(ms, "alpha", "bravo")
		e.write("profile.yaml", rolloutProfile("lax"))
		ms = e.waitFor("the profile change rolled out", readyOnNewPanes(second))
		third := panesOf(ms, "alpha", "bravo")
		e.write("profile.yaml", rolloutProfile("strict"))
		ms = e.waitFor("the undo rolled out", readyOnNewPanes(third))
		for name, m := range ms {
			if p, _ := e.fake.Pane(m.Status.PaneID); p.Env["REVIEW_MODE"] != "strict" {
				t.Errorf("%s after the undo runs with REVIEW_MODE=%q; want strict", name, p.Env["REVIEW_MODE"])
			}
		}
	})
}

// A change of what a profile says that its members' agents do not run
// with (its description, restartPolicy, spec.rollout) replaces nothing,
// and a pane recorded before fleetd kept the digest of its references
// takes the current one: an upgrade of fleetd replaces nothing.
func TestRollout_ChangesTheAgentsDoNotRunWithReplaceNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, rolloutFiles(nil, "alpha"))
		e.start()
		old := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status.PaneID
		calls := e.fake.Calls()
		e.write("profile.yaml", rolloutProfile("strict", "description: reviews", "restartPolicy: OnFailure", "rollout: {maxUnavailable: 3}"))
		e.waitFor("the change seen", func(map[string]v1alpha1.Member) bool {
			p, _ := e.mgr.Profile("codex-fast")
			return p.Spec.Description == "reviews"
		})
		time.Sleep(time.Minute)
		e.waitIdle()
		if got := e.callsSince(calls); len(got) != 0 {
			t.Errorf("herdr calls after the change: %v; want none", got)
		}

		// A record of an older fleetd has no digest.
		e.stop()
		rec, _ := e.mgr.own.get("alpha")
		rec.Refs = ""
		if err := e.mgr.own.put(rec); err != nil {
			t.Fatal(err)
		}
		e.write("profile.yaml", rolloutProfile("lax"))
		e.start()
		e.waitFor("alpha adopted", allPhase(v1alpha1.PhaseReady, "alpha"))
		time.Sleep(time.Minute)
		e.waitIdle()
		if m, _ := e.mgr.Member("alpha"); m.Status.PaneID != old || condition(m, v1alpha1.ConditionUpToDate).Status != v1alpha1.ConditionTrue {
			t.Errorf("after the upgrade: pane %s (was %s), UpToDate %+v; want the agent kept", m.Status.PaneID, old, condition(m, v1alpha1.ConditionUpToDate))
		}
		if rec, _ := e.mgr.own.get("alpha"); rec.Refs == "" {
			t.Error("the record still has no digest of its references")
		}
	})
}

// A profile changes while most of its members' files are gone and their
// prune is held: the held members keep their agents (a replacement would
// get no pane: createGate), UpToDate=False saying why, and the rollout
// replaces the member still defined and completes without them. (Merged
// with the prune hold: the rollout closed the held members' tabs, and
// they got no new ones.)
func TestRollout_HeldMembersKeepTheirAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"m1", "m2", "m3", "m4"}
		e := newEnv(t, rolloutFiles(nil, names...))
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		old := panesOf(ms, names...)
		removeFiles("m1", "m2", "m3")(e)
		e.waitFor("three held", manifestValid(v1alpha1.ReasonPruneHeld, names[:3]...))

		e.write("profile.yaml", rolloutProfile("lax"))
		e.waitFor("m4 replaced", readyOnNewPanes(map[string]string{"m4": old["m4"]}))
		ms = e.idleMembers()
		for _, n := range names[:3] {
			if !e.paneAlive(old[n]) || ms[n].Status.PaneID != old[n] {
				t.Errorf("%s (held) on pane %q, its old pane %s alive %v; want its agent kept", n, ms[n].Status.PaneID, old[n], e.paneAlive(old[n]))
			}
			if c := condition(ms[n], v1alpha1.ConditionUpToDate); c.Status != v1alpha1.ConditionFalse || c.Reason != v1alpha1.ReasonPruneHeld {
				t.Errorf("%s (held): UpToDate %+v; want False, PruneHeld", n, c)
			}
		}
		if _, c := e.progressing("codex-fast"); c.Reason != v1alpha1.ReasonRolloutComplete {
			t.Errorf("profile's Progressing with the held members left out: %+v; want RolloutComplete", c)
		}
	})
}

// A member the rollout's queue waits behind that is updated by a change
// of its own (which takes no turn) lets the members behind it go on: the
// chaos test saw w3 wait for good behind w0, whose own edit had replaced
// its agent with one that already ran the new profile.
func TestRollout_AMemberUpdatedByItsOwnChangeFreesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, rolloutFiles(nil, "alpha", "bravo"))
		e.start()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "bravo"))
		old := panesOf(ms, "alpha", "bravo")
		e.setStatus(old["alpha"], "working")
		e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp")) // its own change, waiting for idle
		e.waitFor("alpha Updating", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"]
			return a.DisplayPhase() == v1alpha1.PhaseUpdating
		})
		e.write("profile.yaml", rolloutProfile("lax"))
		ms = e.waitFor("bravo waiting behind alpha", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["bravo"], v1alpha1.ConditionUpToDate).Reason == v1alpha1.ReasonRolloutPending
		})
		if c := condition(ms["bravo"], v1alpha1.ConditionUpToDate); !strings.Contains(c.Message, "next: alpha") {
			t.Errorf("bravo's UpToDate while alpha works: %q; want it behind alpha", c.Message)
		}
		e.setStatus(old["alpha"], "idle")
		ms = e.waitFor("every member replaced", readyOnNewPanes(old))
		for name, m := range ms {
			if p, _ := e.fake.Pane(m.Status.PaneID); p.Env["REVIEW_MODE"] != "lax" {
				t.Errorf("%s's new agent runs with REVIEW_MODE=%q; want lax", name, p.Env["REVIEW_MODE"])
			}
		}
	})
}

// TestLaunchHashOf_FollowsTheDefinition: the digest /metrics compares with
// an agent's record is remembered for one definition of a member and
// computed afresh for a new one, so a changed spec is never counted as
// updated from a stale digest.
func TestLaunchHashOf_FollowsTheDefinition(t *testing.T) {
	m := &Manager{states: newMemberStates()}
	first := &v1alpha1.Member{}
	first.Name = "alpha"
	first.Spec.Profile = "one"
	if got, want := m.launchHashOf(first), launchHash(first); got != want {
		t.Fatalf("launchHashOf = %q, want launchHash's %q", got, want)
	}
	if m.states.Get("alpha").rt.launch.of != first {
		t.Fatalf("the digest of the member's definition was not remembered")
	}
	changed := first.DeepCopy()
	changed.Spec.Profile = "two"
	if got, was := m.launchHashOf(changed), launchHash(first); got == was || got != launchHash(changed) {
		t.Errorf("a changed definition got digest %q (the old one was %q), want %q", got, was, launchHash(changed))
	}
	if got := m.launchHashOf(first); got != launchHash(first) {
		t.Errorf("the first definition again: %q, want %q", got, launchHash(first))
	}
}

func TestDigests_RefsOfIsTheDigestOfEachDefinition(t *testing.T) {
	profile := func(args ...string) *v1alpha1.Profile {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"}, Spec: v1alpha1.ProfileSpec{Harness: "codex", Args: args}}
	}
	tenant := &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantSpec{URL: "https://mcp.acme.test/mcp"}}
	var d digests
	p1, p2 := profile("-m", "a"), profile("-m", "b")
	for _, tc := range []struct {
		p *v1alpha1.Profile
		t *v1alpha1.Tenant
	}{{p1, nil}, {p2, nil}, {p1, tenant}, {p1, nil}, {p2, tenant}} {
		if got, want := d.refsOf(tc.p, tc.t), refsHash(tc.p, tc.t); got != want {
			t.Errorf("refsOf(%v, tenant %v) = %s, want refsHash's %s", tc.p.Spec.Args, tc.t != nil, got, want)
		}
	}
	if d.refsOf(p1, nil) == d.refsOf(p2, nil) || d.refsOf(p1, nil) == d.refsOf(p1, tenant) {
		t.Error("a changed profile or a tenant target kept the digest of another definition")
	}
	// Replaced definitions are not kept for good.
	for i := range 3 * maxDigests {
		d.refsOf(profile(fmt.Sprint(i)), nil)
		if n := len(d.refs); n > maxDigests {
			t.Fatalf("after %d definitions the memo holds %d, want at most %d", i+1, n, maxDigests)
		}
	}
}

// A reconcile resets its member's runtime without the Manager's lock (a
// pause, a replacement, the fence) while /metrics asks for the member's
// launch digest under it: the reset leaves the digest alone, so the two
// never touch the same field (run with -race), and the digest is kept.
func TestRuntimeReset_LeavesTheLaunchDigest(t *testing.T) {
	m := &Manager{states: newMemberStates()}
	mem := &v1alpha1.Member{}
	mem.Name = "alpha"
	want := m.launchHashOf(mem)
	m.mu.Lock()
	rt := m.runtimeLocked(mem.Name)
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if got := m.launchHashOf(mem); got != want {
				t.Errorf("launchHashOf = %q, want %q", got, want)
				return
			}
		}
	}()
	for range 200 {
		rt.edit().failures++ // a reconcile's own bookkeeping, then its reset
		rt.reset()
	}
	<-done
	if rt.launch.of != mem || rt.start != nil || rt.rare != nil {
		t.Errorf("after reset: launch memo of %v, start %v, rare %v; want the member's memo and nothing else", rt.launch.of, rt.start, rt.rare)
	}
}
