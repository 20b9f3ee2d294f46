package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// exitingResumes is herdr on which a resumed agent exits right after it
// starts, as `codex resume ID` does for a session the harness no longer
// has: an agent.start whose args resume a session makes the fake's agent
// in that pane exit instead of becoming ready.
type exitingResumes struct {
	Herdr
	fake *herdrsim.Server
}

func (h exitingResumes) LaunchAgent(ctx context.Context, p herdr.AgentStartParams) (*herdr.AgentStarted, error) {
	if slices.Contains(p.Args, "resume") {
		h.fake.SetBehavior(p.PaneID, herdrsim.Behavior{Launch: herdrsim.LaunchExit})
	}
	return h.Herdr.LaunchAgent(ctx, p)
}

// startArgs are the args of every agent.start the fake herdr answered, in
// order.
func (e *env) startArgs() [][]string {
	var out [][]string
	for _, r := range e.fake.Requests() {
		if r.Method != "agent.start" {
			continue
		}
		var p herdr.AgentStartParams
		if err := json.Unmarshal(r.Params, &p); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p.Args)
	}
	return out
}

func hasEvent(evs []v1alpha1.Event, reason, text string) bool {
	return slices.ContainsFunc(evs, func(ev v1alpha1.Event) bool {
		return ev.Reason == reason && strings.Contains(ev.Message, text)
	})
}

// A member's replacement reopens the session herdr reported for the agent
// that crashed (Codex: `resume ID` after everything else), and says so in
// its status and events — unless resuming cannot work, and then it starts
// afresh and says why.
func TestManager_CrashedAgentResumesItsSession(t *testing.T) {
	const id = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"
	tests := []struct {
		name       string
		profile    string // extra spec lines
		value      string // the session id herdr reports
		failResume bool
		// resumed: the replacement runs the resumed session; otherwise it
		// is a fresh start, and a ResumeSkipped event (skipped, if set) or
		// a ResumeFailed one (event, if set) says why.
		resumed bool
		skipped string
		event   string
	}{
		{name: "resumed", value: id, resumed: true},
		{name: "profile resume Never", profile: "  resume: Never\n", value: id, skipped: `not resuming the agent's codex session "` + id + `": profile "codex-fast" has resume: Never; starting afresh`},
		{name: "unsafe session id", value: "--dangerously-bypass-approvals-and-sandbox", skipped: `not resuming the agent's codex session "--dangerously-bypass-approvals-and-sandbox": member "alpha": cannot resume the agent's session: session id "--dangerously-bypass-approvals-and-sandbox" starts with '-'`},
		{name: "resumed agent fails", value: id, failResume: true, event: `resumed codex session "` + id + `" failed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachProtocol(t, map[string]string{"profile.yaml": testProfile + tt.profile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
				_, l := e.harnessLauncher()
				e.startFake(nil)
				e.tweak = func(o *Options) {
					if tt.failResume {
						o.Herdr = exitingResumes{Herdr: o.Herdr, fake: e.fake}
					}
					o.Launcher = l
					o.ResyncPeriod = time.Second
					o.RestartBackoff = 5 * time.Millisecond
				}
				e.start()
				st := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
				if st.ResumedSession != nil {
					t.Errorf("first start shows resumedSession %+v", st.ResumedSession)
				}
				fresh := e.startArgs()[0]

				// The harness's integration reports the session after the
				// start (pane.report_agent_session); herdr tells fleetd with
				// a pane_updated event.
				if err := e.fake.SetAgentSession(st.PaneID, herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: tt.value}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second) // past a resync too
				e.waitIdle()

				if err := e.fake.KillPane(st.PaneID); err != nil {
					t.Fatal(err)
				}
				st = e.waitFor("alpha replaced", func(ms map[string]v1alpha1.Member) bool {
					a := ms["alpha"].Status
					return a.Phase == v1alpha1.PhaseReady && a.PaneID != st.PaneID
				})["alpha"].Status
				last := e.startArgs()[len(e.startArgs())-1]
				evs := e.mgr.MemberEvents("alpha")
				if tt.resumed {
					if diff := cmp.Diff(append(slices.Clone(fresh), "resume", id), last); diff != "" {
						t.Errorf("replacement's agent.start args (-want +got):\n%s", diff)
					}
					want := &v1alpha1.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: id}
					if diff := cmp.Diff(want, st.ResumedSession); diff != "" {
						t.Errorf("status.resumedSession (-want +got):\n%s", diff)
					}
					if !hasEvent(evs, reasonResumed, id) {
						t.Errorf("no %s event naming the session: %+v", reasonResumed, evs)
					}
					return
				}
				if diff := cmp.Diff(fresh, last); diff != "" {
					t.Errorf("replacement is not a fresh start (-want +got):\n%s", diff)
				}
				if st.ResumedSession != nil {
					t.Errorf("a fresh start shows resumedSession %+v", st.ResumedSession)
				}
				for _, want := range []struct{ reason, text string }{{reasonResumeSkipped, tt.skipped}, {reasonResumeFailed, tt.event}} {
					if want.text != "" && !hasEvent(evs, want.reason, want.text) {
						t.Errorf("no %s event saying %q: %+v", want.reason, want.text, evs)
					}
					if want.text == "" && hasEvent(evs, want.reason, "") {
						t.Errorf("a %s event: %+v", want.reason, evs)
					}
				}
			})
		})
	}
}

// The agent's session outlives its pane and fleetd: every relaunch of a
// member — a spec change whose harness stays the same, a pause and
// unpause, a crash while fleetd was down and restarted — reopens the
// session herdr last reported (agent.start ends with the resume command,
// status.resumedSession and a Resumed event say so); a profile with
// resume: Never, or one that now runs another harness, starts afresh with
// a ResumeSkipped event saying why.
func TestManager_SessionResumedAcrossEveryRelaunch(t *testing.T) {
	const id = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"
	claude := "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"
	tests := []struct {
		name     string
		profile  string // extra profile spec lines
		relaunch func(e *env, pane string)
		skipped  string // "" resumed; else the ResumeSkipped event's text
	}{
		{name: "spec change", relaunch: func(e *env, _ string) { e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp")) }},
		{name: "pause and unpause", relaunch: func(e *env, _ string) {
			e.write("alpha.yaml", memberYAML("alpha", "paused: true"))
			e.waitFor("alpha Paused", allPhase(v1alpha1.PhasePaused, "alpha"))
			e.write("alpha.yaml", memberYAML("alpha"))
		}},
		{name: "crash while fleetd was down", relaunch: func(e *env, pane string) {
			e.stop()
			if err := e.fake.KillPane(pane); err != nil {
				e.t.Fatal(err)
			}
			e.start()
		}},
		{name: "profile resume Never", profile: "  resume: Never\n",
			relaunch: func(e *env, _ string) { e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp")) },
			skipped:  `not resuming the agent's codex session "` + id + `": profile "codex-fast" has resume: Never; starting afresh`},
		{name: "another harness",
			relaunch: func(e *env, _ string) {
				e.write("alpha.yaml", strings.Replace(memberYAML("alpha"), "codex-fast", "claude", 1))
			},
			skipped: `not resuming the agent's codex session "` + id + `": profile "claude" now runs claude, which cannot reopen a codex session; starting afresh`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachProtocol(t, map[string]string{"profile.yaml": testProfile + tt.profile, "claude.yaml": claude, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
				_, l := e.harnessLauncher()
				e.tweak = func(o *Options) { o.Launcher, o.ResyncPeriod = l, time.Second } // the session arrives with a listing
				e.start()
				st := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
				fresh := e.startArgs()[0]
				session := herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: id}
				if err := e.fake.SetAgentSession(st.PaneID, session); err != nil {
					t.Fatal(err)
				}
				e.waitForHerdr("the session remembered", func() bool { return e.mgr.memory.get("alpha").Session != nil })

				tt.relaunch(e, st.PaneID)
				m := e.waitFor("alpha relaunched", func(ms map[string]v1alpha1.Member) bool {
					a := ms["alpha"].Status
					return a.Phase == v1alpha1.PhaseReady && a.PaneID != "" && a.PaneID != st.PaneID
				})["alpha"]
				last := e.startArgs()[len(e.startArgs())-1]
				evs := e.mgr.MemberEvents("alpha")
				if tt.skipped != "" {
					if slices.Contains(last, id) || m.Status.ResumedSession != nil {
						t.Errorf("relaunched with %q, resumedSession %+v; want a fresh start", last, m.Status.ResumedSession)
					}
					if !hasEvent(evs, reasonResumeSkipped, tt.skipped) {
						t.Errorf("no %s event saying %q: %+v", reasonResumeSkipped, tt.skipped, evs)
					}
					return
				}
				if diff := cmp.Diff(append(slices.Clone(fresh), "resume", id), last); diff != "" {
					t.Errorf("the relaunch's agent.start args (-want +got):\n%s", diff)
				}
				want := &v1alpha1.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: id}
				if diff := cmp.Diff(want, m.Status.ResumedSession); diff != "" {
					t.Errorf("status.resumedSession (-want +got):\n%s", diff)
				}
				if !hasEvent(evs, reasonResumed, id) {
					t.Errorf("no %s event naming the session: %+v", reasonResumed, evs)
				}
			})
		})
	}
}

// fleetSessions is a fleet's kept sessions (internal/fleet's Sessions),
// by member, whatever the uid.
type fleetSessions struct {
	mu   sync.Mutex
	kept map[string]v1alpha1.AgentSession
}

func (f *fleetSessions) Session(member, _ string) (v1alpha1.AgentSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.kept[member]
	return s, ok
}

func (f *fleetSessions) Keep(member, _ string, s *v1alpha1.AgentSession) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s == nil {
		delete(f.kept, member)
		return
	}
	f.kept[member] = *s
}

// A member that comes to this node with no session in its memory — it ran
// on another node of the fleet until now — resumes the session the fleet
// keeps for it; and the session its agent reports here is kept for the
// fleet in turn.
func TestManager_MovedMemberResumesTheFleetsSession(t *testing.T) {
	const id, next = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10", "7c1d2e3f-0000-4c43-9d8e-3f3c1a2b9e10"
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		_, l := e.harnessLauncher()
		fleet := &fleetSessions{kept: map[string]v1alpha1.AgentSession{"alpha": {Source: "herdr:codex", Agent: "codex", Kind: "id", Value: id}}}
		e.tweak = func(o *Options) { o.Launcher, o.Sessions, o.ResyncPeriod = l, fleet, time.Second }
		e.start()
		st := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		if args := e.startArgs()[0]; !slices.Equal(args[len(args)-2:], []string{"resume", id}) {
			t.Errorf("the first start here: agent.start %q; want it to resume the fleet's session %s", args, id)
		}
		if s := st.ResumedSession; s == nil || s.Value != id {
			t.Errorf("status.resumedSession = %+v, want %s", s, id)
		}
		if err := e.fake.SetAgentSession(st.PaneID, herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: next}); err != nil {
			t.Fatal(err)
		}
		e.waitForHerdr("the fleet keeps the new session", func() bool { s, _ := fleet.Session("alpha", ""); return s.Value == next })
	})
}

// A resumed agent that finished a turn proved its session: killed before
// it ran StableAfter — its pane closed by hand, its process killed — it is
// resumed again, not started afresh, and no ResumeFailed event says its
// session failed. One that never finished a turn still falls back to a
// fresh start, its session perhaps what ended it.
func TestManager_ResumedAgentThatFinishedATurnIsResumedAgain(t *testing.T) {
	const id = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"
	for _, turn := range []bool{true, false} {
		name := "no turn"
		if turn {
			name = "a turn finished"
		}
		t.Run(name, func(t *testing.T) {
			eachProtocol(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
				_, l := e.harnessLauncher()
				e.tweak = func(o *Options) { o.Launcher, o.ResyncPeriod, o.RestartBackoff = l, time.Second, 5*time.Millisecond }
				e.start()
				first := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
				fresh := e.startArgs()[0]
				if err := e.fake.SetAgentSession(first.PaneID, herdrsim.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: "id", Value: id}); err != nil {
					t.Fatal(err)
				}
				e.waitForHerdr("the session remembered", func() bool { return e.mgr.memory.get("alpha").Session != nil })
				replaced := func(what, gone string) v1alpha1.MemberStatus {
					if err := e.fake.KillPane(gone); err != nil {
						t.Fatal(err)
					}
					return e.waitFor(what, func(ms map[string]v1alpha1.Member) bool {
						a := ms["alpha"].Status
						return a.Phase == v1alpha1.PhaseReady && a.PaneID != "" && a.PaneID != gone
					})["alpha"].Status
				}
				resumed := replaced("alpha resumed", first.PaneID)
				if resumed.ResumedSession == nil {
					t.Fatalf("the first replacement did not resume: %+v", resumed)
				}
				if turn {
					for _, s := range []string{"working", "idle"} {
						if err := e.fake.SetAgentState(resumed.PaneID, s); err != nil {
							t.Fatal(err)
						}
						want := map[string]string{"working": "working", "idle": "done"}[s]
						e.waitFor("alpha "+want, func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.AgentStatus == want })
					}
				}
				again := replaced("alpha replaced again", resumed.PaneID)
				last := e.startArgs()[len(e.startArgs())-1]
				failed := hasEvent(e.mgr.MemberEvents("alpha"), reasonResumeFailed, "")
				if turn {
					if diff := cmp.Diff(append(slices.Clone(fresh), "resume", id), last); diff != "" || again.ResumedSession == nil || failed {
						t.Errorf("after a finished turn: resumedSession %+v, ResumeFailed event %v, agent.start args (-want +got):\n%s", again.ResumedSession, failed, diff)
					}
					return
				}
				if diff := cmp.Diff(fresh, last); diff != "" || again.ResumedSession != nil || !failed {
					t.Errorf("with no turn: resumedSession %+v, ResumeFailed event %v, agent.start args (-want a fresh start +got):\n%s", again.ResumedSession, failed, diff)
				}
			})
		})
	}
}
