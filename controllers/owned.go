package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
)

// The owned phase: a member whose pane fleetd recorded (an ownership
// record, ownership.go). The cache shows the pane or not; either way the
// next step is taken here, and only a pane that is gone hands the member on
// to create.

// ownedPane takes the next step for a member whose pane fleetd recorded:
// adopt the pane under the terminal id herdr now gives it (rekey); wait for
// herdr to relaunch the agent of a pane it restored (awaitRestore); go on
// with a start under way (launch, checkStart); show a running agent
// (adopt); or, its pane closed or its agent exited, close what is left,
// count the failure (lost) and hand the member on to create.
func (r *memberReconcile) ownedPane() (Result, error) {
	p, alive, rekeyed := r.m.findPane(r.name, r.rec)
	if rekeyed {
		if err := r.rekey(p); err != nil {
			return Result{}, err
		}
	}
	if alive && !p.HasAgent && r.rt.start == nil && (rekeyed || !r.rt.peek().restoring.IsZero()) {
		return r.awaitRestore(p.PaneInfo)
	}
	if rare := r.rt.rare; rare != nil {
		rare.restoring = time.Time{}
	}
	if st := r.rt.start; alive && st != nil && st.terminal == r.rec.TerminalID {
		if !st.launched() {
			if r.snap.Stale != nil {
				return r.stale() // the pane is here, its agent not: it starts once confirmed
			}
			return r.launch()
		}
		if !p.HasAgent || p.Agent.Name != r.name || !p.Agent.InteractiveReady {
			return r.checkStart()
		}
	}
	if alive && p.HasAgent && p.Agent.Name == r.name {
		return r.adopt(p)
	}
	if err := r.lost(alive, p); err != nil {
		return Result{}, err
	}
	// The first failure in a row is recreated at once, here. A requeue
	// would pass the work queue's retry token bucket, which lets a mass
	// failure (a closed workspace, herdr losing its panes) recreate
	// only 10 members a second after the first 100. Later failures
	// wait their backoff: create returns RequeueAfter for them.
	return r.create()
}

// adopt shows the member's running agent in its recorded pane: the record
// follows a pane that moved (another tab or workspace), a start this
// fleetd did not see begin is followed to its end (checkStart), and the
// agent's session is remembered.
func (r *memberReconcile) adopt(p herdrcache.Pane) (Result, error) {
	pane, agent := p.PaneInfo, p.Agent
	if pane.PaneID != r.rec.PaneID || pane.TabID != r.rec.TabID || pane.WorkspaceID != r.rec.WorkspaceID {
		if r.b.st.PaneID == "" {
			r.event(v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("adopted pane %s (terminal %s)", pane.PaneID, pane.TerminalID))
		}
		r.rec.PaneID, r.rec.TabID, r.rec.WorkspaceID = pane.PaneID, pane.TabID, pane.WorkspaceID
		if err := r.m.own.put(r.rec); err != nil {
			return Result{}, err
		}
		r.m.signalOwned()
	} else if r.b.st.PaneID == "" {
		r.event(v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("adopted running pane %s (terminal %s)", pane.PaneID, pane.TerminalID))
	}
	if err := r.observeSession(p); err != nil {
		return Result{}, err
	}
	if agent.LaunchPending && !agent.InteractiveReady {
		return r.checkStart() // adopted in the middle of a start
	}
	r.rt.start = nil
	if rare := r.rt.rare; rare != nil {
		rare.resumeProof.observe(agent) // changes the proof, which peek's copy would only share
	}
	if err := r.m.noteSession(&r.rec, agent, pane); err != nil {
		return Result{}, err
	}
	if r.b.st.Plan == nil {
		r.b.st.Plan = r.m.planOf(r.mem, r.snap)
	}
	return r.running(pane.AgentStatus), nil
}

// lost handles a recorded pane that is gone, or whose agent exited: what
// is left of it is closed — the pane whose agent exited, or a tab still
// labelled for the member that now shows another agent, so that the name
// is free — its record dropped, and the failure counted (failed).
func (r *memberReconcile) lost(alive bool, p herdrcache.Pane) error {
	why := fmt.Sprintf("pane %s closed", r.rec.PaneID)
	var err error
	switch {
	case alive:
		if err := r.observeSession(p); err != nil {
			return err
		}
		why = fmt.Sprintf("agent in pane %s exited", p.PaneID)
		err = r.m.closeOwned(r.ctx, r.rec, goneAgentExited)
	case r.m.tabLabelled(r.rec.TabID, TabLabelPrefix+r.name):
		// The pane is not the member's agent's any more (another
		// agent_session), but its tab is labelled for the member: close
		// it now, as the orphan sweep would.
		err = r.m.closeOwned(r.ctx, r.rec, gonePaneClosed)
	default:
		rec := r.rec
		r.afterward(func() { r.m.dropOwned(rec, gonePaneClosed) })
	}
	if err != nil {
		return err
	}
	r.owned = false
	r.failed(why)
	return nil
}

// running writes the status of a member whose agent runs, and schedules
// the reset of its failure count once it has run long enough.
func (r *memberReconcile) running(agentStatus herdr.AgentStatus) Result {
	if err := r.rolledOut(); err != nil { // rollout.go; retried at the next reconcile
		r.m.log.Warn("could not note a rollout's replacement Ready", "member", r.name, "err", err)
	}
	var res Result
	rt, b := r.rt, r.b
	now := r.m.o.Clock.Now()
	if rare := rt.rare; rare != nil && rare.failures > 0 {
		if stable := r.rec.StartedAt.Add(r.m.o.StableAfter); now.Before(stable) {
			res.RequeueAfter = stable.Sub(now)
		} else {
			// The next attempt it waited for is past: the new pane
			// started after it.
			rare.failures, rare.nextAttempt, rare.lastError = 0, time.Time{}, ""
		}
	}
	b.setPane(r.rec)
	b.st.AgentStatus = string(agentStatus)
	if rare := rt.peek(); rare.failures >= r.m.o.DegradedAfter {
		msg := fmt.Sprintf("%d failures in a row; last: %s", rare.failures, rare.lastError)
		b.set(v1alpha1.PhaseDegraded, cTrue(v1alpha1.ReasonAgentReady, "agent is running"),
			cFalse(v1alpha1.ReasonCrashLoop, msg), cTrue(v1alpha1.ReasonCrashLoop, msg))
	} else {
		b.set(v1alpha1.PhaseReady, cTrue(v1alpha1.ReasonAgentReady, "agent is running"),
			cFalse(v1alpha1.ReasonAgentReady, "agent is running"), cFalse(v1alpha1.ReasonAsExpected, ""))
		b.st.LastError = ""
	}
	r.write()
	return res
}

func degradedCond(rt *runtime, after int) [3]string {
	if rare := rt.peek(); rare.failures >= after {
		return cTrue(v1alpha1.ReasonCrashLoop, fmt.Sprintf("%d failures in a row; last: %s", rare.failures, rare.lastError))
	}
	return cFalse(v1alpha1.ReasonAsExpected, "")
}

// failed counts a pane that closed or an agent that exited or never became
// ready, and decides when the member gets its next pane (create acts on
// it): never, for restartPolicy Never; at once for the first failure in a
// row; after an exponential backoff for the next ones, counting restarts;
// Degraded after DegradedAfter failures in a row. Never a tight loop.
func (r *memberReconcile) failed(why string) {
	rt, b := r.rt, r.b
	r.replacementFailed(why) // rollout.go
	if err := r.resumeFailed(why); err != nil {
		r.m.log.Warn("could not forget the session of a resumed agent that failed", "member", r.name, "err", err)
	}
	rare := rt.edit()
	rare.failures++
	rare.lastError = why
	rt.start = nil
	b.clearPane()
	b.st.LastError = why
	if r.profile.Spec.RestartPolicy == v1alpha1.RestartNever {
		rare.failedGen, rare.failedProfile = r.mem.Generation, r.profile
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonFailed, why+"; restartPolicy is Never, not recreating")
		b.set(v1alpha1.PhaseFailed, cFalse(v1alpha1.ReasonFailed, why), cFalse(v1alpha1.ReasonFailed, "restartPolicy is Never"), cTrue(v1alpha1.ReasonFailed, why))
		r.write()
		return
	}
	var delay time.Duration
	if rare.failures > 1 {
		delay = backoff(r.m.o.RestartBackoff, rare.failures-2, r.m.o.MaxRestartDelay)
	}
	rare.nextAttempt = r.m.o.Clock.Now().Add(delay)
	b.st.Restarts++
	r.m.metrics.restarts.Inc()
	msg := fmt.Sprintf("%s; recreating (restart %d)", why, b.st.Restarts)
	if delay > 0 {
		msg = fmt.Sprintf("%s; recreating in %s (restart %d)", why, delay, b.st.Restarts)
	}
	hold := r.createHold()
	if hold != "" {
		msg = fmt.Sprintf("%s; not recreated %s", why, hold)
	}
	r.afterward(func() { r.m.event(r.name, v1alpha1.EventWarning, v1alpha1.ReasonBackOff, msg) })
	phase := v1alpha1.PhaseStarting
	if rare.failures >= r.m.o.DegradedAfter {
		phase = v1alpha1.PhaseDegraded
	}
	b.set(phase, cFalse(v1alpha1.ReasonBackOff, msg), cTrue(v1alpha1.ReasonBackOff, msg), degradedCond(rt, r.m.o.DegradedAfter))
	if hold == "" {
		// Held, the member is not shown recreating even for a moment:
		// create, next, writes the status its gate holds it in.
		r.afterward(r.write)
	}
}

// findPane finds the pane of an ownership record: by terminal id (stable
// across moves while herdr runs), else by pane id — kept across herdr
// restarts and handoffs, which change terminal ids — when the agent there
// is the member's: its name, and its agent_session when both sides know
// one; or, while herdr has not relaunched a restored agent yet, when the
// pane is in a tab labelled for the member. A pane id that now belongs to
// another member's pane is not found. rekeyed says the record's terminal id
// is stale.
func (m *Manager) findPane(name string, rec Ownership) (p herdrcache.Pane, alive, rekeyed bool) {
	if p, ok := m.cache.Pane(rec.TerminalID, rec.PaneID); ok {
		return p, true, false
	}
	p, ok := m.cache.Pane("", rec.PaneID)
	if ok && !p.HasAgent && m.tabLabelled(p.TabID, TabLabelPrefix+name) {
		return p, true, true // herdr restored the pane; its agent is not back yet
	}
	if !ok || !p.HasAgent || p.Agent.Name != name {
		return herdrcache.Pane{}, false, false
	}
	if s := sessionOf(p.Agent, p.PaneInfo); rec.AgentSession != nil && s != nil && *s != *rec.AgentSession {
		return herdrcache.Pane{}, false, false
	}
	return p, true, true
}

// rekey adopts the recorded pane under the terminal id herdr now gives it
// (herdr restarted or handed off): the record and the pane's credential
// move to it. A pane whose agent is not back yet, or is launching though
// fleetd started nothing, is a relaunch (a handoff keeps a running agent
// running): the evidence a fleetd that was not running to see herdr go
// away still has. Nothing can have been typed into the new agent. It is
// reported before the rekey: the cache watches the pane, and passes the new
// agent's statuses on, only once the record names its new terminal.
func (r *memberReconcile) rekey(p herdrcache.Pane) error {
	if !p.HasAgent || (p.Agent.LaunchPending && r.rt.start == nil) {
		r.m.relaunched(r.name, p.PaneID, p.TerminalID)
	}
	rec := r.rec
	old := rec.TerminalID
	rec.TerminalID, rec.TabID, rec.WorkspaceID = p.TerminalID, p.TabID, p.WorkspaceID
	if err := r.m.own.put(rec); err != nil {
		return err
	}
	r.rec = rec
	if r.rt.start != nil && r.rt.start.terminal == old {
		r.rt.start.terminal = rec.TerminalID
	}
	r.m.signalOwned()
	if rec.Token != "" {
		if err := r.m.launcher.Bind(launch.Spec{Token: rec.Token}, rec.PaneID, rec.TerminalID); err != nil {
			r.m.log.Warn("launcher could not rebind the pane's credential", "member", r.name, "pane", rec.PaneID, "err", err)
		}
	}
	r.event(v1alpha1.EventNormal, reasonAdopted,
		fmt.Sprintf("adopted pane %s by its id and agent name after herdr restarted (terminal %s, was %s)", rec.PaneID, rec.TerminalID, old))
	r.b.setPane(rec)
	return nil
}

// noteSession records the agent's session in the ownership record when
// herdr reports a new one.
func (m *Manager) noteSession(rec *Ownership, a herdr.AgentInfo, pane herdr.PaneInfo) error {
	s := sessionOf(a, pane)
	if s == nil || (rec.AgentSession != nil && *rec.AgentSession == *s) {
		return nil
	}
	c := *s
	rec.AgentSession = &c
	return m.own.put(*rec)
}

// sessionOf is the agent_session herdr reports for an agent or its pane.
func sessionOf(a herdr.AgentInfo, pane herdr.PaneInfo) *herdr.AgentSessionInfo {
	if a.AgentSession != nil {
		return a.AgentSession
	}
	return pane.AgentSession
}

// tabLabelled reports whether the cache shows tab tabID labelled label.
func (m *Manager) tabLabelled(tabID, label string) bool {
	l, ok := m.tabLabel(tabID)
	return ok && l == label
}

// awaitRestore waits, up to the startup timeout, for herdr to relaunch the
// agent of a pane it restored after a restart (one agent every 100 ms, so
// a listing can see the pane before its agent). herdr's restore_error, or
// the timeout, ends the wait as an exited agent.
func (r *memberReconcile) awaitRestore(pane herdr.PaneInfo) (Result, error) {
	rare, rec := r.rt.edit(), r.rec
	now := r.m.o.Clock.Now()
	if rare.restoring.IsZero() {
		rare.restoring = now
	}
	// The cache learns of a relaunched agent only at the next listing (an
	// agent's detection event carries no agent): ask herdr.
	cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
	a, err := r.m.herdr.GetAgent(cctx, rec.PaneID)
	cancel()
	switch {
	case err == nil && a.Name == r.name && (a.TerminalID == "" || a.TerminalID == rec.TerminalID):
		rare.restoring = time.Time{}
		if !a.InteractiveReady {
			return r.checkStart()
		}
		r.m.cache.AgentStarted(*a)
		r.event(v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("herdr relaunched the agent in pane %s", rec.PaneID))
		return r.running(a.AgentStatus), nil
	case err != nil && herdrcache.Unreachable(err):
		return Result{}, r.m.callFailed(fmt.Errorf("look for the relaunched agent of %q in pane %s: %w", r.name, rec.PaneID, err))
	}
	timeout := startupTimeout(r.profile)
	why := ""
	switch {
	case pane.RestoreError != "":
		why = fmt.Sprintf("herdr could not restore the agent in pane %s: %s", rec.PaneID, pane.RestoreError)
	case !now.Before(rare.restoring.Add(timeout)):
		why = fmt.Sprintf("herdr restarted and did not relaunch the agent in pane %s within %s", rec.PaneID, timeout)
	}
	if why != "" {
		rare.restoring = time.Time{}
		return r.startFailed(why, nil)
	}
	r.b.setPane(rec)
	r.b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("herdr restarted; waiting up to %s for it to relaunch the agent in the member's pane", timeout)),
		degradedCond(r.rt, r.m.o.DegradedAfter))
	r.write()
	return Result{RequeueAfter: min(MaxStartCheck, rare.restoring.Add(timeout).Sub(now))}, nil
}
