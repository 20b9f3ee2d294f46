package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/tokens"
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
		// is a fresh start, and event (if set) says why.
		resumed bool
		event   string
	}{
		{name: "resumed", value: id, resumed: true},
		{name: "profile resume Never", profile: "  resume: Never\n", value: id},
		{name: "unsafe session id", value: "--dangerously-bypass-approvals-and-sandbox", event: `not resuming the agent's session: member "alpha": cannot resume the agent's session: session id "--dangerously-bypass-approvals-and-sandbox" starts with '-'`},
		{name: "resumed agent fails", value: id, failResume: true, event: `resumed codex session "` + id + `" failed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachProtocol(t, map[string]string{"profile.yaml": testProfile + tt.profile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
				reg, err := tokens.Open(e.state, nil)
				if err != nil {
					t.Fatal(err)
				}
				l, err := harness.NewLauncher(harness.LauncherOptions{StateDir: e.state,
					Gateway: plan.Gateway{URL: "http://127.0.0.1:8080/mcp"}, Tokens: reg, Executable: "/usr/local/bin/fleetd"})
				if err != nil {
					t.Fatal(err)
				}
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
				if tt.event != "" && !hasEvent(evs, reasonResumeFailed, tt.event) {
					t.Errorf("no %s event saying %q: %+v", reasonResumeFailed, tt.event, evs)
				}
				if tt.event == "" && hasEvent(evs, reasonResumeFailed, "") {
					t.Errorf("a profile that never resumes got a %s event: %+v", reasonResumeFailed, evs)
				}
			})
		})
	}
}
