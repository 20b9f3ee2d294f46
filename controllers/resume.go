package controllers

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
)

// Event reasons of resumed launches (not condition reasons).
const (
	reasonResumed      = "Resumed"
	reasonResumeFailed = "ResumeFailed"
)

// Resuming a crashed agent's own session. While a member's agent runs,
// every reconcile remembers the agent_session herdr reports for it
// (runtime.session). When the pane dies or the agent exits, the replacement
// is prepared with launch.Resumer's PrepareResume for that session, unless
// the profile says resume: Never or the launcher is no Resumer. Two things
// make the next launch a fresh start, each with a ResumeFailed event saying
// why: a session the launcher refuses (launch.ErrCannotResume), and a
// resumed agent that fails before it ran for StableAfter (it failed to
// start, or exited at once — a session the harness no longer has). A
// resumed agent that ran stably and crashes later is resumed again, with
// whatever session herdr then reports.

// observeSession remembers the agent_session herdr reports for the
// member's agent (on the agent, or on its pane), if it reports one.
func observeSession(rt *runtime, p herdrcache.Pane) {
	if s := agentSession(sessionOf(p.Agent, p.PaneInfo)); s != nil {
		rt.session = s
	}
}

// agentSession converts herdr's agent_session; nil for none.
func agentSession(s *herdr.AgentSessionInfo) *v1alpha1.AgentSession {
	if s == nil || s.Value == "" {
		return nil
	}
	return &v1alpha1.AgentSession{Source: s.Source, Agent: s.Agent, Kind: s.Kind, Value: s.Value}
}

// prepare prepares the member's next launch: resuming the agent's last
// known session when there is one and the profile allows it, a fresh start
// otherwise — also when the launcher refuses the session, which is said in
// an event and forgotten.
func (r *memberReconcile) prepare() (launch.Spec, error) {
	l := r.m.launcher
	res, ok := l.(launch.Resumer)
	if s := r.rt.session; s != nil && ok && r.profile.Spec.Resume != v1alpha1.ResumeNever {
		spec, err := res.PrepareResume(r.ctx, r.mem, r.profile, r.snap.Tenants, *s)
		if !errors.Is(err, launch.ErrCannotResume) {
			return spec, err
		}
		r.rt.session = nil
		r.event(v1alpha1.EventWarning, reasonResumeFailed, fmt.Sprintf("not resuming the agent's session: %v; starting afresh", err))
	}
	return l.Prepare(r.ctx, r.mem, r.profile, r.snap.Tenants)
}

// launching records whether the launch about to start resumes a session,
// and shows it in the status.
func (r *memberReconcile) launching(spec launch.Spec) {
	r.b.st.ResumedSession = spec.Resumed.DeepCopy()
	r.rt.resumed, r.rt.resumedAt = spec.Resumed.DeepCopy(), r.m.o.Clock.Now()
}

// started is told that the launched agent is ready.
func (m *Manager) started(name string, rt *runtime, agent herdr.AgentInfo) {
	if s := agentSession(agent.AgentSession); s != nil {
		rt.session = s
	}
	if s := rt.resumed; s != nil {
		m.event(name, v1alpha1.EventNormal, reasonResumed, fmt.Sprintf("agent resumed its %s session %q in pane %s", s.Agent, s.Value, agent.PaneID))
	}
}

// resumeFailed is told that the member's pane or agent failed, for why. A
// resumed agent that failed before it ran stably makes the next launch a
// fresh start.
func (m *Manager) resumeFailed(name string, rt *runtime, why string) {
	s := rt.resumed
	rt.resumed = nil
	if s == nil {
		return
	}
	if ran := m.o.Clock.Now().Sub(rt.resumedAt); ran < m.o.StableAfter {
		rt.session = nil
		m.event(name, v1alpha1.EventWarning, reasonResumeFailed,
			fmt.Sprintf("resumed %s session %q failed after %s: %s; the next start is fresh", s.Agent, s.Value, ran.Round(time.Millisecond), why))
	}
}
