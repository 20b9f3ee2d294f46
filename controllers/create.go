package controllers

import (
	"context"
	"errors"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/rollout"
)

// create decides when a member without a pane gets one, and makes it:
// never from a stale snapshot (stale) — checked first, so that the hold is
// what the status says whatever the member's failures and backoff; not
// before the member or its profile changes when it failed for good
// (restartPolicy Never, a spec herdr cannot launch); not for a member
// whose prune is held (createGate) — before the backoff, for the same
// reason as the stale hold; not before its restart backoff ran out
// (failed set it); else now (createPane). failed, which hands a member
// on to create, leaves the status of a held member to it (createHold).
func (r *memberReconcile) create() (Result, error) {
	if r.snap.Stale != nil {
		return r.stale()
	}
	if rare := r.rt.peek(); rare.failedGen == r.mem.Generation && rare.failedProfile == r.profile {
		r.write()
		return Result{}, nil // wait for a change
	}
	if r.createGate() { // prune.go
		return Result{}, nil
	}
	if now, next := r.m.o.Clock.Now(), r.rt.peek().nextAttempt; now.Before(next) {
		r.write()
		return Result{RequeueAfter: next.Sub(now)}, nil
	}
	return r.createPane()
}

// createHold says why create holds the member without a pane whatever
// its backoff — "" when it does not: a stale snapshot or a held prune.
func (r *memberReconcile) createHold() string {
	if r.snap.Stale != nil {
		return "until the desired state is confirmed"
	}
	if _, held := r.snap.PruneHeld[r.name]; held {
		return "while its prune is held"
	}
	return ""
}

// createPane makes the member's dedicated tab and records it (the record
// durable before the agent starts: launch waits for it); agent.start is
// the member's next reconcile, which never waits for the agent to be ready
// (see launch and checkStart).
func (r *memberReconcile) createPane() (Result, error) {
	name, mem, p := r.name, r.mem, r.profile
	if err := r.updated(); err != nil {
		return Result{}, err
	}
	cwd := mem.Spec.Cwd
	if cwd == "" {
		cwd = p.Spec.Cwd
	}
	// Resolve the plan before touching herdr: a member that cannot launch
	// (tenant or credential missing) must not leave a workspace behind.
	spec, err := r.prepare()
	if err != nil {
		var reason interface{ Reason() string }
		if errors.As(err, &reason) {
			r.unresolved(reason.Reason(), err.Error())
			return Result{}, nil
		}
		return Result{}, fmt.Errorf("prepare launch of %q: %w", name, err)
	}
	undo := func() {
		if spec.Cleanup != nil {
			if err := spec.Cleanup(); err != nil {
				r.m.log.Warn("launch cleanup failed", "member", name, "err", err)
			}
		}
	}
	ws, cwd, wt, err := r.workspaceFor(cwd) // worktree.go
	if err != nil {
		undo()
		return r.createFailed(err)
	}

	r.m.ownMu.RLock()
	cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
	created, err := r.m.herdr.CreateTab(cctx, herdr.TabCreateParams{
		WorkspaceID: ws.WorkspaceID, CWD: cwd, Label: TabLabelPrefix + name, Env: spec.Env,
	})
	cancel()
	if err != nil {
		r.m.ownMu.RUnlock()
		undo()
		if herdr.IsCode(err, "workspace_not_found") {
			r.m.cache.WorkspaceClosed(ws.WorkspaceID)
		}
		return r.createFailed(fmt.Errorf("create tab for %q in workspace %s: %w", name, ws.WorkspaceID, err))
	}
	rec := Ownership{
		Member: name, UID: mem.UID, Generation: mem.Generation, Launch: r.m.launchHashOf(mem), Refs: r.refs(), Target: rollout.Target(p),
		TerminalID: created.RootPane.TerminalID, PaneID: created.RootPane.PaneID,
		TabID: created.Tab.TabID, WorkspaceID: ws.WorkspaceID, Token: spec.Token,
		CreatedWorkspace: r.m.createdWorkspace(ws.WorkspaceID), Worktree: wt,
		Restarts: r.b.st.Restarts, StartedAt: r.m.o.Clock.Now(),
	}
	r.m.cache.TabCreated(*created)
	durable, err := r.m.own.stage(rec)
	r.m.ownMu.RUnlock()
	if err != nil {
		// An untracked pane would be a duplicate after a restart: close it.
		cctx, cancel := context.WithTimeout(r.ctx, r.m.o.CallTimeout)
		_ = r.m.herdr.CloseTab(cctx, rec.TabID)
		cancel()
		r.m.cache.TabClosed(rec.TabID)
		undo()
		return Result{}, err
	}
	r.rec, r.owned = rec, true
	r.m.signalOwned()
	if err := r.m.launcher.Bind(spec, rec.PaneID, rec.TerminalID); err != nil {
		r.m.log.Warn("launcher could not bind the launch to its pane", "member", name, "pane", rec.PaneID, "err", err)
	}

	args, plan := r.m.shareLaunch(spec.Args, spec.Plan)
	r.rt.start = &starting{terminal: rec.TerminalID, launch: &pendingLaunch{args: args, plan: plan, durable: durable}}
	r.launching(spec)
	// The agent starts in the member's next reconcile (ownedPane: a pane
	// whose start is not launched), behind the members queued meanwhile:
	// a mass creation or repair asks herdr for every tab first. The
	// status shows the pane from its start on (launch).
	return Result{Requeue: true}, nil
}

// invalidSpec reports whether herdr refused a launch for a reason only a
// change of the spec or profile can fix.
func invalidSpec(err error) bool {
	var he *herdr.Error
	return errors.As(err, &he) && invalidSpecCodes[he.Code]
}

// unlaunchable marks a member Failed for a spec herdr refuses; it is not
// retried until the member or its profile changes.
func (r *memberReconcile) unlaunchable(err error) Result {
	r.replacementFailed(err.Error()) // rollout.go
	rare := r.rt.edit()
	rare.failedGen, rare.failedProfile = r.mem.Generation, r.profile
	r.rt.start = nil
	r.event(v1alpha1.EventWarning, v1alpha1.ReasonInvalidSpec, err.Error())
	r.b.clearPane()
	r.b.st.LastError = err.Error()
	r.b.set(v1alpha1.PhaseFailed, cFalse(v1alpha1.ReasonInvalidSpec, err.Error()), cFalse(v1alpha1.ReasonInvalidSpec, err.Error()), cTrue(v1alpha1.ReasonInvalidSpec, err.Error()))
	r.write()
	return Result{}
}

// createFailed handles a failed workspace.create or tab.create, or a
// worktree that could not be had: herdr unreachable waits for it silently;
// a worktree problem is shown as such (worktreeFailure); a refused spec
// fails for good; any other refusal is shown in the status and retried
// with the queue's backoff.
func (r *memberReconcile) createFailed(err error) (Result, error) {
	if we := (*worktreeError)(nil); errors.As(err, &we) {
		return r.worktreeFailure(we)
	}
	if herdrcache.Unreachable(err) {
		return Result{}, r.m.callFailed(err)
	}
	if invalidSpec(err) {
		return r.unlaunchable(err), nil
	}
	r.b.st.LastError = err.Error()
	r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionFalse, v1alpha1.ReasonHerdrError, err.Error())
	r.write()
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
	m.created[created.Workspace.WorkspaceID] = &CreatedWorkspace{Label: label, RootTabID: created.Tab.TabID}
	m.event(member, v1alpha1.EventNormal, reasonWorkspaceCreated, fmt.Sprintf("created herdr workspace %q (%s)", label, created.Workspace.WorkspaceID))
	return created.Workspace, nil
}

// createdWorkspace returns what fleetd knows of a workspace it created:
// one value every record of a member in the workspace shares, which
// nothing changes.
func (m *Manager) createdWorkspace(id string) *CreatedWorkspace {
	m.wsMu.Lock()
	defer m.wsMu.Unlock()
	return m.created[id] // nil if fleetd did not create it
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
