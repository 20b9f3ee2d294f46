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
	reasonResumed       = "Resumed"
	reasonResumeSkipped = "ResumeSkipped"
	reasonResumeFailed  = "ResumeFailed"
)

// Resuming the agent's own session — its conversation, its memory. While
// a member's agent runs, every reconcile remembers the agent_session herdr
// reports for it in the member's memory (memory.go: the state directory,
// written only when it changes), which outlives the pane and fleetd. Every
// launch of a new pane for the member — after a crash, a spec change, a
// pause and unpause, a restart of fleetd, a restart asked for — is
// prepared with launch.Resumer's PrepareResume for that session, and a
// Resumed event names it once the agent is ready. A launch starts afresh
// instead, with a ResumeSkipped event saying why, when the profile says
// resume: Never, when the profile now runs another harness than the one
// the session is of, and when the launcher refuses the session
// (launch.ErrCannotResume); the session is then forgotten, except for
// resume: Never, which may be lifted. A launcher that is no Resumer always
// starts afresh. A resumed agent that fails before it ran for StableAfter
// (it failed to start, or exited at once — a session the harness no longer
// has) makes the next launch a fresh start, with a ResumeFailed event —
// unless it finished a turn first: the session then proved good, and, as
// for a resumed agent that ran stably and crashes later, the next launch
// resumes again, with whatever session herdr then reports. A pane closed
// by hand or an agent killed minutes after its resume must not cost it
// its conversation. A member deleted and declared again
// under its name is another member (another uid) and resumes nothing of
// the first. In a fleet of nodes (Options.Sessions) every session
// remembered is also kept where every node reads it, and a member that
// comes to this node without one in its memory resumes the one kept
// there.

// observeSession remembers the agent_session herdr reports for the
// member's agent (on the agent, or on its pane), if it reports one.
func (r *memberReconcile) observeSession(p herdrcache.Pane) error {
	return r.rememberSession(agentSession(sessionOf(p.Agent, p.PaneInfo)))
}

// rememberSession keeps s, if not nil, as the member's agent's session,
// and has the fleet keep the session remembered (Options.Sessions).
func (r *memberReconcile) rememberSession(s *v1alpha1.AgentSession) error {
	if s != nil {
		if err := r.remember(func(mm *memory) { mm.Session, mm.UID = s, r.mem.UID }); err != nil {
			return err
		}
	}
	if k := r.m.o.Sessions; k != nil {
		if own := r.ownSession(); own != nil {
			if kept, ok := k.Session(r.name, r.mem.UID); !ok || kept != *own {
				k.Keep(r.name, r.mem.UID, own)
			}
		}
	}
	return nil
}

// forgetSession makes the member's next launch a fresh start, here and on
// any node of its fleet.
func (r *memberReconcile) forgetSession() error {
	if k := r.m.o.Sessions; k != nil {
		k.Keep(r.name, r.mem.UID, nil)
	}
	return r.remember(func(mm *memory) { mm.Session = nil })
}

// session is the member's agent's last known session: the one in its
// memory, else (a member that ran on another node until now) the one its
// fleet keeps; nil if none.
func (r *memberReconcile) session() *v1alpha1.AgentSession {
	if s := r.ownSession(); s != nil {
		return s
	}
	if k := r.m.o.Sessions; k != nil {
		if s, ok := k.Session(r.name, r.mem.UID); ok {
			return &s
		}
	}
	return nil
}

// ownSession is the session in the member's memory, nil if none or if it
// was another member's of the same name.
func (r *memberReconcile) ownSession() *v1alpha1.AgentSession {
	if r.memo.UID != "" && r.memo.UID != r.mem.UID {
		return nil
	}
	return r.memo.Session
}

// agentSession converts herdr's agent_session; nil for none.
func agentSession(s *herdr.AgentSessionInfo) *v1alpha1.AgentSession {
	if s == nil || s.Value == "" {
		return nil
	}
	return &v1alpha1.AgentSession{Source: s.Source, Agent: s.Agent, Kind: s.Kind, Value: s.Value}
}

// prepare prepares the member's next launch: resuming the agent's last
// known session when there is one and nothing rules it out, a fresh start
// otherwise — said in a ResumeSkipped event when a session was known.
func (r *memberReconcile) prepare() (launch.Spec, error) {
	l := r.m.launcher
	res, ok := l.(launch.Resumer)
	s := r.session()
	if s == nil || !ok {
		return l.Prepare(r.ctx, r.mem, r.profile, r.snap.Tenants)
	}
	skip := func(why string, forget bool) error {
		r.event(v1alpha1.EventNormal, reasonResumeSkipped, fmt.Sprintf("not resuming the agent's %s session %q: %s; starting afresh", s.Agent, s.Value, why))
		if forget {
			return r.forgetSession()
		}
		return nil
	}
	harness := r.profile.Spec.Harness
	var err error
	switch {
	case r.profile.Spec.Resume == v1alpha1.ResumeNever:
		err = skip(fmt.Sprintf("profile %q has resume: Never", r.profile.Name), false)
	case s.Agent != "" && herdr.CanonicalKind(s.Agent) != herdr.CanonicalKind(harness):
		err = skip(fmt.Sprintf("profile %q now runs %s, which cannot reopen a %s session", r.profile.Name, harness, s.Agent), true)
	default:
		spec, perr := res.PrepareResume(r.ctx, r.mem, r.profile, r.snap.Tenants, *s)
		if !errors.Is(perr, launch.ErrCannotResume) {
			return spec, perr
		}
		err = skip(perr.Error(), true)
	}
	if err != nil {
		return launch.Spec{}, err
	}
	return l.Prepare(r.ctx, r.mem, r.profile, r.snap.Tenants)
}

// launching records whether the launch about to start resumes a session,
// and shows it in the status.
func (r *memberReconcile) launching(spec launch.Spec) {
	r.b.st.ResumedSession = spec.Resumed.DeepCopy()
	if spec.Resumed == nil {
		if rare := r.rt.rare; rare != nil {
			rare.resumed, rare.resumedAt, rare.resumeProof = nil, time.Time{}, nil
		}
		return
	}
	rare := r.rt.edit()
	rare.resumed, rare.resumedAt = spec.Resumed.DeepCopy(), r.m.o.Clock.Now()
	rare.resumeProof = nil
}

// started is told that the launched agent is ready.
func (r *memberReconcile) started(agent herdr.AgentInfo) error {
	if s := r.rt.peek().resumed; s != nil {
		r.event(v1alpha1.EventNormal, reasonResumed, fmt.Sprintf("agent resumed its %s session %q in pane %s", s.Agent, s.Value, agent.PaneID))
		r.rt.edit().resumeProof = &resumeProof{ready: agent.CompletionSeq}
	}
	return r.rememberSession(agentSession(agent.AgentSession))
}

// resumeProof follows a resumed agent from ready until it finished a turn
// with its session: herdr's completion_seq past the one it had when
// ready (protocol 22), its status done (an idle agent whose completion
// nobody has looked at), or idle again after it was seen working or
// blocked.
type resumeProof struct {
	ready          *uint64 // completion_seq when ready (never changed in place); nil from protocol 20
	busy, finished bool
}

// observe takes the resumed agent's state as a reconcile sees it.
func (p *resumeProof) observe(a herdr.AgentInfo) {
	switch {
	case p == nil || p.finished:
	case p.ready != nil && a.CompletionSeq != nil && *a.CompletionSeq > *p.ready,
		a.AgentStatus == herdr.StatusDone,
		p.busy && a.AgentStatus == herdr.StatusIdle:
		p.finished = true
	case a.AgentStatus == herdr.StatusWorking, a.AgentStatus == herdr.StatusBlocked:
		p.busy = true
	}
}

// resumeFailed is told that the member's pane or agent failed, for why. A
// resumed agent that failed before it ran stably makes the next launch a
// fresh start.
func (r *memberReconcile) resumeFailed(why string) error {
	rare := r.rt.rare
	if rare == nil || rare.resumed == nil {
		return nil
	}
	s, proof, at := rare.resumed, rare.resumeProof, rare.resumedAt
	rare.resumed, rare.resumedAt, rare.resumeProof = nil, time.Time{}, nil
	ran := r.m.o.Clock.Now().Sub(at)
	if ran >= r.m.o.StableAfter || (proof != nil && proof.finished) {
		return nil
	}
	r.event(v1alpha1.EventWarning, reasonResumeFailed,
		fmt.Sprintf("resumed %s session %q failed after %s: %s; the next start is fresh", s.Agent, s.Value, ran.Round(time.Millisecond), why))
	return r.forgetSession()
}
