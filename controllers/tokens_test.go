package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// withTokens runs the scenario's Managers with fleetd's harness launcher on
// a token registry in the state directory, as the daemon does.
func (e *env) withTokens() *tokens.Registry {
	e.t.Helper()
	reg, l := e.harnessLauncher()
	e.tweak = func(o *Options) { o.Launcher = l }
	return reg
}

// harnessLauncher is fleetd's harness launcher on a token registry in the
// state directory, as the daemon builds it.
func (e *env) harnessLauncher() (*tokens.Registry, *harness.Launcher) {
	e.t.Helper()
	reg, err := tokens.Open(e.state, e.stateDB(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := harness.NewLauncher(harness.LauncherOptions{StateDir: e.state,
		Gateway: plan.Gateway{URL: "http://127.0.0.1:8080/mcp"}, Tokens: reg, Executable: "/usr/local/bin/fleetd"})
	if err != nil {
		e.t.Fatal(err)
	}
	return reg, l
}

// paneToken is the FLEETD_TOKEN herdr gave a live pane.
func (e *env) paneToken(pane string) string {
	e.t.Helper()
	env, ok := e.fake.PaneEnv(pane)
	if !ok || env[harness.TokenEnv] == "" {
		e.t.Fatalf("pane %s has no token", pane)
	}
	return env[harness.TokenEnv]
}

// ownership is a member's ownership record as the state database holds
// it, while fleetd is stopped.
func (e *env) ownership(member string) map[string]any {
	e.t.Helper()
	var rec map[string]any
	err := e.stateDB().Each(statedb.Owned, func(key string, value []byte) error {
		if key == member {
			return json.Unmarshal(value, &rec)
		}
		return nil
	})
	if err != nil || rec == nil {
		e.t.Fatalf("ownership record of %s: %v (found: %v)", member, err, rec != nil)
	}
	return rec
}

// setOwnership replaces a member's ownership record in the state database,
// while fleetd is stopped.
func (e *env) setOwnership(member string, rec map[string]any) {
	e.t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.stateDB().Write(statedb.Put(statedb.Owned, member, data)); err != nil {
		e.t.Fatal(err)
	}
}

// editOwnership rewrites fields of a member's ownership record, keeping
// the others, while fleetd is stopped.
func (e *env) editOwnership(member string, set map[string]string) {
	e.t.Helper()
	rec := e.ownership(member)
	for k, v := range set {
		rec[k] = v
	}
	e.setOwnership(member, rec)
}

// A pane that ended while fleetd was down releases its own token only:
// herdr giving its pane (and tab) id to another member's pane since — a
// workspace id reused after a herdr restart — must not revoke that
// member's token.
func TestManager_ReusedPaneIDNeverRevokesAnotherMembersToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		reg := e.withTokens()
		e.start()
		before := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		alpha, beta := before["alpha"].Status, before["beta"].Status
		alphaTok, betaTok := e.paneToken(alpha.PaneID), e.paneToken(beta.PaneID)
		e.stop()
		// While fleetd is down alpha's pane ends, and its ids now name
		// beta's pane and tab.
		if err := e.fake.KillPane(alpha.PaneID); err != nil {
			t.Fatal(err)
		}
		e.editOwnership("alpha", map[string]string{"paneId": beta.PaneID, "tabId": beta.TabID, "terminalId": "term_of_alphas_old_pane"})

		e.start()
		after := e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha", "beta")(ms) && ms["alpha"].Status.PaneID != beta.PaneID && ms["alpha"].Status.PaneID != ""
		})
		if id, ok := reg.Resolve(betaTok); !ok || id.Member != "beta" {
			t.Errorf("beta's token resolves to %+v, %v after alpha's record named beta's pane id; want beta", id, ok)
		}
		if _, ok := reg.Resolve(alphaTok); ok {
			t.Error("the token of alpha's ended pane still resolves")
		}
		if after["beta"].Status.PaneID != beta.PaneID || !e.paneAlive(beta.PaneID) {
			t.Error("beta's pane was disturbed")
		}
		if id, ok := reg.Resolve(e.paneToken(after["alpha"].Status.PaneID)); !ok || id.Member != "alpha" {
			t.Errorf("alpha's new token resolves to %+v, %v", id, ok)
		}
	})
}

// After herdr restarts (or hands off live), terminal ids change and pane ids
// stay: fleetd adopts its panes by pane id, confirmed by the agent's name,
// opens no tab, starts no agent, and every worker's token stays valid and
// is bound to the pane's new terminal.
func TestManager_NewTerminalIDsAfterHerdrRestartAreAdoptedByPaneID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		reg := e.withTokens()
		e.start()
		before := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		e.stop()
		calls := e.fake.Calls()
		// fleetd's records hold the terminal ids herdr had before it
		// restarted; herdr now reports new ones for the same panes.
		for _, n := range []string{"alpha", "beta"} {
			e.editOwnership(n, map[string]string{"terminalId": "term_before_restart_" + n})
		}
		e.start()
		after := e.waitFor("both adopted", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha", "beta")(ms) && ms["alpha"].Status.PaneID != "" && ms["beta"].Status.PaneID != ""
		})
		e.waitIdle()
		now := e.fake.Calls()
		for _, m := range []string{"tab.create", "agent.start", "tab.close"} {
			if now[m] != calls[m] {
				t.Errorf("%s called %d times after the restart", m, now[m]-calls[m])
			}
		}
		for _, n := range []string{"alpha", "beta"} {
			st, was := after[n].Status, before[n].Status
			if st.PaneID != was.PaneID || st.TerminalID != was.TerminalID || st.Restarts != 0 {
				t.Errorf("%s: pane %s terminal %s restarts %d; want %s %s 0", n, st.PaneID, st.TerminalID, st.Restarts, was.PaneID, was.TerminalID)
			}
			id, ok := reg.Resolve(e.paneToken(st.PaneID))
			if !ok || id.Member != n || id.PaneID != st.PaneID || id.TerminalID != st.TerminalID {
				t.Errorf("%s's token resolves to %+v, %v; want bound to %s/%s", n, id, ok, st.PaneID, st.TerminalID)
			}
		}
	})
}

// A tab whose ownership record was lost is closed as an orphan, and the
// token of its pane stops resolving with it.
func TestManager_OrphanTabsTokenIsRevokedWhenItIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		reg := e.withTokens()
		e.start()
		old := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		oldTok := e.paneToken(old.PaneID)
		e.stop()
		if err := e.stateDB().Write(statedb.Delete(statedb.Owned, "alpha")); err != nil {
			t.Fatal(err)
		}
		e.start()
		e.waitForHerdr("the orphaned tab closed", func() bool { _, open := e.tabLabels()[old.TabID]; return !open })
		if id, ok := reg.Resolve(oldTok); ok {
			t.Errorf("the closed orphan's token still resolves to %+v", id)
		}
		now := e.waitFor("alpha Ready again", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha")(ms) && ms["alpha"].Status.PaneID != old.PaneID
		})["alpha"].Status
		if id, ok := reg.Resolve(e.paneToken(now.PaneID)); !ok || id.Member != "alpha" {
			t.Errorf("alpha's new token resolves to %+v, %v", id, ok)
		}
	})
}

// An adopted agent that herdr reports launch-pending long after fleetd
// started it — herdr restored its session and relaunched it — gets a full
// startup timeout from when fleetd sees it, instead of being killed for a
// deadline counted from the ownership record.
func TestManager_RelaunchedAgentAfterRestoreIsNotKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.fakeOpts = &herdrsim.Options{ReadyDelay: 15 * time.Second}
		e.start()
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		if err := e.fake.WaitCalls(ctx, "agent.start", 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the start is under way; the agent is not ready for 15 s
		e.stop()
		e.editOwnership("alpha", map[string]string{"startedAt": time.Now().Add(-time.Hour).Format(time.RFC3339Nano)})
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.close"] != 0 || ms["alpha"].Status.Restarts != 0 {
			t.Errorf("agent.start %d, tab.close %d, restarts %d; the relaunched agent was killed", c["agent.start"], c["tab.close"], ms["alpha"].Status.Restarts)
		}
	})
}

// After a herdr restart with session restore the panes come back before
// their agents (herdr relaunches one every 100 ms): a restored pane without
// its agent yet is waited for, not recreated, and adopted once the agent is
// back under the member's name.
func TestManager_RestoredPaneIsWaitedForUntilItsAgentIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		reg := e.withTokens()
		e.start()
		was := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		tok := e.paneToken(was.PaneID)
		e.stop()
		calls := e.fake.Calls()
		// herdr restarted: new terminal ids, and the agent not relaunched yet.
		if err := e.fake.ExitAgent(was.PaneID); err != nil {
			t.Fatal(err)
		}
		e.editOwnership("alpha", map[string]string{"terminalId": "term_before_restart"})
		e.start()
		e.waitFor("alpha waits for herdr's relaunch", func(ms map[string]v1alpha1.Member) bool {
			return strings.Contains(condition(ms["alpha"], v1alpha1.ConditionProgressing).Message, "relaunch")
		})
		time.Sleep(5 * time.Second)
		e.waitIdle()
		if c := e.fake.Calls(); c["tab.create"] != calls["tab.create"] || c["tab.close"] != calls["tab.close"] {
			t.Fatalf("while herdr restores: tab.create +%d, tab.close +%d; want none", c["tab.create"]-calls["tab.create"], c["tab.close"]-calls["tab.close"])
		}
		// herdr relaunches the agent under its name.
		if _, err := e.client.LaunchAgent(context.Background(), herdr.AgentStartParams{Name: "alpha", Kind: "codex", PaneID: was.PaneID}); err != nil {
			t.Fatal(err)
		}
		now := e.waitFor("alpha adopted", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		if now.PaneID != was.PaneID || now.Restarts != 0 {
			t.Errorf("alpha in pane %s with %d restarts; want %s, 0", now.PaneID, now.Restarts, was.PaneID)
		}
		if c := e.fake.Calls(); c["tab.create"] != calls["tab.create"] || c["agent.start"] != calls["agent.start"]+1 {
			t.Errorf("tab.create +%d, agent.start +%d; want 0 and herdr's relaunch only", c["tab.create"]-calls["tab.create"], c["agent.start"]-calls["agent.start"])
		}
		if id, ok := reg.Resolve(tok); !ok || id.TerminalID != now.TerminalID {
			t.Errorf("alpha's token resolves to %+v, %v; want valid, on terminal %s", id, ok, now.TerminalID)
		}
	})
}

// Deleting a member whose recorded tab id herdr has since given another
// member's tab (after a restart) closes nothing of that member's.
func TestManager_DeleteNeverClosesAnotherMembersTabUnderAReusedID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		reg := e.withTokens()
		e.start()
		ms := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		alpha, beta := ms["alpha"].Status, ms["beta"].Status
		betaTok := e.paneToken(beta.PaneID)
		e.stop()
		if err := e.fake.KillPane(alpha.PaneID); err != nil {
			t.Fatal(err)
		}
		e.editOwnership("alpha", map[string]string{"paneId": beta.PaneID, "tabId": beta.TabID, "terminalId": "term_of_alphas_old_pane"})
		e.remove("alpha.yaml")
		e.start()
		e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { _, ok := ms["alpha"]; return !ok })
		e.waitIdle()
		if !e.paneAlive(beta.PaneID) || e.fake.Calls()["tab.close"] != 0 {
			t.Errorf("beta's pane alive %v, tab.close %d: deleting alpha closed beta's tab", e.paneAlive(beta.PaneID), e.fake.Calls()["tab.close"])
		}
		if _, ok := reg.Resolve(betaTok); !ok {
			t.Error("deleting alpha revoked beta's token")
		}
	})
}

// A pane found by its id after a herdr restart is adopted only if its agent
// has the member's recorded agent_session: the member's name alone on
// another session is not the member's agent, and the pane is replaced.
func TestManager_AdoptionByPaneIDChecksTheAgentSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		was := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		e.stop()
		calls := e.fake.Calls()
		rec := e.ownership("alpha")
		rec["terminalId"] = "term_before_restart"
		rec["agentSession"] = map[string]string{"source": "herdr:codex", "agent": "codex", "kind": "id", "value": "session-of-alpha"}
		e.setOwnership("alpha", rec)
		// herdr shows an agent named alpha in the pane, on another session.
		if err := e.fake.SetAgentSession(was.PaneID, herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: "someone-elses-session"}); err != nil {
			t.Fatal(err)
		}
		e.start()
		e.waitFor("alpha replaced", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha")(ms) && ms["alpha"].Status.PaneID != was.PaneID && ms["alpha"].Status.PaneID != ""
		})
		if c := e.fake.Calls(); c["tab.create"] != calls["tab.create"]+1 || c["tab.close"] != calls["tab.close"]+1 || e.paneAlive(was.PaneID) {
			t.Errorf("tab.create +%d, tab.close +%d, old pane alive %v; want the pane replaced once",
				c["tab.create"]-calls["tab.create"], c["tab.close"]-calls["tab.close"], e.paneAlive(was.PaneID))
		}
		for _, ev := range e.mgr.MemberEvents("alpha") {
			if ev.Reason == reasonAdopted {
				t.Errorf("adopted a pane whose agent has another session: %+v", ev)
			}
		}
	})
}
