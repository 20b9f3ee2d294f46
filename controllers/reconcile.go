package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Reasons of events (for describe) that are not also condition reasons.
const (
	reasonAdopted          = "Adopted"
	reasonDeleted          = "Deleted"
	reasonRelaunched       = "Relaunched"
	reasonReplacing        = "Replacing"
	reasonStarted          = "Started"
	reasonWorkspaceCreated = "WorkspaceCreated"
)

// Why an owned pane went away, as passed to Options.OnPaneGone.
const (
	goneDeleted     = "deleted"
	gonePaused      = "paused"
	goneReplaced    = "replaced"
	goneAgentExited = "agent exited"
	gonePaneClosed  = "pane closed"
	goneStartFailed = "agent failed to start"
)

// herdr error codes that mean the spec itself cannot launch.
var invalidSpecCodes = map[string]bool{
	"unsupported_agent_kind": true, "invalid_agent_argument": true,
	"invalid_agent_name": true, "invalid_agent_timeout": true, "invalid_env": true,
}

// reconcile is the level-based heart of the controller: it compares the
// member's desired state with the herdr cache and takes the next step.
// It never decides that a pane is gone from a cache that is not synced.
func (m *Manager) reconcile(ctx context.Context, name string) (Result, error) {
	snap := m.store.Snapshot()
	mem, exists := snap.Members[name]
	rec, owned := m.own.get(name)

	if !exists {
		if !snap.Synced {
			return Result{}, nil // the manifests were never read: prune nothing
		}
		if owned {
			if !m.cache.Synced() {
				return Result{}, nil // closed once herdr is back
			}
			if err := m.closeOwned(ctx, rec, goneDeleted); err != nil {
				return Result{}, err
			}
			m.event(name, v1alpha1.EventNormal, reasonDeleted, fmt.Sprintf("member deleted; closed its tab %s", rec.TabID))
			m.closeEmptyWorkspace(ctx, rec)
		}
		if err := m.launcher.Forget(name); err != nil {
			m.log.Warn("launcher could not forget deleted member", "member", name, "err", err)
		}
		m.forgetMember(name)
		return Result{}, nil
	}

	b := m.statusOf(name, mem.Generation, mem.UID)
	rt := m.runtimeOf(name)
	manifestCondition(b, snap, name)
	if owned {
		b.st.Restarts = max(b.st.Restarts, rec.Restarts)
	}

	if mem.Spec.Paused {
		if owned {
			if !m.cache.Synced() {
				b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonHerdrUnavailable, "waiting for herdr to close the paused member's tab")
				m.writeStatus(name, b)
				return Result{}, nil
			}
			if err := m.closeOwned(ctx, rec, gonePaused); err != nil {
				return Result{}, err
			}
			m.event(name, v1alpha1.EventNormal, v1alpha1.ReasonPaused, fmt.Sprintf("member paused; closed its tab %s", rec.TabID))
		}
		*rt = runtime{}
		b.clearPane()
		b.st.LastError = ""
		b.set(v1alpha1.PhasePaused, cFalse(v1alpha1.ReasonPaused, "spec.paused is true"),
			cFalse(v1alpha1.ReasonPaused, "spec.paused is true"), cFalse(v1alpha1.ReasonAsExpected, ""))
		m.writeStatus(name, b)
		return Result{}, nil
	}

	for _, ref := range mem.References() {
		if snap.Referenced(ref) == nil {
			return m.unresolved(name, b, v1alpha1.NotFoundReason(ref.Kind),
				fmt.Sprintf("%s %q not found; create it or fix %s", strings.ToLower(ref.Kind), ref.Name, ref.Field))
		}
	}
	profile := snap.Profiles[mem.Spec.Profile]

	if !m.cache.Synced() {
		b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonHerdrUnavailable, "herdr is not reachable; nothing is recreated until it answers")
		m.writeStatus(name, b)
		return Result{}, nil
	}

	if owned && (rec.UID != mem.UID || rec.Generation != mem.Generation) {
		if snap.Stale != nil {
			// The old agent keeps running: a replacement could not be
			// created, and the new definition may not be this node's.
			return m.stale(name, b, snap)
		}
		if err := m.closeOwned(ctx, rec, goneReplaced); err != nil {
			return Result{}, err
		}
		m.event(name, v1alpha1.EventNormal, reasonReplacing,
			fmt.Sprintf("spec changed (generation %d → %d); closed tab %s to start a new one", rec.Generation, mem.Generation, rec.TabID))
		owned = false
		*rt = runtime{}
	}

	if owned {
		p, alive, rekeyed := m.ownedPane(name, rec)
		if rekeyed {
			// A pane adopted under a new terminal id whose agent is not
			// back yet, or is launching though fleetd started nothing, is
			// a relaunch (a handoff keeps a running agent running): the
			// evidence a fleetd that was not running to see herdr go away
			// still has. Nothing can have been typed into the new agent.
			// It is reported before the rekey: the cache watches the pane,
			// and passes the new agent's statuses on, only once the record
			// names its new terminal.
			if !p.HasAgent || (p.Agent.LaunchPending && rt.start == nil) {
				m.relaunched(name, p.PaneID, p.TerminalID)
			}
			var err error
			if rec, err = m.rekey(name, b, rt, rec, p); err != nil {
				return Result{}, err
			}
		}
		pane, agent := p.PaneInfo, p.Agent
		if alive && !p.HasAgent && rt.start == nil && (rekeyed || !rt.restoring.IsZero()) {
			return m.awaitRestore(ctx, name, mem, profile, b, rt, rec, pane)
		}
		rt.restoring = time.Time{}
		if st := rt.start; alive && st != nil && st.terminal == rec.TerminalID {
			if !st.launched {
				return m.launch(ctx, name, mem, profile, b, rt, rec)
			}
			if !p.HasAgent || agent.Name != name || !agent.InteractiveReady {
				return m.checkStart(ctx, name, mem, profile, b, rt, rec)
			}
		}
		if alive && p.HasAgent && agent.Name == name {
			if pane.PaneID != rec.PaneID || pane.TabID != rec.TabID || pane.WorkspaceID != rec.WorkspaceID {
				if b.st.PaneID == "" {
					m.event(name, v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("adopted pane %s (terminal %s)", pane.PaneID, pane.TerminalID))
				}
				rec.PaneID, rec.TabID, rec.WorkspaceID = pane.PaneID, pane.TabID, pane.WorkspaceID
				if err := m.own.put(rec); err != nil {
					return Result{}, err
				}
				m.signalOwned()
			} else if b.st.PaneID == "" {
				m.event(name, v1alpha1.EventNormal, reasonAdopted, fmt.Sprintf("adopted running pane %s (terminal %s)", pane.PaneID, pane.TerminalID))
			}
			observeSession(rt, p)
			if agent.LaunchPending && !agent.InteractiveReady {
				return m.checkStart(ctx, name, mem, profile, b, rt, rec) // adopted in the middle of a start
			}
			rt.start = nil
			if err := m.noteSession(&rec, agent, pane); err != nil {
				return Result{}, err
			}
			if b.st.Plan == nil {
				b.st.Plan = m.planOf(mem, snap)
			}
			return m.running(name, b, rt, rec, pane.AgentStatus), nil
		}
		why := fmt.Sprintf("pane %s closed", rec.PaneID)
		if alive {
			observeSession(rt, p)
			why = fmt.Sprintf("agent in pane %s exited", pane.PaneID)
			if err := m.closeOwned(ctx, rec, goneAgentExited); err != nil {
				return Result{}, err
			}
		} else if label, ok := m.tabLabel(rec.TabID); ok && label == TabLabelPrefix+name {
			// The pane is not the member's agent's any more (another
			// agent_session), but its tab is labelled for the member: close
			// it now, as the orphan sweep would, so the name is free.
			if err := m.closeOwned(ctx, rec, gonePaneClosed); err != nil {
				return Result{}, err
			}
		} else if err := m.dropOwned(rec, gonePaneClosed); err != nil {
			return Result{}, err
		}
		res := m.failed(name, mem, profile, b, rt, why)
		if !res.Requeue {
			return res, nil
		}
		if snap.Stale != nil {
			return m.stale(name, b, snap)
		}
		// The first failure in a row is recreated at once, here. A requeue
		// would pass the work queue's retry token bucket, which lets a mass
		// failure (a closed workspace, herdr losing its panes) recreate
		// only 10 members a second after the first 100. Later failures
		// wait their backoff: failed returns RequeueAfter for them.
		return m.create(ctx, name, mem, profile, snap, b, rt)
	}

	if rt.failedGen == mem.Generation && rt.failedProfile == profile {
		m.writeStatus(name, b)
		return Result{}, nil // restartPolicy Never or an unlaunchable spec: wait for a change
	}
	if now := m.o.Clock.Now(); now.Before(rt.nextAttempt) {
		m.writeStatus(name, b)
		return Result{RequeueAfter: rt.nextAttempt.Sub(now)}, nil
	}
	if snap.Stale != nil {
		return m.stale(name, b, snap)
	}
	return m.create(ctx, name, mem, profile, snap, b, rt)
}

// stale holds the creation of a member's pane while the store cannot
// confirm that the snapshot is the current desired state (etcd unreachable
// or without quorum): the member may be bound to another node by now, and
// a pane created here would be its second. What runs keeps running, as
// with herdr unavailable; the store's return changes the snapshot, which
// enqueues the member again (changedMembers), and the member looks again
// after staleRecheck in case that change went by unseen (a reconcile that
// read the stale snapshot after the watcher had already read a current
// one).
func (m *Manager) stale(name string, b *statusBuilder, snap *store.Snapshot) (Result, error) {
	msg := snap.Stale.Error() + "; creating no pane until the desired state is confirmed (another node may run the member by now)"
	b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonStoreUnavailable, msg)
	b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionFalse, v1alpha1.ReasonStoreUnavailable, msg)
	m.writeStatus(name, b)
	return Result{RequeueAfter: staleRecheck}, nil
}

// staleRecheck is how soon a member held by a stale snapshot is looked at
// again whatever else happens.
const staleRecheck = 5 * time.Second

// planOf resolves an adopted member's plan rows, if the launcher can.
func (m *Manager) planOf(mem *v1alpha1.Member, snap *store.Snapshot) []v1alpha1.PlanRow {
	pl, ok := m.launcher.(launch.Planner)
	if !ok {
		return nil
	}
	rows, err := pl.Plan(mem, snap.Tenants)
	if err != nil {
		return nil
	}
	return rows
}

// manifestCondition reports whether the member's definition parses. A
// source that did not answer (etcd) is Unknown, in the store's words (it
// names the source and says the last state read stays in effect); a
// manifests directory gone or unreadable is False.
func manifestCondition(b *statusBuilder, snap *store.Snapshot, name string) {
	switch err := snap.Unreadable; {
	case errors.Is(err, store.ErrUnavailable):
		b.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionUnknown, v1alpha1.ReasonStoreUnavailable,
			err.Error())
		return
	case err != nil:
		b.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionFalse, v1alpha1.ReasonDirectoryMissing,
			"manifests directory unreadable; running on the last definition read: "+err.Error())
		return
	}
	if errs := snap.ErrorsOf(store.Key{Kind: v1alpha1.KindMember, Name: name}); len(errs) > 0 {
		msg := errs[0].Error()
		if len(errs) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
		}
		b.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionFalse, v1alpha1.ReasonManifestError,
			msg+"; running on the file's last good definition")
		return
	}
	b.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionTrue, v1alpha1.ReasonManifestParsed, "")
}

// unresolved records a spec problem that only a change can fix. A pane that
// is already running is left alone; nothing is retried until the member or
// the object it references changes (the store enqueues it then).
func (m *Manager) unresolved(name string, b *statusBuilder, reason, msg string) (Result, error) {
	b.st.LastError = msg
	b.set(v1alpha1.PhasePending, cFalse(reason, msg), cFalse(reason, msg), cFalse(v1alpha1.ReasonAsExpected, ""))
	m.writeStatus(name, b)
	return Result{}, nil
}

// running writes the status of a member whose agent runs, and schedules
// the reset of its failure count once it has run long enough.
func (m *Manager) running(name string, b *statusBuilder, rt *runtime, rec Ownership, agentStatus herdr.AgentStatus) Result {
	var res Result
	now := m.o.Clock.Now()
	if rt.failures > 0 {
		if stable := rec.StartedAt.Add(m.o.StableAfter); now.Before(stable) {
			res.RequeueAfter = stable.Sub(now)
		} else {
			rt.failures, rt.lastError = 0, ""
		}
	}
	b.setPane(rec)
	b.st.AgentStatus = string(agentStatus)
	if rt.failures >= m.o.DegradedAfter {
		msg := fmt.Sprintf("%d failures in a row; last: %s", rt.failures, rt.lastError)
		b.set(v1alpha1.PhaseDegraded, cTrue(v1alpha1.ReasonAgentReady, "agent is running"),
			cFalse(v1alpha1.ReasonCrashLoop, msg), cTrue(v1alpha1.ReasonCrashLoop, msg))
	} else {
		b.set(v1alpha1.PhaseReady, cTrue(v1alpha1.ReasonAgentReady, "agent is running"),
			cFalse(v1alpha1.ReasonAgentReady, "agent is running"), cFalse(v1alpha1.ReasonAsExpected, ""))
		b.st.LastError = ""
	}
	m.writeStatus(name, b)
	return res
}

func degradedCond(rt *runtime, after int) [3]string {
	if rt.failures >= after {
		return cTrue(v1alpha1.ReasonCrashLoop, fmt.Sprintf("%d failures in a row; last: %s", rt.failures, rt.lastError))
	}
	return cFalse(v1alpha1.ReasonAsExpected, "")
}

// failed handles a pane that closed or an agent that exited or never became
// ready: recreate per restartPolicy after an exponential backoff (the first
// recreation is immediate), counting restarts; Degraded after DegradedAfter
// failures in a row; never a tight loop.
func (m *Manager) failed(name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, why string) Result {
	m.resumeFailed(name, rt, why)
	rt.failures++
	rt.lastError = why
	rt.start = nil
	b.clearPane()
	b.st.LastError = why
	if p.Spec.RestartPolicy == v1alpha1.RestartNever {
		rt.failedGen, rt.failedProfile = mem.Generation, p
		m.event(name, v1alpha1.EventWarning, v1alpha1.ReasonFailed, why+"; restartPolicy is Never, not recreating")
		b.set(v1alpha1.PhaseFailed, cFalse(v1alpha1.ReasonFailed, why), cFalse(v1alpha1.ReasonFailed, "restartPolicy is Never"), cTrue(v1alpha1.ReasonFailed, why))
		m.writeStatus(name, b)
		return Result{}
	}
	var delay time.Duration
	if rt.failures > 1 {
		delay = backoff(m.o.RestartBackoff, rt.failures-2, m.o.MaxRestartDelay)
	}
	rt.nextAttempt = m.o.Clock.Now().Add(delay)
	b.st.Restarts++
	m.metrics.restarts.Inc()
	msg := fmt.Sprintf("%s; recreating (restart %d)", why, b.st.Restarts)
	if delay > 0 {
		msg = fmt.Sprintf("%s; recreating in %s (restart %d)", why, delay, b.st.Restarts)
	}
	m.event(name, v1alpha1.EventWarning, v1alpha1.ReasonBackOff, msg)
	phase := v1alpha1.PhaseStarting
	if rt.failures >= m.o.DegradedAfter {
		phase = v1alpha1.PhaseDegraded
	}
	b.set(phase, cFalse(v1alpha1.ReasonBackOff, msg), cTrue(v1alpha1.ReasonBackOff, msg), degradedCond(rt, m.o.DegradedAfter))
	m.writeStatus(name, b)
	if delay == 0 {
		return Result{Requeue: true}
	}
	return Result{RequeueAfter: delay}
}

// create makes the member's dedicated tab (recording ownership before the
// agent starts) and issues agent.start; it never waits for the agent to be
// ready (see launch and checkStart).
func (m *Manager) create(ctx context.Context, name string, mem *v1alpha1.Member, p *v1alpha1.Profile, snap *store.Snapshot, b *statusBuilder, rt *runtime) (Result, error) {
	cwd := mem.Spec.Cwd
	if cwd == "" {
		cwd = p.Spec.Cwd
	}
	// Resolve the plan before touching herdr: a member that cannot launch
	// (tenant or credential missing) must not leave a workspace behind.
	spec, err := m.prepare(ctx, name, mem, p, snap, rt)
	if err != nil {
		var r interface{ Reason() string }
		if errors.As(err, &r) {
			return m.unresolved(name, b, r.Reason(), err.Error())
		}
		return Result{}, fmt.Errorf("prepare launch of %q: %w", name, err)
	}
	undo := func() {
		if spec.Cleanup != nil {
			if err := spec.Cleanup(); err != nil {
				m.log.Warn("launch cleanup failed", "member", name, "err", err)
			}
		}
	}
	ws, err := m.ensureWorkspace(ctx, name, mem.Spec.Workspace, cwd)
	if err != nil {
		undo()
		return m.createFailed(name, mem, p, b, rt, err)
	}

	m.ownMu.RLock()
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	created, err := m.herdr.CreateTab(cctx, herdr.TabCreateParams{
		WorkspaceID: ws.WorkspaceID, CWD: cwd, Label: TabLabelPrefix + name, Env: spec.Env,
	})
	cancel()
	if err != nil {
		m.ownMu.RUnlock()
		undo()
		if herdr.IsCode(err, "workspace_not_found") {
			m.cache.WorkspaceClosed(ws.WorkspaceID)
		}
		return m.createFailed(name, mem, p, b, rt, fmt.Errorf("create tab for %q in workspace %s: %w", name, ws.WorkspaceID, err))
	}
	rec := Ownership{
		Member: name, UID: mem.UID, Generation: mem.Generation,
		TerminalID: created.RootPane.TerminalID, PaneID: created.RootPane.PaneID,
		TabID: created.Tab.TabID, WorkspaceID: ws.WorkspaceID, Token: spec.Token,
		CreatedWorkspace: m.createdWorkspace(ws.WorkspaceID),
		Restarts:         b.st.Restarts, StartedAt: m.o.Clock.Now(),
	}
	m.cache.TabCreated(*created)
	err = m.own.put(rec)
	m.ownMu.RUnlock()
	if err != nil {
		// An untracked pane would be a duplicate after a restart: close it.
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		_ = m.herdr.CloseTab(cctx, rec.TabID)
		cancel()
		m.cache.TabClosed(rec.TabID)
		undo()
		return Result{}, err
	}
	m.signalOwned()
	if err := m.launcher.Bind(spec, rec.PaneID, rec.TerminalID); err != nil {
		m.log.Warn("launcher could not bind the launch to its pane", "member", name, "pane", rec.PaneID, "err", err)
	}

	rt.start = &starting{args: spec.Args, terminal: rec.TerminalID}
	b.setPane(rec)
	b.st.Plan = spec.Plan
	m.launching(b, rt, spec)
	return m.launch(ctx, name, mem, p, b, rt, rec)
}

// startupTimeout is how long the profile's agent may take to be ready.
func startupTimeout(p *v1alpha1.Profile) time.Duration {
	if t := p.Spec.StartupTimeout.Duration; t > 0 {
		return t
	}
	return v1alpha1.DefaultStartupTimeout
}

// invalidSpec reports whether herdr refused a launch for a reason only a
// change of the spec or profile can fix.
func invalidSpec(err error) bool {
	var he *herdr.Error
	return errors.As(err, &he) && invalidSpecCodes[he.Code]
}

// unlaunchable marks a member Failed for a spec herdr refuses; it is not
// retried until the member or its profile changes.
func (m *Manager) unlaunchable(name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, err error) Result {
	rt.failedGen, rt.failedProfile = mem.Generation, p
	rt.start = nil
	m.event(name, v1alpha1.EventWarning, v1alpha1.ReasonInvalidSpec, err.Error())
	b.clearPane()
	b.st.LastError = err.Error()
	b.set(v1alpha1.PhaseFailed, cFalse(v1alpha1.ReasonInvalidSpec, err.Error()), cFalse(v1alpha1.ReasonInvalidSpec, err.Error()), cTrue(v1alpha1.ReasonInvalidSpec, err.Error()))
	m.writeStatus(name, b)
	return Result{}
}

// createFailed handles a failed workspace.create or tab.create: herdr
// unreachable waits for it silently; a refused spec fails for good; any
// other refusal is shown in the status and retried with the queue's
// backoff.
func (m *Manager) createFailed(name string, mem *v1alpha1.Member, p *v1alpha1.Profile, b *statusBuilder, rt *runtime, err error) (Result, error) {
	if herdrcache.Unreachable(err) {
		return Result{}, m.callFailed(err)
	}
	if invalidSpec(err) {
		return m.unlaunchable(name, mem, p, b, rt, err), nil
	}
	b.st.LastError = err.Error()
	b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionFalse, v1alpha1.ReasonHerdrError, err.Error())
	m.writeStatus(name, b)
	return Result{}, err
}

// ensureWorkspace finds the workspace labelled label, creating it if none.
func (m *Manager) ensureWorkspace(ctx context.Context, member, label, cwd string) (herdr.WorkspaceInfo, error) {
	m.wsMu.Lock()
	defer m.wsMu.Unlock()
	if w, ok := m.cache.WorkspaceByLabel(label); ok {
		return w, nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	created, err := m.herdr.CreateWorkspace(cctx, herdr.WorkspaceCreateParams{Label: label, CWD: cwd})
	if err != nil {
		return herdr.WorkspaceInfo{}, fmt.Errorf("create workspace %q: %w", label, err)
	}
	m.cache.WorkspaceCreated(*created)
	m.created[created.Workspace.WorkspaceID] = CreatedWorkspace{Label: label, RootTabID: created.Tab.TabID}
	m.event(member, v1alpha1.EventNormal, reasonWorkspaceCreated, fmt.Sprintf("created herdr workspace %q (%s)", label, created.Workspace.WorkspaceID))
	return created.Workspace, nil
}

// createdWorkspace returns what fleetd knows of a workspace it created.
func (m *Manager) createdWorkspace(id string) *CreatedWorkspace {
	m.wsMu.Lock()
	defer m.wsMu.Unlock()
	if w, ok := m.created[id]; ok {
		return &w
	}
	return nil
}

// closeEmptyWorkspace closes the workspace of a deleted member's closed tab
// when fleetd created it, no other member's pane is recorded in it, and it
// holds nothing but the tab herdr created with it (one pane): a workspace
// someone opened tabs in is kept. herdr refusing is logged, not retried.
func (m *Manager) closeEmptyWorkspace(ctx context.Context, rec Ownership) {
	m.wsMu.Lock()
	defer m.wsMu.Unlock()
	cw, ok := m.created[rec.WorkspaceID]
	if !ok {
		return
	}
	for _, r := range m.own.all() {
		if r.WorkspaceID == rec.WorkspaceID {
			return
		}
	}
	if w, ok := m.cache.WorkspaceByLabel(cw.Label); !ok || w.WorkspaceID != rec.WorkspaceID {
		return // gone, or not the workspace fleetd created under this id
	}
	// Ask herdr, not the cache: the cache does not follow tabs and panes
	// someone else opens, and closing a workspace closes them all.
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	tabs, err := m.herdr.ListTabs(cctx, rec.WorkspaceID)
	if err != nil {
		m.log.Debug("could not list the tabs of a workspace fleetd created", "workspace", rec.WorkspaceID, "err", m.callFailed(err))
		return
	}
	for _, t := range tabs {
		if t.TabID != cw.RootTabID || t.PaneCount > 1 {
			return
		}
	}
	err = m.herdr.CloseWorkspace(cctx, rec.WorkspaceID)
	if herdr.IsCode(err, "workspace_group_close_required") {
		// Someone opened linked worktree workspaces from it (herdr 0.9):
		// they are not fleetd's, and close_group would close them too.
		m.log.Info("left the workspace fleetd created open: linked worktree workspaces were opened from it",
			"workspace", rec.WorkspaceID, "label", cw.Label, "lastMember", rec.Member)
		delete(m.created, rec.WorkspaceID)
		return
	}
	if err != nil && !herdr.IsCode(err, "workspace_not_found") {
		m.log.Warn("could not close the empty workspace fleetd created", "workspace", rec.WorkspaceID, "label", cw.Label, "err", m.callFailed(err))
		return
	}
	delete(m.created, rec.WorkspaceID)
	m.cache.WorkspaceClosed(rec.WorkspaceID)
	m.log.Info("closed the empty workspace fleetd created", "workspace", rec.WorkspaceID, "label", cw.Label, "lastMember", rec.Member)
}

// closeOwned closes a member's tab and drops its ownership record. The
// record's tab is closed even when the cache does not know it: a cache that
// missed the tab must not leave it open until a resync sweeps it. A tab
// that is already gone is fine; herdr being unreachable is an error and
// the record stays. A tab the cache shows under another label is not the
// member's any more (herdr reuses ids after a restart) and is left open.
func (m *Manager) closeOwned(ctx context.Context, rec Ownership, reason string) error {
	if label, known := m.tabLabel(rec.TabID); known && label != TabLabelPrefix+rec.Member {
		m.log.Info("not closing a recorded tab that is now someone else's", "member", rec.Member, "tab", rec.TabID, "label", label)
	} else if rec.TabID != "" {
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		err := m.herdr.CloseTab(cctx, rec.TabID)
		cancel()
		if err != nil && !herdr.IsCode(err, "tab_not_found") {
			return m.callFailed(fmt.Errorf("close tab %s of %q: %w", rec.TabID, rec.Member, err))
		}
		m.cache.TabClosed(rec.TabID)
	}
	return m.dropOwned(rec, reason)
}

// tabLabel returns the label the cache shows for a tab.
func (m *Manager) tabLabel(tabID string) (string, bool) {
	t, ok := m.cache.Tab(tabID)
	return t.Label, ok
}

// dropOwned forgets a pane that is gone.
func (m *Manager) dropOwned(rec Ownership, reason string) error {
	if err := m.launcher.Release(launch.Pane{Member: rec.Member, PaneID: rec.PaneID, TerminalID: rec.TerminalID, Token: rec.Token}); err != nil {
		m.log.Warn("launcher could not release a closed pane", "member", rec.Member, "pane", rec.PaneID, "err", err)
	}
	if err := m.own.drop(rec.Member); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.relaunches, rec.PaneID) // the pane is not the member's any more
	m.mu.Unlock()
	m.signalOwned()
	if m.o.OnPaneGone != nil {
		m.o.OnPaneGone(rec.Member, rec.PaneID, reason)
	}
	return nil
}

// callFailed notes a failed herdr call: an unreachable herdr makes the
// cache unsynced (nothing is decided from it) and reconnect.
func (m *Manager) callFailed(err error) error {
	if herdrcache.Unreachable(err) {
		m.cache.Invalidate(err)
	}
	return err
}

// signalOwned tells the cache that the owned panes (the ones it watches for
// the Manager) changed.
func (m *Manager) signalOwned() { m.cache.Rewatch() }
