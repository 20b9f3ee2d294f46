package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
)

// Starting an agent never holds a worker. create makes the member's tab and
// launch issues agent.start, which herdr answers at once with the agent
// launch-pending; the reconcile returns with the member Starting. From then
// on every reconcile of the member — queued by herdr's events about its pane
// (the agent detected, its status changed), by a check timer that backs off
// from Options.PollInterval to MaxStartCheck, or by the startup deadline —
// makes one agent.get (checkStart) and decides:
//
//   - interactive-ready: the agent runs (Ready);
//   - launch-pending and blocked: it waits at a dialog (a first-run trust
//     prompt, a login) for a person, who answers it in herdr. The member is
//     Starting with Ready=False reason AwaitingInput and the dialog's text,
//     and no deadline runs while it waits;
//   - launch-pending: Starting until the profile's startup timeout, counted
//     from agent.start (or from the moment a dialog was answered);
//   - anything else (herdr gave up, the pane was replaced, another kind of
//     agent runs there): a failed start, recreated per restartPolicy.
//
// agent_pane_busy from agent.start (the new pane's shell is still starting)
// is retried on a short timer, within PaneBusyWindow and MaxPaneBusyTries,
// as long as the pane keeps the terminal tab.create gave it; the pane is
// not closed for it.

// starting is the in-memory state of one agent start.
type starting struct {
	terminal string   // the pane's terminal id, pinned at tab.create
	args     []string // agent.start args, until herdr accepts the start
	launched bool     // herdr accepted agent.start
	since    time.Time
	// agent_pane_busy retries.
	busySince time.Time
	busyTries int
	checks    int // agent.get checks since the start was accepted
	// awaiting: herdr reports the agent blocked at a dialog.
	awaiting bool
	answered time.Time // when the agent last left a dialog
}

// launch issues agent.start in the recorded pane.
func (m *Manager) launch(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership) (Result, error) {
	st := rt.start
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	_, err := m.herdr.LaunchAgent(cctx, herdr.AgentStartParams{
		Name: name, Kind: p.Spec.Harness, PaneID: rec.PaneID, Args: st.args, TimeoutMS: startupTimeout(p).Milliseconds(),
	})
	cancel()
	if err == nil {
		return m.launched(name, p, b, rt, rec), nil
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	err = fmt.Errorf("start agent %q in pane %s: %w", name, rec.PaneID, err)
	if herdrcache.Unreachable(err) {
		// The start may have happened before the connection broke: the
		// next attempt finds our agent in the pane (agent_pane_busy or
		// agent_name_taken) and takes it.
		return Result{}, m.callFailed(err)
	}
	if herdr.IsCode(err, "agent_pane_not_found") {
		if derr := m.dropOwned(rec, gonePaneClosed); derr != nil {
			return Result{}, derr
		}
		return m.failed(name, mem, p, b, rt, fmt.Sprintf("pane %s closed before its agent started", rec.PaneID)), nil
	}
	if herdr.IsCode(err, "agent_pane_busy") || herdr.IsCode(err, "agent_name_taken") {
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		a, gerr := m.herdr.GetAgent(cctx, rec.PaneID)
		cancel()
		if gerr == nil && a.Name == name && a.TerminalID == rec.TerminalID && (a.LaunchPending || a.InteractiveReady) {
			return m.launched(name, p, b, rt, rec), nil // an earlier attempt took effect
		}
		if herdrcache.Unreachable(gerr) {
			return Result{}, m.callFailed(gerr)
		}
		if herdr.IsCode(err, "agent_pane_busy") {
			return m.paneBusy(ctx, name, mem, p, b, rt, rec, err, a)
		}
	}
	return m.startFailed(ctx, name, mem, p, b, rt, rec, err.Error(), err)
}

// launched records that herdr accepted agent.start.
func (m *Manager) launched(name string, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership) Result {
	st := rt.start
	st.launched, st.args, st.since = true, nil, m.o.Clock.Now()
	st.busySince, st.busyTries, st.checks = time.Time{}, 0, 0
	return m.stillStarting(name, p, b, rt, rec, st.since.Add(startupTimeout(p)))
}

// paneBusy handles agent_pane_busy: the pane's shell is still starting
// (retry shortly, within bounds), the pane was replaced, or another kind of
// agent runs there (fail at once). a is the pane's agent, if herdr knows one.
func (m *Manager) paneBusy(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership, err error, a *herdr.AgentInfo) (Result, error) {
	st := rt.start
	if a != nil && a.Agent != "" && !sameKind(a.Agent, p.Spec.Harness) {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("pane %s runs a %s agent, not %s: %v", rec.PaneID, a.Agent, p.Spec.Harness, err), nil)
	}
	if terminal := m.paneTerminal(rec.PaneID, a); terminal != "" && terminal != rec.TerminalID {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("pane %s was replaced while its shell started (terminal %s, now %s)", rec.PaneID, rec.TerminalID, terminal), nil)
	}
	now := m.o.Clock.Now()
	if st.busySince.IsZero() {
		st.busySince = now
	}
	st.busyTries++
	waited := now.Sub(st.busySince)
	if st.busyTries >= MaxPaneBusyTries || waited >= PaneBusyWindow {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("pane %s stayed busy for %s (%d agent.start attempts answered agent_pane_busy): %v",
				rec.PaneID, waited, st.busyTries, err), nil)
	}
	delay := min(backoff(m.o.PollInterval, st.busyTries-1, time.Second), PaneBusyWindow-waited)
	b.setPane(rec)
	b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("waiting for the shell of pane %s to start (agent_pane_busy, attempt %d); retrying in %s",
			rec.PaneID, st.busyTries, delay)),
		degradedCond(rt, m.o.DegradedAfter))
	m.writeStatus(name, b)
	return Result{RequeueAfter: delay}, nil
}

// paneTerminal is the terminal id herdr now shows for paneID: the agent's,
// else the cache's pane's; "" if neither knows the pane.
func (m *Manager) paneTerminal(paneID string, a *herdr.AgentInfo) string {
	if a != nil && a.TerminalID != "" {
		return a.TerminalID
	}
	if pn, ok := m.cache.Pane("", paneID); ok {
		return pn.TerminalID
	}
	return ""
}

// checkStart asks herdr once how the started agent is doing.
func (m *Manager) checkStart(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership) (Result, error) {
	st := rt.start
	if st == nil || st.terminal != rec.TerminalID {
		// A start this fleetd did not issue: fleetd restarted in the
		// middle of one, or herdr restored its session and relaunched the
		// agent (launch-pending again, long after the record was
		// written). Its deadline counts from now.
		st = &starting{terminal: rec.TerminalID, launched: true, since: m.o.Clock.Now()}
		rt.start = st
	}
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	a, err := m.herdr.GetAgent(cctx, rec.PaneID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		err = fmt.Errorf("check the starting agent %q in pane %s: %w", name, rec.PaneID, err)
		if herdrcache.Unreachable(err) {
			return Result{}, m.callFailed(err)
		}
		if herdr.IsCode(err, "agent_not_found") || herdr.IsCode(err, "pane_not_found") {
			// herdr clears a failed launch's name; by pane id it is gone
			// when the pane has no agent any more.
			return m.startFailed(ctx, name, mem, p, b, rt, rec, err.Error(), nil)
		}
		return Result{}, err
	}
	if a.TerminalID != "" && a.TerminalID != rec.TerminalID {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("pane %s was replaced while its agent started (terminal %s, now %s)", rec.PaneID, rec.TerminalID, a.TerminalID), nil)
	}
	if a.Agent != "" && !sameKind(a.Agent, p.Spec.Harness) {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("pane %s runs a %s agent, not %s", rec.PaneID, a.Agent, p.Spec.Harness), nil)
	}
	now := m.o.Clock.Now()
	if a.InteractiveReady {
		if st.awaiting {
			m.event(name, v1alpha1.EventNormal, v1alpha1.ReasonAgentReady, "the dialog was answered; the agent is ready")
		}
		rt.start = nil
		m.cache.AgentStarted(*a) // numbers its status and passes it to OnAgentStatus
		m.event(name, v1alpha1.EventNormal, reasonStarted, fmt.Sprintf("agent %s started in pane %s (tab %s)", p.Spec.Harness, rec.PaneID, rec.TabID))
		if err := m.noteSession(&rec, *a, herdr.PaneInfo{}); err != nil {
			return Result{}, err
		}
		m.started(name, rt, *a)
		return m.running(name, b, rt, rec, a.AgentStatus), nil
	}
	if !a.LaunchPending {
		return m.startFailed(ctx, name, mem, p, b, rt, rec,
			fmt.Sprintf("herdr gave up starting the agent in pane %s (neither launch-pending nor ready; status %s)", rec.PaneID, a.AgentStatus), nil)
	}
	if a.AgentStatus == herdr.StatusBlocked {
		return m.awaitingInput(ctx, name, p, b, rt, rec), nil
	}
	if st.awaiting {
		st.awaiting, st.answered = false, now
		m.event(name, v1alpha1.EventNormal, v1alpha1.ReasonStarting, "the dialog was answered; waiting for the agent to be ready")
	}
	timeout := startupTimeout(p)
	deadline := st.since.Add(timeout)
	if d := st.answered.Add(timeout); d.After(deadline) {
		deadline = d
	}
	if !now.Before(deadline) {
		return m.startFailed(ctx, name, mem, p, b, rt, rec, fmt.Sprintf("agent not ready within %s", timeout), nil)
	}
	return m.stillStarting(name, p, b, rt, rec, deadline), nil
}

// stillStarting writes the status of a launch-pending agent and schedules
// its next check: the check timer or the deadline, whichever comes first.
func (m *Manager) stillStarting(name string, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership, deadline time.Time) Result {
	st := rt.start
	timeout := startupTimeout(p)
	b.setPane(rec)
	b.st.AgentStatus = ""
	b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("started %s in pane %s; waiting up to %s for it to be ready", p.Spec.Harness, rec.PaneID, timeout)),
		degradedCond(rt, m.o.DegradedAfter))
	m.writeStatus(name, b)
	next := backoff(m.o.PollInterval, st.checks, MaxStartCheck)
	st.checks++
	if left := deadline.Sub(m.o.Clock.Now()); left < next {
		next = max(left, time.Millisecond)
	}
	return Result{RequeueAfter: next}
}

// awaitingInput shows an agent that waits at a dialog for a person. Its
// screen is read once, when it starts waiting. Nothing is scheduled: the
// answer changes the agent's status, which herdr reports as an event.
func (m *Manager) awaitingInput(ctx context.Context, name string, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership) Result {
	st := rt.start
	msg := fmt.Sprintf("the %s agent in pane %s waits for input at a dialog; answer it in herdr", p.Spec.Harness, rec.PaneID)
	if !st.awaiting {
		st.awaiting = true
		text := m.readDialog(ctx, rec.PaneID)
		if text != "" {
			msg += ": " + text
		}
		m.event(name, v1alpha1.EventWarning, v1alpha1.ReasonAwaitingInput, msg)
	} else if c := b.condition(v1alpha1.ConditionReady); c.Reason == v1alpha1.ReasonAwaitingInput {
		msg = c.Message // keep the text read when it began waiting
	}
	b.setPane(rec)
	b.st.AgentStatus = string(herdr.StatusBlocked)
	b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonAwaitingInput, msg),
		cTrue(v1alpha1.ReasonAwaitingInput, "the agent's start waits for a person; no startup deadline runs meanwhile"),
		degradedCond(rt, m.o.DegradedAfter))
	m.writeStatus(name, b)
	return Result{}
}

// maxDialogText bounds the dialog text shown in a member's status.
const maxDialogText = 480

// readDialog reads the visible screen of a pane once and returns its text
// on one line, without control or format characters, at most maxDialogText
// bytes; "" if herdr cannot read it.
func (m *Manager) readDialog(ctx context.Context, paneID string) string {
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	r, err := m.herdr.ReadPane(cctx, herdr.PaneReadParams{PaneID: paneID, Source: herdr.SourceVisible, Format: herdr.FormatText})
	if err != nil {
		m.log.Debug("could not read the dialog of a waiting agent", "pane", paneID, "err", err)
		return ""
	}
	return dialogText(r.Text)
}

// dialogText flattens screen text to one line: each non-blank line with its
// runs of spaces collapsed, joined by " / ", control and format characters
// (escape sequences' ESC, bidi overrides) dropped, cut to maxDialogText
// bytes on a rune boundary.
func dialogText(screen string) string {
	var lines []string
	for _, l := range strings.Split(screen, "\n") {
		l = strings.Map(func(r rune) rune {
			switch {
			case r == '\t':
				return ' '
			case r == utf8.RuneError, unicode.IsControl(r), unicode.Is(unicode.Cf, r):
				return -1
			}
			return r
		}, l)
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, " / ")
	if len(out) <= maxDialogText {
		return out
	}
	cut := maxDialogText
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + "…"
}

// startFailed closes the tab of a start that failed and handles it as a
// failure (recreated per restartPolicy), or as an unlaunchable spec when
// herdr refused the spec itself (cause).
func (m *Manager) startFailed(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership, why string, cause error) (Result, error) {
	if err := m.closeOwned(ctx, rec, goneStartFailed); err != nil {
		return Result{}, err
	}
	if cause != nil && invalidSpec(cause) && rt.resumed == nil { // a refused resume falls back to a fresh start
		return m.unlaunchable(name, mem, p, b, rt, cause), nil
	}
	return m.failed(name, mem, p, b, rt, why), nil
}

// sameKind reports whether herdr's agent kind (canonical, lower-case) is the
// one a profile asked for, which may be an alias ("claude-code").
func sameKind(detected, wanted string) bool {
	return herdr.CanonicalKind(detected) == herdr.CanonicalKind(wanted)
}

// backoff is base doubled n times, at most limit.
func backoff(base time.Duration, n int, limit time.Duration) time.Duration {
	d := base << min(n, 30)
	if d <= 0 || d > limit {
		return limit
	}
	return d
}

// ownedPane finds the pane of an ownership record: by terminal id (stable
// across moves while herdr runs), else by pane id — kept across herdr
// restarts and handoffs, which change terminal ids — when the agent there
// is the member's: its name, and its agent_session when both sides know
// one; or, while herdr has not relaunched a restored agent yet, when the
// pane is in a tab labelled for the member. A pane id that now belongs to
// another member's pane is not found. rekeyed says the record's terminal id
// is stale.
func (m *Manager) ownedPane(name string, rec Ownership) (p herdrcache.Pane, alive, rekeyed bool) {
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

// rekey moves a record to the terminal id herdr now gives its pane, and the
// pane's credential with it.
func (m *Manager) rekey(name string, b *statusBuilder, rt *runtime, rec Ownership, p herdrcache.Pane) (Ownership, error) {
	old := rec.TerminalID
	rec.TerminalID, rec.TabID, rec.WorkspaceID = p.TerminalID, p.TabID, p.WorkspaceID
	if err := m.own.put(rec); err != nil {
		return rec, err
	}
	if rt.start != nil && rt.start.terminal == old {
		rt.start.terminal = rec.TerminalID
	}
	m.signalOwned()
	if rec.Token != "" {
		if err := m.launcher.Bind(launch.Spec{Token: rec.Token}, rec.PaneID, rec.TerminalID); err != nil {
			m.log.Warn("launcher could not rebind the pane's credential", "member", name, "pane", rec.PaneID, "err", err)
		}
	}
	m.event(name, v1alpha1.EventNormal, reasonAdopted,
		fmt.Sprintf("adopted pane %s by its id and agent name after herdr restarted (terminal %s, was %s)", rec.PaneID, rec.TerminalID, old))
	b.setPane(rec)
	return rec, nil
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
func (m *Manager) awaitRestore(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, rec Ownership, pane herdr.PaneInfo) (Result, error) {
	now := m.o.Clock.Now()
	if rt.restoring.IsZero() {
		rt.restoring = now
	}
	// The cache learns of a relaunched agent only at the next listing (an
	// agent's detection event carries no agent): ask herdr.
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	a, err := m.herdr.GetAgent(cctx, rec.PaneID)
	cancel()
	switch {
	case err == nil && a.Name == name && (a.TerminalID == "" || a.TerminalID == rec.TerminalID):
		rt.restoring = time.Time{}
		if !a.InteractiveReady {
			return m.checkStart(ctx, name, mem, p, b, rt, rec)
		}
		m.cache.AgentStarted(*a)
		m.event(name, v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("herdr relaunched the agent in pane %s", rec.PaneID))
		return m.running(name, b, rt, rec, a.AgentStatus), nil
	case err != nil && herdrcache.Unreachable(err):
		return Result{}, m.callFailed(fmt.Errorf("look for the relaunched agent of %q in pane %s: %w", name, rec.PaneID, err))
	}
	timeout := startupTimeout(p)
	why := ""
	switch {
	case pane.RestoreError != "":
		why = fmt.Sprintf("herdr could not restore the agent in pane %s: %s", rec.PaneID, pane.RestoreError)
	case !now.Before(rt.restoring.Add(timeout)):
		why = fmt.Sprintf("herdr restarted and did not relaunch the agent in pane %s within %s", rec.PaneID, timeout)
	}
	if why != "" {
		rt.restoring = time.Time{}
		return m.startFailed(ctx, name, mem, p, b, rt, rec, why, nil)
	}
	b.setPane(rec)
	b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("herdr restarted; waiting up to %s for it to relaunch the agent in pane %s", timeout, rec.PaneID)),
		degradedCond(rt, m.o.DegradedAfter))
	m.writeStatus(name, b)
	return Result{RequeueAfter: min(MaxStartCheck, rt.restoring.Add(timeout).Sub(now))}, nil
}
