package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Agents are not pods: a turn in flight is work that cannot be redone for
// free. So nothing fleetd is asked to do to a member closes its agent in
// the middle of a turn:
//
//   - A graceful close (closeWhenIdle): a member deleted (its file, `fleetd
//     delete`, bridge_stop, DELETE /members/NAME) or paused keeps its tab
//     while its agent is busy — herdr shows it working or blocked at a
//     dialog, or the messaging core holds a turn open for it, a message
//     queued for its pane or a question it asked ([Activity]) — and is
//     Terminating meanwhile, Ready=False and Progressing=True
//     (WaitingForIdle), the message saying what it waits for and until
//     when. The tab closes at the agent's first idle moment, or when the
//     member's termination grace period ends, or at once when forced
//     ([Manager.Expedite]). The messaging core admits nothing new for it
//     meanwhile; what it was given before goes on.
//   - A replacement (replaceWhenIdle): a spec change that needs a new
//     agent — one whose launch differs (launchHash): not labels,
//     annotations, spec.prompt, the grace period or the update strategy —
//     or a restart asked for ([Manager.Restart]) leaves the running agent
//     alone while it is busy: UpToDate=False (WaitingForIdle), shown as
//     Updating. It is replaced at its first idle moment, after the update
//     strategy's maxWait, or at once when forced. A change that needs no
//     new agent is taken by the running one as it is.
//
// The clock of each wait is kept in the member's memory (memory.go) before
// anything shows it, so a restart of fleetd in the middle keeps its
// deadline, its force and, for a deleted member, what it was. A wait looks
// again when the agent's status changes, when the messaging core changes
// (Run follows [Activity.Changed] for the waiting members) and at its
// deadline; it never polls.

// What a member waits for idle to do: the values of
// fleetd_members_waiting's reason label (its display phases).
const (
	waitTerminating = v1alpha1.PhaseTerminating
	waitUpdating    = v1alpha1.PhaseUpdating
)

// Event reasons of the graceful waits (not condition reasons).
const (
	reasonForced       = "Forced"
	reasonGraceEnded   = "GracePeriodEnded"
	reasonMaxWaitEnded = "MaxWaitEnded"
	reasonUpdated      = "Updated"
	// reasonCloseCancelled: a member whose tab waited to close is
	// declared, and not paused, again.
	reasonCloseCancelled = "CloseCancelled"
)

// Activity is what the messaging core knows of a member's work, for the
// graceful waits: *messaging.Core implements it. The controllers never
// import the messaging core; the daemon passes it in [Options.Activity].
type Activity interface {
	// Outstanding reports what the core holds open for the member — a
	// turn, a message queued for its pane, a question it asked — in a few
	// words, and whether there is any. It must not block.
	Outstanding(member string) (why string, busy bool)
	// Changed returns a channel closed at the next change of the core's
	// state (it may close for changes that concern no waiting member).
	Changed() <-chan struct{}
	// Hold keeps anything new from being typed into the member's agent
	// until release — refusing new messages to it with reason — unless the
	// core holds something open for it (busy, why: then nothing is held):
	// a replacement that found the agent idle takes it before it closes
	// the pane, so that no prompt starts a turn in between. It must not
	// block; release may be called more than once.
	Hold(member, reason string) (release func(), why string, busy bool)
}

// ErrNotRunning is returned (wrapped) by [Manager.Restart] for a member
// this node runs no agent for.
var ErrNotRunning = errors.New("runs no agent here")

// Expedite ends every wait for idle of member name at once: a graceful
// close closes its tab, a waiting replacement replaces its agent, whatever
// the agent is doing (`fleetd delete --now`, bridge_stop with force,
// DELETE /members/NAME?now=true, and `fleetd rollout restart --now` through
// Restart). It reports whether the member was waiting (a close or a
// replacement under way); it does not wait for the close. It never blocks
// on the disk: the member's reconcile records the force.
func (m *Manager) Expedite(name string) bool {
	mem := m.memory.get(name)
	if mem.Close == nil && mem.Update == nil {
		return false
	}
	m.mu.Lock()
	m.forced[name] = true
	m.mu.Unlock()
	m.queue.Add(name)
	return true
}

// Restart replaces member name's running agent with a new one of the same
// definition (the agent's session resumed, as after any relaunch): at the
// agent's next idle moment, as a spec change would be, or at once with
// now. It is the mechanism of `fleetd rollout restart member/NAME
// [--now]`. A member whose agent does not run here fails with
// [ErrNotRunning]. It never blocks on the disk: the member's reconcile
// records the restart.
func (m *Manager) Restart(name string, now bool) error {
	if _, ok := m.own.get(name); !ok {
		return fmt.Errorf("member %q %w", name, ErrNotRunning)
	}
	m.mu.Lock()
	m.restarts[name], m.asked[name] = true, true
	if now {
		m.forced[name] = true
	}
	m.mu.Unlock()
	m.queue.Add(name)
	return nil
}

// RestartPending reports whether a restart asked of member name (Restart)
// is not in its status yet: until the reconcile that takes it has written
// the member's status, that status still shows the agent it replaces, and
// `fleetd rollout status` must not call the restart done.
func (m *Manager) RestartPending(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked[name]
}

// takeRequests returns, and clears, what was asked of member name since its
// last reconcile: a force (Expedite) and a restart (Restart).
func (m *Manager) takeRequests(name string) (force, restart bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	force, restart = m.forced[name], m.restarts[name]
	delete(m.forced, name)
	delete(m.restarts, name)
	return force, restart
}

// remember applies change to the member's memory, on disk first, and
// reads it back into r.memo.
func (r *memberReconcile) remember(change func(*memory)) error {
	if err := r.m.memory.edit(r.name, change); err != nil {
		return err
	}
	r.memo = r.m.memory.get(r.name)
	return nil
}

// takeRequests records what was asked of the member since its last
// reconcile in its memory: a restart becomes a waiting replacement, a
// force forces what waits.
func (r *memberReconcile) takeRequests() error {
	force, restart := r.m.takeRequests(r.name)
	if !force && !restart {
		return nil
	}
	now := r.m.o.Clock.Now()
	return r.remember(func(mm *memory) {
		if restart && r.owned {
			if mm.Update == nil {
				mm.Update = &updating{Since: now}
			}
			mm.Update.Restart = true
		}
		if force && mm.Close != nil {
			mm.Close.Force = true
		}
		if force && mm.Update != nil {
			mm.Update.Force = true
		}
	})
}

// closeWhenIdle is the graceful close of the member's tab for reason
// (goneDeleted or gonePaused; why says it in words). It starts the close's
// clock the first time; the deadline is the grace period — the member's
// spec, its profile's, or the default — from then. It reports wait while
// the agent is busy,
// before the deadline and unforced, with the member Terminating and its
// conditions saying what it waits for; res looks again at the deadline.
// Otherwise the caller closes the tab now.
func (r *memberReconcile) closeWhenIdle(reason, why string) (wait bool, res Result, err error) {
	defer r.waited(&wait)
	now := r.m.o.Clock.Now()
	started := r.memo.Close == nil
	if err := r.startClose(reason, now); err != nil {
		return false, Result{}, err
	}
	c := r.memo.Close
	if !r.m.cache.Synced() {
		// Nothing is decided from a cache that does not show herdr: not
		// whether the agent is busy, and not the close either (a close
		// left to closeTab would happen if the cache synced in between,
		// unlooked at). The member is queued again when it syncs.
		r.closeWaitsForHerdr(why)
		return true, Result{}, nil
	}
	r.waitFor(waitTerminating)
	busy, status := r.busyPane()
	switch {
	case busy == "":
		return false, Result{}, nil
	case c.Force:
		r.event(v1alpha1.EventNormal, reasonForced, fmt.Sprintf("%s; closing tab %s now as asked, although %s", why, r.rec.TabID, busy))
		return false, Result{}, nil
	case !now.Before(c.Deadline):
		r.event(v1alpha1.EventWarning, reasonGraceEnded, fmt.Sprintf("%s; the termination grace period of %s ended; closing tab %s although %s",
			why, c.Deadline.Sub(c.Since), r.rec.TabID, busy))
		return false, Result{}, nil
	}
	msg := fmt.Sprintf("%s; closing tab %s once the agent is idle — %s — and at the latest at %s (terminationGracePeriod %s)",
		why, r.rec.TabID, busy, r.m.clockTime(c.Deadline), c.Deadline.Sub(c.Since))
	if started {
		r.event(v1alpha1.EventNormal, v1alpha1.ReasonWaitingForIdle, msg)
	}
	if r.b != nil {
		r.b.setPane(r.rec)
		r.b.st.AgentStatus = string(status)
		r.b.st.Phase = v1alpha1.PhaseTerminating
		r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionFalse, v1alpha1.ReasonTerminating, msg)
		r.b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionTrue, v1alpha1.ReasonWaitingForIdle, msg)
		r.write()
	}
	return true, Result{RequeueAfter: c.Deadline.Sub(now)}, nil
}

// startClose records the graceful close in the member's memory: begun now
// the first time, its deadline the grace period from then (a grace period
// edited meanwhile, a paused member's, moves it), what it closes for, and
// the member as last declared.
func (r *memberReconcile) startClose(reason string, now time.Time) error {
	var obj *v1alpha1.Member
	if r.b != nil {
		obj = r.b.obj.DeepCopy()
		obj.Status = v1alpha1.MemberStatus{}
	}
	grace := r.gracePeriod(obj)
	return r.remember(func(mm *memory) {
		if mm.Close == nil {
			mm.Close = &closing{Since: now}
		}
		mm.Close.Deadline = mm.Close.Since.Add(grace)
		mm.Close.Reason = reason
		if obj != nil {
			mm.Close.Member = obj
		}
	})
}

// closed is told that the member's tab was closed: the graceful close, if
// any, is over.
func (r *memberReconcile) closed() error {
	return r.remember(func(mm *memory) { mm.Close = nil })
}

// gracePeriod is how long a busy member's tab may stay open once it is to
// close: the member's spec.terminationGracePeriod, else its profile's (a
// deleted member's as last declared), else the default.
func (r *memberReconcile) gracePeriod(obj *v1alpha1.Member) time.Duration {
	if obj == nil {
		return v1alpha1.DefaultTerminationGracePeriod
	}
	if g := obj.Spec.TerminationGracePeriod; g != nil && g.Duration > 0 {
		return g.Duration
	}
	if p := r.snap.Profiles[obj.Spec.Profile]; p != nil && p.Spec.TerminationGracePeriod.Duration > 0 {
		return p.Spec.TerminationGracePeriod.Duration
	}
	return v1alpha1.DefaultTerminationGracePeriod
}

// outdated reports whether the member's pane is to be taken to the
// member's current definition: it runs an older one (specChanged), or an
// older one of its profile or tenant (refsOutdated, rollout.go), or a
// restart was asked for.
func (r *memberReconcile) outdated() bool {
	return r.specChanged() || (r.memo.Update != nil && r.memo.Update.Restart) || r.refsOutdated()
}

// update takes the member's running agent to its current definition: a
// change that needs no new agent is recorded as the pane's; one that does
// is held while the snapshot is stale or the member's prune is held,
// waits for idle (the reconcile goes
// on with the running pane, Updating), or replaces the pane. done says the
// reconcile ends with res and err.
func (r *memberReconcile) update() (res Result, done bool, err error) {
	if !r.needsNewAgent() {
		old := r.rec.Generation
		r.rec.Generation, r.rec.Launch = r.mem.Generation, launchHash(r.mem)
		if err := r.m.own.put(r.rec); err != nil {
			return Result{}, true, err
		}
		r.event(v1alpha1.EventNormal, reasonUpdated, fmt.Sprintf("generation %d → %d needs no new agent; the running one takes it", old, r.mem.Generation))
		return Result{}, false, r.remember(func(mm *memory) { mm.Update = nil })
	}
	if r.snap.Stale != nil {
		// The old agent keeps running: a replacement could not be
		// created, and the new definition may not be this node's.
		res, err := r.stale()
		return res, true, err
	}
	if r.heldFromReplace() { // prune.go
		return Result{}, false, nil
	}
	if wait, err := r.awaitTurn(); err != nil || wait { // rollout.go
		return Result{}, err != nil, err
	}
	wait, err := r.replaceWhenIdle()
	defer r.releaseHold() // after the close: nothing typed into the old agent in between
	if err != nil || wait {
		return Result{}, err != nil, err
	}
	if replaced, err := r.replace(); !replaced {
		return Result{}, true, err
	}
	return Result{}, false, nil
}

// needsNewAgent reports whether the member's current definition needs an
// agent other than the running one: its own (ownChange: a restart was
// asked for, the member is another object under the same name, or what a
// launch is made of differs — launchHash; a pane recorded before fleetd
// kept the hash is replaced on any spec change, as it always was), or
// what its launch takes from its profile or tenant changed (refsOutdated,
// which waits for a turn in the profile's rollout first).
func (r *memberReconcile) needsNewAgent() bool { return r.ownChange() || r.refsOutdated() }

// replaceWhenIdle starts the replacement's clock the first time (the
// update strategy's maxWait from then; a later change keeps it) and
// reports wait while the agent is busy, before the deadline and unforced,
// with UpToDate=False saying what it waits for.
func (r *memberReconcile) replaceWhenIdle() (wait bool, err error) {
	defer r.waited(&wait)
	now := r.m.o.Clock.Now()
	started := r.memo.Update == nil
	maxWait, err := r.startUpdate(now)
	if err != nil {
		return false, err
	}
	u := r.memo.Update
	what := fmt.Sprintf("generation %d replaces the agent of generation %d", r.mem.Generation, r.rec.Generation)
	switch {
	case u.Restart && !r.specChanged():
		what = "a restart replaces the agent"
	case !r.ownChange():
		what = fmt.Sprintf("profile/%s's rollout replaces the agent", r.profile.Name)
	}
	r.waitFor(waitUpdating)
	busy, _ := r.busyPane()
	if busy == "" {
		busy = r.hold(what)
	}
	switch {
	case busy == "":
		return false, nil
	case u.Force:
		r.event(v1alpha1.EventNormal, reasonForced, fmt.Sprintf("%s now as asked, although %s", what, busy))
		return false, nil
	case !u.Deadline.IsZero() && !now.Before(u.Deadline):
		r.event(v1alpha1.EventWarning, reasonMaxWaitEnded, fmt.Sprintf("%s: updateStrategy.maxWait of %s ended, although %s", what, maxWait, busy))
		return false, nil
	}
	msg := fmt.Sprintf("%s once it is idle — %s — ", what, busy)
	if u.Deadline.IsZero() {
		msg += "however long that takes (no updateStrategy.maxWait)"
	} else {
		msg += fmt.Sprintf("and at the latest at %s (updateStrategy.maxWait %s)", r.m.clockTime(u.Deadline), maxWait)
		r.requeueBy = u.Deadline
	}
	if started {
		r.event(v1alpha1.EventNormal, v1alpha1.ReasonWaitingForIdle, msg)
	}
	r.b.cond(v1alpha1.ConditionUpToDate, v1alpha1.ConditionFalse, v1alpha1.ReasonWaitingForIdle, msg)
	r.updateWaits = true
	return true, nil
}

// hold takes the messaging core's hold on the member's idle agent for its
// replacement (what, in words), until releaseHold: nothing is typed into
// it between this look and the close. It returns what the core holds open
// for the member instead, "" when the hold is taken (or there is no core).
func (r *memberReconcile) hold(what string) string {
	a := r.m.o.Activity
	if a == nil {
		return ""
	}
	release, why, busy := a.Hold(r.name, what+"; its new agent takes messages once it is Ready")
	if busy {
		return why
	}
	r.release = release
	return ""
}

// releaseHold ends the hold taken by hold, if any.
func (r *memberReconcile) releaseHold() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// updated is told that the member gets a new pane, which runs its current
// definition: a replacement or restart that waited is done. It is said
// before herdr is touched, so that a failed write cannot restart the new
// pane.
func (r *memberReconcile) updated() error {
	r.updateWaits = false
	return r.remember(func(mm *memory) {
		r.replacedNow(mm) // a rollout's turn: the new agent must become Ready (rollout.go)
		mm.Update = nil
	})
}

// startUpdate records the waiting replacement in the member's memory:
// begun now the first time (a later change keeps it), its deadline the
// update strategy's maxWait from then, if any, which it returns.
func (r *memberReconcile) startUpdate(now time.Time) (maxWait time.Duration, err error) {
	if u := r.mem.Spec.UpdateStrategy; u != nil && u.MaxWait != nil {
		maxWait = u.MaxWait.Duration
	}
	return maxWait, r.remember(func(mm *memory) {
		if mm.Update == nil {
			mm.Update = &updating{Since: now}
		}
		if !mm.Update.Restart {
			mm.Update.Generation = r.mem.Generation
		}
		mm.Update.Deadline = time.Time{}
		if maxWait > 0 {
			mm.Update.Deadline = mm.Update.Since.Add(maxWait)
		}
	})
}

// busyPane says what keeps the member's agent from being idle, "" when
// nothing does or its pane is gone (nothing left to wait for): herdr's
// status of the agent (working, or blocked at a dialog), then what the
// messaging core holds open for it.
func (r *memberReconcile) busyPane() (busy string, status herdr.AgentStatus) {
	p, alive, _ := r.m.findPane(r.name, r.rec)
	if !alive || !p.HasAgent {
		return "", ""
	}
	var why []string
	status = agentStatusOf(p)
	switch status {
	case herdr.StatusWorking:
		w := "the agent is working"
		if since, ok := r.m.workingSince(r.name); ok {
			w += " (since " + r.m.clockTime(since) + ")"
		}
		why = append(why, w)
	case herdr.StatusBlocked:
		why = append(why, "the agent is blocked, waiting for input in herdr")
	}
	if a := r.m.o.Activity; a != nil {
		if w, busy := a.Outstanding(r.name); busy {
			why = append(why, w)
		}
	}
	return strings.Join(why, "; "), status
}

// agentStatusOf is herdr's status of a pane's agent.
func agentStatusOf(p herdrcache.Pane) herdr.AgentStatus {
	if p.AgentStatus != "" {
		return p.AgentStatus
	}
	return p.Agent.AgentStatus
}

// waitFor marks the member as waiting for idle to do what (waitTerminating
// or waitUpdating) — before anything that decides whether it waits is
// read, so that a change of the agent or the messaging core that comes in
// between queues it again — and the reconcile's end (Manager.reconcile)
// records whether it still does.
func (r *memberReconcile) waitFor(what string) {
	r.waiting = what
	r.m.setWaiting(r.name, what)
}

// waited ends a wait phase: a member that does not wait (any more) is not
// counted as waiting.
func (r *memberReconcile) waited(wait *bool) {
	if !*wait {
		r.waiting = ""
	}
}

// setWaiting records what member name waits for idle to do ("" nothing)
// and keeps fleetd_members_waiting in step.
func (m *Manager) setWaiting(name, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.waiting[name]
	if old == what {
		return
	}
	if old != "" {
		m.metrics.waiting.WithLabelValues(old).Dec()
		delete(m.waiting, name)
	}
	if what != "" {
		m.metrics.waiting.WithLabelValues(what).Inc()
		m.waiting[name] = what
	}
}

// isWaiting reports whether member name waits for its agent to be idle.
func (m *Manager) isWaiting(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waiting[name] != ""
}

// followActivity queues every waiting member at each change of the
// messaging core, until ctx ends: a turn that ended or a queue that
// drained may be the idle moment one waits for.
func (m *Manager) followActivity(ctx context.Context, a Activity) {
	notify.Each(ctx, a, func() {
		m.mu.Lock()
		names := make([]string, 0, len(m.waiting))
		for n := range m.waiting {
			names = append(names, n)
		}
		m.mu.Unlock()
		for _, n := range names {
			m.queue.Add(n)
		}
	})
}

// noteAgentStatus records since when member name's agent works, for the
// waits' messages.
func (m *Manager) noteAgentStatus(name, status string) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if status != string(herdr.StatusWorking) {
		delete(m.working, name)
		return
	}
	if _, ok := m.working[name]; !ok {
		m.working[name] = now
	}
}

// workingSince is when member name's agent was first seen working in its
// current turn.
func (m *Manager) workingSince(name string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.working[name]
	return t, ok
}

// launchHash is a digest of what a launch of member m is made of: its spec
// without the fields a running agent takes as it is — spec.prompt (a
// changed prompt is delivered to it as a new first task), paused (its own
// phase), the grace period and update strategy (how, not what), and the
// placement (nodeName, nodeSelector: a move is a deletion here), and a
// worktree's cleanup (what a deletion does with it). Labels and
// annotations are not in the spec. Two definitions with the same hash run
// the same agent.
func launchHash(m *v1alpha1.Member) string {
	s := m.Spec
	s.Prompt, s.Paused, s.TerminationGracePeriod, s.UpdateStrategy = "", false, nil, nil
	s.NodeName, s.NodeSelector = "", nil
	if w := s.Worktree; w != nil {
		kept := *w
		kept.Cleanup = ""
		s.Worktree = &kept
	}
	data, err := json.Marshal(s)
	if err != nil {
		return "" // never: a MemberSpec always encodes; "" replaces on any change
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// clockTime writes a time for a person: the UTC time of day, with the
// date when it is not today's.
func (m *Manager) clockTime(t time.Time) string {
	t = t.UTC().Truncate(time.Second)
	if t.Format(time.DateOnly) == m.o.Clock.Now().UTC().Format(time.DateOnly) {
		return t.Format(time.TimeOnly) + " UTC"
	}
	return t.Format(time.DateTime) + " UTC"
}

// RunsPane reports whether a pane runs for member name on this node (an
// ownership record holds it): for a member the desired state no longer
// runs (deleted or paused), that its tab is closing once its agent is
// idle. It never blocks on herdr or the disk.
func (m *Manager) RunsPane(name string) bool {
	_, ok := m.own.get(name)
	return ok
}
