package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/statedb"
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

// starting is the in-memory state of one agent start. Every member of a
// fleet that starts at once holds one until its agent is ready — the
// convergence's last collections mark a thousand of them — so it keeps
// only what the step it is at needs: what agent.start takes is apart
// (pendingLaunch), dropped once herdr accepted the start.
type starting struct {
	terminal string // the pane's terminal id, pinned at tab.create
	// launch is what agent.start needs until herdr accepts it; nil once
	// it did (launched).
	launch *pendingLaunch
	// since is when the wait for the agent to be ready began: herdr
	// accepted agent.start, or the agent last left a dialog. The startup
	// deadline counts from it.
	since  time.Time
	checks int // agent.get checks since the start was accepted
	// awaiting: herdr reports the agent blocked at a dialog.
	awaiting bool
}

// pendingLaunch is what a start keeps until herdr accepts its agent.start.
type pendingLaunch struct {
	// args and plan are the launch's agent.start args and MCP plan (the
	// status shows it from the launch on), lists that members launching
	// alike share (shareLaunch): never changed.
	args []string
	plan []v1alpha1.PlanRow
	// durable is the ownership record's write until launch saw it done.
	durable *statedb.Commit
	// agent_pane_busy retries.
	busySince time.Time
	busyTries int
}

// launched reports whether herdr accepted the start's agent.start.
func (st *starting) launched() bool { return st.launch == nil }

// launch issues agent.start in the recorded pane, which the status shows
// from here on with the launch's plan and resumed session (createPane kept
// them).
func (r *memberReconcile) launch() (Result, error) {
	rec, st := r.rec, r.rt.start.launch
	if st.durable != nil {
		if err := st.durable.Wait(); err != nil {
			return r.unrecorded(err)
		}
		st.durable = nil
	}
	r.b.setPane(rec)
	r.b.st.Plan = st.plan
	r.b.st.ResumedSession = r.rt.peek().resumed.DeepCopy()
	cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
	_, err := r.m.herdr.LaunchAgent(cctx, herdr.AgentStartParams{
		Name: r.name, Kind: r.profile.Spec.Harness, PaneID: rec.PaneID, Args: st.args, TimeoutMS: startupTimeout(r.profile).Milliseconds(),
	})
	cancel()
	if err == nil {
		return r.launched(), nil
	}
	if r.ctx.Err() != nil {
		return Result{}, r.ctx.Err()
	}
	err = fmt.Errorf("start agent %q in pane %s: %w", r.name, rec.PaneID, err)
	if herdrcache.Unreachable(err) {
		// The start may have happened before the connection broke: the
		// next attempt finds our agent in the pane (agent_pane_busy or
		// agent_name_taken) and takes it.
		return Result{}, r.m.callFailed(err)
	}
	if herdr.IsCode(err, "agent_pane_not_found") {
		r.m.dropOwned(rec, gonePaneClosed)
		r.owned = false
		r.failed(fmt.Sprintf("pane %s closed before its agent started", rec.PaneID))
		return r.create()
	}
	if herdr.IsCode(err, "agent_pane_busy") || herdr.IsCode(err, "agent_name_taken") {
		cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
		a, gerr := r.m.herdr.GetAgent(cctx, rec.PaneID)
		cancel()
		if gerr == nil && a.Name == r.name && a.TerminalID == rec.TerminalID && (a.LaunchPending || a.InteractiveReady) {
			return r.launched(), nil // an earlier attempt took effect
		}
		if herdrcache.Unreachable(gerr) {
			return Result{}, r.m.callFailed(gerr)
		}
		if herdr.IsCode(err, "agent_pane_busy") {
			return r.paneBusy(err, a)
		}
	}
	return r.startFailed(err.Error(), err)
}

// unrecorded closes the tab of a pane whose ownership record could not be
// written, before any agent started there: a fleetd started again would
// not know it. The member is created again with the queue's backoff.
func (r *memberReconcile) unrecorded(werr error) (Result, error) {
	err := fmt.Errorf("write ownership of %q: %w", r.name, werr)
	if cerr := r.m.closeOwned(r.ctx, r.rec, goneStartFailed); cerr != nil {
		return Result{}, errors.Join(err, cerr)
	}
	r.owned, r.rt.start = false, nil
	r.b.clearPane()
	r.write()
	return Result{}, err // shown by reconcileFailed, retried with backoff
}

// launched records that herdr accepted agent.start.
func (r *memberReconcile) launched() Result {
	st := r.rt.start
	st.launch, st.since, st.checks = nil, r.m.o.Clock.Now(), 0
	return r.stillStarting(st.since.Add(startupTimeout(r.profile)))
}

// paneBusy handles agent_pane_busy: the pane's shell is still starting
// (retry shortly, within bounds), the pane was replaced, or another kind of
// agent runs there (fail at once). a is the pane's agent, if herdr knows one.
func (r *memberReconcile) paneBusy(err error, a *herdr.AgentInfo) (Result, error) {
	rec, st, p := r.rec, r.rt.start.launch, r.profile
	if a != nil && a.Agent != "" && !sameKind(a.Agent, p.Spec.Harness) {
		return r.startFailed(fmt.Sprintf("pane %s runs a %s agent, not %s: %v", rec.PaneID, a.Agent, p.Spec.Harness, err), nil)
	}
	if terminal := r.m.paneTerminal(rec.PaneID, a); terminal != "" && terminal != rec.TerminalID {
		return r.startFailed(fmt.Sprintf("pane %s was replaced while its shell started (terminal %s, now %s)", rec.PaneID, rec.TerminalID, terminal), nil)
	}
	now := r.m.o.Clock.Now()
	if st.busySince.IsZero() {
		st.busySince = now
	}
	st.busyTries++
	waited := now.Sub(st.busySince)
	if st.busyTries >= MaxPaneBusyTries || waited >= PaneBusyWindow {
		return r.startFailed(fmt.Sprintf("pane %s stayed busy for %s (%d agent.start attempts answered agent_pane_busy): %v",
			rec.PaneID, waited, st.busyTries, err), nil)
	}
	delay := min(backoff(r.m.o.PollInterval, st.busyTries-1, time.Second), PaneBusyWindow-waited)
	r.b.setPane(rec)
	r.b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("waiting for the shell of pane %s to start (agent_pane_busy, attempt %d); retrying in %s",
			rec.PaneID, st.busyTries, delay)),
		degradedCond(r.rt, r.m.o.DegradedAfter))
	r.write()
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
func (r *memberReconcile) checkStart() (Result, error) {
	rec, p := r.rec, r.profile
	st := r.rt.start
	if st == nil || st.terminal != rec.TerminalID {
		// A start this fleetd did not issue: fleetd restarted in the
		// middle of one, or herdr restored its session and relaunched the
		// agent (launch-pending again, long after the record was
		// written). Its deadline counts from now.
		st = &starting{terminal: rec.TerminalID, since: r.m.o.Clock.Now()}
		r.rt.start = st
	}
	cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
	a, err := r.m.herdr.GetAgent(cctx, rec.PaneID)
	cancel()
	if err != nil {
		if r.ctx.Err() != nil {
			return Result{}, r.ctx.Err()
		}
		err = fmt.Errorf("check the starting agent %q in pane %s: %w", r.name, rec.PaneID, err)
		if herdrcache.Unreachable(err) {
			return Result{}, r.m.callFailed(err)
		}
		if herdr.IsCode(err, "agent_not_found") || herdr.IsCode(err, "pane_not_found") {
			// herdr clears a failed launch's name; by pane id it is gone
			// when the pane has no agent any more.
			return r.startFailed(err.Error(), nil)
		}
		return Result{}, err
	}
	if a.TerminalID != "" && a.TerminalID != rec.TerminalID {
		return r.startFailed(fmt.Sprintf("pane %s was replaced while its agent started (terminal %s, now %s)", rec.PaneID, rec.TerminalID, a.TerminalID), nil)
	}
	if a.Agent != "" && !sameKind(a.Agent, p.Spec.Harness) {
		return r.startFailed(fmt.Sprintf("pane %s runs a %s agent, not %s", rec.PaneID, a.Agent, p.Spec.Harness), nil)
	}
	now := r.m.o.Clock.Now()
	if a.InteractiveReady {
		if st.awaiting {
			r.event(v1alpha1.EventNormal, v1alpha1.ReasonAgentReady, "the dialog was answered; the agent is ready")
		}
		r.rt.start = nil
		r.m.cache.AgentStarted(*a) // numbers its status and passes it to OnAgentStatus
		r.event(v1alpha1.EventNormal, v1alpha1.ReasonStarted, fmt.Sprintf("agent %s started in pane %s (tab %s)", p.Spec.Harness, rec.PaneID, rec.TabID))
		if err := r.m.noteSession(&r.rec, *a, herdr.PaneInfo{}); err != nil {
			return Result{}, err
		}
		if err := r.started(*a); err != nil {
			return Result{}, err
		}
		return r.running(a.AgentStatus), nil
	}
	if !a.LaunchPending {
		return r.startFailed(fmt.Sprintf("herdr gave up starting the agent in pane %s (neither launch-pending nor ready; status %s)", rec.PaneID, a.AgentStatus), nil)
	}
	if a.AgentStatus == herdr.StatusBlocked {
		return r.awaitingInput(), nil
	}
	if st.awaiting {
		st.awaiting, st.since = false, now
		r.event(v1alpha1.EventNormal, v1alpha1.ReasonStarting, "the dialog was answered; waiting for the agent to be ready")
	}
	timeout := startupTimeout(p)
	deadline := st.since.Add(timeout)
	if !now.Before(deadline) {
		return r.startFailed(fmt.Sprintf("agent not ready within %s", timeout), nil)
	}
	return r.stillStarting(deadline), nil
}

// stillStarting writes the status of a launch-pending agent and schedules
// its next check: the check timer or the deadline, whichever comes first.
func (r *memberReconcile) stillStarting(deadline time.Time) Result {
	st, p := r.rt.start, r.profile
	timeout := startupTimeout(p)
	r.b.setPane(r.rec)
	r.b.st.AgentStatus = ""
	r.b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, "agent is starting"),
		// No pane id in the message (the status has it): the members
		// starting alike share one list of conditions (setStatus).
		cTrue(v1alpha1.ReasonStarting, fmt.Sprintf("started %s; waiting up to %s for it to be ready", p.Spec.Harness, timeout)),
		degradedCond(r.rt, r.m.o.DegradedAfter))
	r.write()
	next := backoff(r.m.o.PollInterval, st.checks, MaxStartCheck)
	st.checks++
	if left := deadline.Sub(r.m.o.Clock.Now()); left < next {
		next = max(left, time.Millisecond)
	}
	return Result{RequeueAfter: next}
}

// awaitingInput shows an agent that waits at a dialog for a person. Its
// screen is read once, when it starts waiting. Nothing is scheduled: the
// answer changes the agent's status, which herdr reports as an event.
func (r *memberReconcile) awaitingInput() Result {
	st, rec := r.rt.start, r.rec
	msg := fmt.Sprintf("the %s agent in pane %s waits for input at a dialog; answer it in herdr", r.profile.Spec.Harness, rec.PaneID)
	if !st.awaiting {
		st.awaiting = true
		text := r.m.readDialog(r.ctx, rec.PaneID)
		if text != "" {
			msg += ": " + text
		}
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonAwaitingInput, msg)
	} else if c := r.b.condition(v1alpha1.ConditionReady); c.Reason == v1alpha1.ReasonAwaitingInput {
		msg = c.Message // keep the text read when it began waiting
	}
	r.b.setPane(rec)
	r.b.st.AgentStatus = string(herdr.StatusBlocked)
	r.b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonAwaitingInput, msg),
		cTrue(v1alpha1.ReasonAwaitingInput, "the agent's start waits for a person; no startup deadline runs meanwhile"),
		degradedCond(r.rt, r.m.o.DegradedAfter))
	r.write()
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
// failure (failed, then create decides when the member gets its next pane),
// or as an unlaunchable spec when herdr refused the spec itself (cause).
func (r *memberReconcile) startFailed(why string, cause error) (Result, error) {
	if err := r.m.closeOwned(r.ctx, r.rec, goneStartFailed); err != nil {
		return Result{}, err
	}
	r.owned = false
	if cause != nil && invalidSpec(cause) && r.rt.peek().resumed == nil { // a refused resume falls back to a fresh start
		return r.unlaunchable(cause), nil
	}
	r.failed(why)
	return r.create()
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

// startupTimeout is how long the profile's agent may take to be ready.
func startupTimeout(p *v1alpha1.Profile) time.Duration {
	if t := p.Spec.StartupTimeout.Duration; t > 0 {
		return t
	}
	return v1alpha1.DefaultStartupTimeout
}
