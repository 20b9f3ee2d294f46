package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// The scenarios of herdr as people run it, each on both protocols
// (eachProtocol): events lost mid-run, a herdr restart with session
// restore, a live handoff, and new shells that take a while to start.
// Converging, an agent at a dialog and a resumed crash are
// TestManager_ThreeMembersReadyEachInOwnTab, TestManager_AgentAtADialogAwaitsInput
// and TestManager_CrashedAgentResumesItsSession.

// membersFiles is a profile and n members m0 … m<n-1>, with their names.
func membersFiles(n int) (map[string]string, []string) {
	files := map[string]string{"profile.yaml": testProfile}
	var names []string
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		names = append(names, name)
		files[name+".yaml"] = memberYAML(name)
	}
	return files, names
}

// callsSince is what herdr was asked for since before, per method, for the
// methods that change what runs in herdr.
func (e *env) callsSince(before map[string]int) map[string]int {
	now := e.fake.Calls()
	out := map[string]int{}
	for _, m := range []string{"workspace.create", "tab.create", "agent.start", "tab.close", "pane.close", "workspace.close"} {
		if d := now[m] - before[m]; d != 0 {
			out[m] = d
		}
	}
	return out
}

// settled waits until the fleet's event stream covers every member's pane
// and herdr's agents were read after it started (a catch-up agent.list or a
// full read), then for quiet.
func (e *env) settled(members int) {
	e.t.Helper()
	e.waitForHerdr("the stream covers every member's pane", func() bool {
		return e.lastSubscriptionPanes() == members && e.readAgentsAfterSubscribe()
	})
	e.waitIdle()
}

// readAgentsAfterSubscribe reports whether herdr's agents were read (an
// agent.list or a session.snapshot) after the newest events.subscribe.
func (e *env) readAgentsAfterSubscribe() bool {
	reqs := e.fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		switch reqs[i].Method {
		case "agent.list", "session.snapshot":
			return true
		case "events.subscribe":
			return false
		}
	}
	return false
}

// The event stream falls behind herdr's history mid-run — the messaging
// hook is slow while an agent works through many turns — and herdr drops
// events fleetd had not read: protocol 22 ends the stream with events_lost,
// protocol 20 drops them silently. Nothing is recreated, no member leaves
// Ready, and a later status change is still seen.
func TestScenario_EventsLostMidRunRecreatesNothing(t *testing.T) {
	files, names := membersFiles(2)
	eachProtocol(t, files, func(t *testing.T, e *env) {
		const ring = 16
		e.fakeOpts = &herdrsim.Options{EventRing: ring}
		hold := make(chan struct{})
		var once sync.Once
		e.tweak = func(o *Options) {
			o.OnAgentStatus = func(member, status string, _ uint64) {
				if member == "m0" && status == "blocked" {
					once.Do(func() { <-hold }) // the hook is slow: fleetd reads no events meanwhile
				}
			}
		}
		e.start()
		before := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		e.settled(len(names))
		calls := e.fake.Calls()
		m0, m1 := before["m0"].Status.PaneID, before["m1"].Status.PaneID

		if err := e.fake.SetAgentStatus(m0, "blocked"); err != nil {
			t.Fatal(err)
		}
		// m1 works through turn after turn while fleetd reads nothing: the
		// client's buffer fills, herdr's writes block, and what follows
		// leaves herdr's history before fleetd reads it.
		turns := func(n int) {
			for i := range n {
				if err := e.fake.SetAgentStatus(m1, []string{"working", "idle"}[i%2]); err != nil {
					t.Fatal(err)
				}
			}
		}
		turns(100)
		synctest.Wait() // herdr is blocked writing to fleetd's full stream
		turns(ring + 1) // more events than herdr retains, ending with m1 working
		close(hold)

		if e.fake.Protocol() >= herdrsim.DefaultProtocol {
			// events_lost: fleetd subscribes again and reads herdr again.
			e.waitForHerdr("resubscribed and read herdr after events_lost", func() bool {
				c := e.fake.Calls()
				return c["events.subscribe"] > calls["events.subscribe"] && c["session.snapshot"] > calls["session.snapshot"]
			})
		}
		e.settled(len(names))
		// What the lost events said is caught up on.
		e.waitFor("m1's last status before the loss ended", func(ms map[string]v1alpha1.Member) bool {
			return ms["m1"].Status.AgentStatus == "working"
		})
		for _, change := range []struct{ member, pane, status string }{{"m0", m0, "working"}, {"m1", m1, "blocked"}} {
			if err := e.fake.SetAgentStatus(change.pane, change.status); err != nil {
				t.Fatal(err)
			}
			e.waitFor(change.member+" "+change.status, func(ms map[string]v1alpha1.Member) bool {
				return ms[change.member].Status.AgentStatus == change.status
			})
		}
		e.waitIdle()
		if got := e.callsSince(calls); len(got) != 0 {
			t.Errorf("herdr calls after the events were lost: %v; want none that change what runs", got)
		}
		after := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		for _, n := range names {
			if a, b := after[n].Status, before[n].Status; a.PaneID != b.PaneID || a.Restarts != 0 {
				t.Errorf("%s: pane %s restarts %d after the loss; want pane %s, 0 restarts", n, a.PaneID, a.Restarts, b.PaneID)
			}
		}
	})
}

// herdr restarts with session restore while fleetd runs: the same pane
// ids, new terminal ids, and the agents relaunched under their names one
// after another. fleetd opens no tab and starts no agent, every member is
// Ready again on its pane's new terminal, and every member's token still
// resolves, bound to it.
func TestScenario_HerdrRestartWithRestoreKeepsEverything(t *testing.T) {
	files, names := membersFiles(3)
	eachProtocol(t, files, func(t *testing.T, e *env) {
		e.fakeOpts = &herdrsim.Options{ReadyDelay: 2 * time.Second}
		reg := e.withTokens()
		e.start()
		before := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		e.settled(len(names))
		toks := map[string]string{}
		for _, n := range names {
			toks[n] = e.paneToken(before[n].Status.PaneID)
		}
		calls := e.fake.Calls()

		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("herdr down visible", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["m0"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonHerdrUnavailable
		})
		if err := e.fake.RestartRestored(nil); err != nil {
			t.Fatal(err)
		}
		terminals := map[string]string{}
		for _, n := range names {
			p, ok := e.fake.Pane(before[n].Status.PaneID)
			if !ok || p.TerminalID == before[n].Status.TerminalID || p.AgentName != n {
				t.Fatalf("%s: herdr restored pane %+v, %v; want the same pane id, a new terminal, the agent under its name", n, p, ok)
			}
			terminals[n] = p.TerminalID
		}
		after := e.waitFor("all Ready again on their new terminals", readyOn(terminals))
		e.settled(len(names))
		if got := e.callsSince(calls); len(got) != 0 {
			t.Errorf("herdr calls after the restart: %v; want no new tab, no agent started, nothing closed", got)
		}
		for _, n := range names {
			st := after[n].Status
			if st.PaneID != before[n].Status.PaneID || st.TabID != before[n].Status.TabID || st.Restarts != 0 {
				t.Errorf("%s: pane %s tab %s restarts %d; want %s %s 0", n, st.PaneID, st.TabID, st.Restarts, before[n].Status.PaneID, before[n].Status.TabID)
			}
			id, ok := reg.Resolve(toks[n])
			if !ok || id.Member != n || id.PaneID != st.PaneID || id.TerminalID != st.TerminalID {
				t.Errorf("%s's token resolves to %+v, %v; want it bound to %s/%s", n, id, ok, st.PaneID, st.TerminalID)
			}
		}
		if tabs := len(e.tabLabels()); tabs != len(names)+1 {
			t.Errorf("%d tabs in herdr after the restart; want the members' %d and the workspace's first", tabs, len(names))
		}
	})
}

// herdr hands off live to a new binary while fleetd runs: every connection
// drops, the terminal ids change, everything else stays. fleetd adopts its
// panes: no new tab, no agent started, every member Ready on the new
// terminal and its token bound to it.
func TestScenario_LiveHandoffIsAdopted(t *testing.T) {
	files, names := membersFiles(2)
	eachProtocol(t, files, func(t *testing.T, e *env) {
		reg := e.withTokens()
		e.start()
		before := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		e.settled(len(names))
		calls := e.fake.Calls()

		if err := e.fake.Handoff(); err != nil {
			t.Fatal(err)
		}
		terminals := map[string]string{}
		for _, n := range names {
			p, _ := e.fake.Pane(before[n].Status.PaneID)
			terminals[n] = p.TerminalID
		}
		after := e.waitFor("all Ready on their new terminals", readyOn(terminals))
		e.settled(len(names))
		if got := e.callsSince(calls); len(got) != 0 {
			t.Errorf("herdr calls after the handoff: %v; want none that change what runs", got)
		}
		for _, n := range names {
			st := after[n].Status
			if st.PaneID != before[n].Status.PaneID || st.Restarts != 0 || st.TerminalID == before[n].Status.TerminalID {
				t.Errorf("%s: pane %s terminal %s restarts %d; want pane %s on a new terminal, 0 restarts",
					n, st.PaneID, st.TerminalID, st.Restarts, before[n].Status.PaneID)
			}
			if id, ok := reg.Resolve(e.paneToken(st.PaneID)); !ok || id.Member != n || id.TerminalID != st.TerminalID {
				t.Errorf("%s's token resolves to %+v, %v; want it bound to terminal %s", n, id, ok, st.TerminalID)
			}
		}
	})
}

// On a herdr whose new shells take 400 ms to start, agent.start answers
// agent_pane_busy until the shell is up. Every member is started in the
// pane fleetd created for it once its shell is up: no pane closed, no tab
// created again, no restart, never Degraded — neither while they start
// nor in the 20 s after. (Before, every member was restarted three times
// and ended Degraded within 20 s.)
func TestScenario_SlowShellsStartEveryMemberOnce(t *testing.T) {
	files, names := membersFiles(5)
	eachProtocol(t, files, func(t *testing.T, e *env) {
		const shell = 400 * time.Millisecond
		e.fakeOpts = &herdrsim.Options{ShellStartDelay: shell}
		var mu sync.Mutex
		bad := map[string]string{} // member → the first restart or Degraded seen
		watch := func(ms []v1alpha1.Member) bool {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				if _, seen := bad[m.Name]; !seen && (m.Status.Restarts > 0 || m.Status.Phase == v1alpha1.PhaseDegraded) {
					bad[m.Name] = fmt.Sprintf("phase %s, %d restarts, lastError %q", m.Status.Phase, m.Status.Restarts, m.Status.LastError)
				}
			}
			return false
		}
		t0 := time.Now()
		e.start()
		ctx, cancel := context.WithCancel(context.Background())
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			e.mgr.WaitFor(ctx, watch)
		}()
		ms := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
		if took := time.Since(t0); took < shell {
			t.Errorf("all Ready after %s, before their shells were up (%s)", took, shell)
		}
		time.Sleep(20 * time.Second)
		e.waitIdle()
		cancel()
		<-watched

		mu.Lock()
		defer mu.Unlock()
		if len(bad) != 0 {
			t.Errorf("members restarted or Degraded: %v", bad)
		}
		c := e.fake.Calls()
		if c["tab.create"] != len(names) || c["tab.close"] != 0 || c["agent.start"] <= len(names) {
			t.Errorf("tab.create %d, tab.close %d, agent.start %d; want %d, 0 and the busy refusals retried",
				c["tab.create"], c["tab.close"], c["agent.start"], len(names))
		}
		now := e.mgr.Members()
		for _, m := range now {
			if m.Status.Phase != v1alpha1.PhaseReady || m.Status.PaneID != ms[m.Name].Status.PaneID {
				t.Errorf("%s 20 s later: phase %s pane %s; want Ready in pane %s", m.Name, m.Status.Phase, m.Status.PaneID, ms[m.Name].Status.PaneID)
			}
			if p, ok := e.fake.Pane(m.Status.PaneID); !ok || p.AgentName != m.Name {
				t.Errorf("%s: pane %s runs %+v", m.Name, m.Status.PaneID, p)
			}
		}
	})
}

// A status change no stream delivers — it comes after a start's check and
// before the renewed subscription that covers the new pane, and herdr 0.9
// replays nothing to a new subscription — is caught up on by the agent
// listing after the renewal and shown in the member's status at once, not
// at the next resync. (On protocol 22 the member showed the old status
// until the next resync.)
func TestScenario_StatusCaughtUpAfterResubscribeIsShownAtOnce(t *testing.T) {
	eachProtocol(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
		e.tweak = func(o *Options) { o.ResyncPeriod = time.Hour } // no resync comes to the rescue
		e.start()
		pane := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status.PaneID
		if err := e.fake.SetAgentStatus(pane, "blocked"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		e.waitFor("alpha blocked", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.AgentStatus == "blocked" })
		if took := time.Since(t0); took > time.Second {
			t.Errorf("alpha shown blocked %s after the change", took)
		}
		e.settled(1)
		if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.create"] != 1 {
			t.Errorf("agent.start %d, tab.create %d; want 1 each", c["agent.start"], c["tab.create"])
		}
	})
}

// A herdr restart with restore in which one agent comes back resumed in its
// own session (herdr knew its agent_session) and another does not come
// back at all: the first is adopted as it is, the second is replaced —
// at once on protocol 22, which says why (restore_error), after its
// startup timeout on protocol 20, which does not.
func TestScenario_HerdrRestartResumesOneAgentAndLosesAnother(t *testing.T) {
	files := map[string]string{
		"profile.yaml": strings.Replace(testProfile, "spec:\n", "spec:\n  startupTimeout: 10s\n", 1),
		"kept.yaml":    memberYAML("kept"),
		"lost.yaml":    memberYAML("lost"),
	}
	eachProtocol(t, files, func(t *testing.T, e *env) {
		const session = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"
		reg := e.withTokens()
		e.start()
		before := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "kept", "lost"))
		kept, lost := before["kept"].Status, before["lost"].Status
		if err := e.fake.SetAgentSession(kept.PaneID, herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: session}); err != nil {
			t.Fatal(err)
		}
		e.settled(2)
		keptTok := e.paneToken(kept.PaneID)
		calls := e.fake.Calls()

		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if err := e.fake.RestartRestored(&herdrsim.RestoreOptions{RestoreErrors: map[string]string{lost.PaneID: "codex exited with status 1"}}); err != nil {
			t.Fatal(err)
		}
		after := e.waitFor("kept adopted, lost replaced", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "kept", "lost")(ms) && ms["lost"].Status.PaneID != lost.PaneID
		})
		took := time.Since(t0)
		if e.fake.Protocol() >= herdrsim.DefaultProtocol {
			if took >= time.Second {
				t.Errorf("lost replaced %s after the restart; herdr said at once that its agent was not restored", took)
			}
			if evs := e.mgr.MemberEvents("lost"); !slices.ContainsFunc(evs, func(ev v1alpha1.Event) bool {
				return strings.Contains(ev.Message, "could not restore") && strings.Contains(ev.Message, "codex exited with status 1")
			}) {
				t.Errorf("no event of lost's with herdr's restore_error: %+v", evs)
			}
		} else if took < 10*time.Second {
			t.Errorf("lost replaced %s after the restart, before its 10s startup timeout", took)
		}
		e.settled(2)
		got := e.callsSince(calls)
		if got["tab.create"] != 1 || got["agent.start"] != 1 || got["tab.close"] != 1 {
			t.Errorf("herdr calls after the restart: %v; want lost's tab closed, one tab created and one agent started", got)
		}
		// kept was Ready before the restart too: its status may name its
		// old terminal until its rekey is written.
		k := e.waitFor("kept on the terminal herdr gave its restored pane", func(ms map[string]v1alpha1.Member) bool {
			return ms["kept"].Status.TerminalID != kept.TerminalID
		})["kept"].Status
		if k.PaneID != kept.PaneID || k.Restarts != 0 {
			t.Errorf("kept: pane %s restarts %d; want %s, 0", k.PaneID, k.Restarts, kept.PaneID)
		}
		if p, _ := e.fake.Pane(k.PaneID); p.AgentName != "kept" || p.AgentSession == nil || p.AgentSession.Value != session {
			t.Errorf("kept's pane runs %q with session %+v; want its own session", p.AgentName, p.AgentSession)
		}
		if id, ok := reg.Resolve(keptTok); !ok || id.Member != "kept" || id.TerminalID != k.TerminalID {
			t.Errorf("kept's token resolves to %+v, %v; want it bound to terminal %s", id, ok, k.TerminalID)
		}
		if after["lost"].Status.Restarts != 1 {
			t.Errorf("lost: %d restarts; want 1", after["lost"].Status.Restarts)
		}
	})
}

// readyOn is a waitFor condition: every member named in terminals is Ready
// on the terminal given for it.
func readyOn(terminals map[string]string) func(map[string]v1alpha1.Member) bool {
	return func(ms map[string]v1alpha1.Member) bool {
		for n, term := range terminals {
			if ms[n].Status.Phase != v1alpha1.PhaseReady || ms[n].Status.TerminalID != term {
				return false
			}
		}
		return true
	}
}
