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
// member's desired state with the herdr cache and takes the next step, one
// phase after the other, each a method of [memberReconcile] that either
// decides the outcome or lets the next one go on. It never decides that a
// pane is gone from a cache that is not synced.
func (m *Manager) reconcile(ctx context.Context, name string) (Result, error) {
	r := m.newReconcile(ctx, name)
	place := m.queuePlace(name)
	res, err := r.run()
	r.publishLater()
	if r.rt != nil {
		r.rt.settle()
	}
	m.setWaiting(name, r.waiting)
	if m.queuePlace(name) != place {
		m.turnFreed("") // the members waiting behind it look again (rollout.go)
	}
	if !r.requeueBy.IsZero() {
		if d := max(r.requeueBy.Sub(m.o.Clock.Now()), time.Millisecond); res.RequeueAfter == 0 || d < res.RequeueAfter {
			res.RequeueAfter = d
		}
	}
	return res, err
}

// run takes the phases in order: what was asked of the member (forces,
// restarts), deleted, pause, resolve (references, the herdr gate), update
// (a newer definition or a restart: taken as it is, waiting for idle, or
// replaced, with the store gate), the owned pane (owned.go) and create
// (the backoff and store gates; create.go).
func (r *memberReconcile) run() (Result, error) {
	if err := r.takeRequests(); err != nil {
		return Result{}, err
	}
	if r.mem == nil {
		return r.deleted()
	}
	if r.lose != nil {
		return r.fence()
	}
	if r.mem.Spec.Paused {
		return r.pause()
	}
	if err := r.keep(); err != nil {
		return Result{}, err
	}
	if !r.resolve() {
		return Result{}, nil
	}
	if err := r.keepRefs(); err != nil { // rollout.go
		return Result{}, err
	}
	if r.owned && r.outdated() {
		if res, done, err := r.update(); done {
			return res, err
		}
	}
	if r.owned {
		return r.ownedPane()
	}
	return r.create()
}

// memberReconcile is one reconcile of one member: what every phase reads
// and edits, so that no phase passes it on as arguments. It lives for one
// call of [Manager.reconcile] on one worker and is never shared.
type memberReconcile struct {
	m    *Manager
	ctx  context.Context
	name string
	snap *store.Snapshot
	// mem is the member as the snapshot declares it; nil once it was
	// deleted.
	mem *v1alpha1.Member
	// profile is the member's Profile, from resolve on.
	profile *v1alpha1.Profile
	// b is the member's status being built; nil for a deleted member
	// this fleetd knows nothing of (no status, no pane).
	b  *statusBuilder
	rt *runtime
	// rec is the record of the pane fleetd runs for the member, if owned.
	rec   Ownership
	owned bool
	// memo is the member's memory (memory.go) as read at the start and
	// after every change (remember); never edited in place.
	memo memory
	// waiting is what the member waits for idle to do (graceful.go), ""
	// nothing; updateWaits says its UpToDate condition is False for it.
	waiting     string
	updateWaits bool
	// release ends the messaging core's hold on the member's agent taken
	// for a replacement (graceful.go: hold); nil when none is held.
	release func()
	// requeueBy, if set, is when the member is looked at again at the
	// latest (a wait's deadline).
	requeueBy time.Time
	// lose is why the fence closes the member's tab now (fence.go).
	lose error
	// later is what the reconcile publishes of a pane it found gone
	// (afterward), in order; traced, whether ctx carries the herdr trace
	// that publishes it once a request is written.
	later  []func()
	traced bool
}

// newReconcile reads what one reconcile of name starts from: the desired
// state, the ownership record, the member's memory and, for a member that
// exists (or is still closing), its status (with the ManifestValid
// condition) and restart bookkeeping.
func (m *Manager) newReconcile(ctx context.Context, name string) *memberReconcile {
	snap := m.store.Snapshot()
	r := &memberReconcile{m: m, ctx: ctx, name: name, snap: snap, mem: snap.Members[name], memo: m.memory.get(name)}
	r.rec, r.owned = m.own.get(name)
	if r.mem == nil {
		if obj := r.deletedObject(); obj != nil {
			r.b = m.statusOf(obj)
		}
		return r
	}
	if m.o.Fence != nil {
		// A hold is a stale snapshot to every phase: nothing starts.
		var hold error
		if hold, r.lose = m.o.Fence.Check(r.mem); hold != nil && snap.Stale == nil {
			held := *snap
			held.Stale = hold
			r.snap = &held
		}
	}
	r.b = m.statusOf(r.mem)
	r.rt = m.runtimeOf(name)
	if r.lose == nil {
		if rare := r.rt.rare; rare != nil {
			rare.fencePaused = "" // confirmed: a later fencing interrupts again
		}
	}
	r.b.st.Worktree = m.wt.status(name) // the last read of its worktree (worktree.go)
	r.manifestConditions()              // prune.go
	if r.owned {
		r.b.st.Restarts = max(r.b.st.Restarts, r.rec.Restarts)
	}
	return r
}

// deletedObject is what a deleted member is listed as while its tab
// closes: the object its status was last written for, else (after a
// restart of fleetd) the one its graceful close remembers, else, for a
// pane fleetd runs, the little its ownership record knows. nil when there
// is nothing to list.
func (r *memberReconcile) deletedObject() *v1alpha1.Member {
	if obj := r.m.lastObject(r.name); obj != nil {
		return obj
	}
	if c := r.memo.Close; c != nil && c.Member != nil {
		return c.Member
	}
	if !r.owned {
		return nil
	}
	return &v1alpha1.Member{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: r.name, UID: r.rec.UID, Generation: r.rec.Generation},
	}
}

// write stores the status built so far (if it changed). A declared
// member's UpToDate condition is True unless its replacement waits
// (replaceWhenIdle, awaitTurn); status.rollout names the profile whose
// rollout replaces it now.
func (r *memberReconcile) write() {
	if r.mem != nil && !r.updateWaits {
		r.b.cond(v1alpha1.ConditionUpToDate, v1alpha1.ConditionTrue, v1alpha1.ReasonAsExpected, "")
	}
	r.b.st.Rollout = replacing(r.memo) // counted by every node (rollout.go)
	r.b.st.ProfileTarget = ""
	if r.owned {
		r.b.st.ProfileTarget = r.rec.Target
	}
	r.b.reconciled = true
	r.publishLater()
	r.m.writeStatus(r.name, r.b)
}

// event records an event of the member.
func (r *memberReconcile) event(typ, reason, msg string) {
	r.publishLater()
	r.m.event(r.name, typ, reason, msg)
}

// afterward defers fn, which publishes what the reconcile learnt of a pane
// that is gone (its record dropped and its token revoked, the BackOff
// event, the status), until the reconcile's next herdr request is written
// — the replacement's tab.create, which then does not wait for it — or it
// publishes anything else, or it ends, whichever comes first. Those steps
// were 20–30 µs of the 50–70 µs fleetd took from a pane's exit event to
// its replacement's request (temporary trace points in
// BenchmarkDriftRepair).
// The trace goes on ctx at the first deferral only: a reconcile that
// defers nothing (nearly all) makes no context for it.
func (r *memberReconcile) afterward(fn func()) {
	if !r.traced {
		r.ctx, r.traced = herdr.WithClientTrace(r.ctx, &herdr.ClientTrace{WroteRequest: r.publishLater}), true
	}
	r.later = append(r.later, fn)
}

// publishLater runs what afterward deferred, in order. It is the
// reconcile's herdr trace hook (afterward), so it runs on the
// reconcile's own goroutine: every herdr call of a reconcile is made from
// its worker, with its ctx.
func (r *memberReconcile) publishLater() {
	later := r.later
	r.later = nil // what runs now finds nothing left (write publishes first)
	for _, fn := range later {
		fn()
	}
}

// deleted decides for a member deleted from the desired state: its tab is
// closed once its agent is idle (closeWhenIdle; the member listed as
// Terminating meanwhile and until herdr confirmed the close), then its
// workspace if fleetd created it and it is now empty, and the member is
// forgotten. Nothing is pruned before the manifests were read, and nothing
// is closed while herdr is not in sync: the member stays Terminating until
// it is.
func (r *memberReconcile) deleted() (Result, error) {
	if !r.snap.Synced {
		return Result{}, nil // the manifests were never read: prune nothing
	}
	if res, hold := r.pruneGate(); hold { // prune.go
		return res, nil
	}
	if r.owned {
		if wait, res, err := r.closeWhenIdle(goneDeleted, "the member was deleted"); wait || err != nil {
			return res, err
		}
		if closed, err := r.closeTab(goneDeleted, "the member was deleted"); !closed {
			return Result{}, err // retried, or closed once herdr is back
		}
		r.event(v1alpha1.EventNormal, reasonDeleted, fmt.Sprintf("member deleted; closed its tab %s", r.rec.TabID))
		r.m.closeEmptyWorkspace(r.ctx, r.rec)
	}
	r.m.releaseWorktree(r.ctx, r.name) // kept, or removed when that loses nothing (worktree.go)
	if err := r.m.launcher.Forget(r.name); err != nil {
		r.m.log.Warn("launcher could not forget deleted member", "member", r.name, "err", err)
	}
	r.m.forgetMember(r.name)
	return Result{}, nil
}

// pause decides for a paused member: its tab is closed once its agent is
// idle (closeWhenIdle; Terminating meanwhile and until herdr confirmed the
// close, which waits while herdr is not in sync) and it is Paused, its
// restart bookkeeping cleared; its memory (the agent's session) is kept
// for when it is unpaused.
func (r *memberReconcile) pause() (Result, error) {
	if r.owned {
		if wait, res, err := r.closeWhenIdle(gonePaused, "spec.paused is true"); wait || err != nil {
			return res, err
		}
		if closed, err := r.closeTab(gonePaused, "spec.paused is true"); !closed {
			return Result{}, err
		}
		r.event(v1alpha1.EventNormal, v1alpha1.ReasonPaused, fmt.Sprintf("member paused; closed its tab %s", r.rec.TabID))
	}
	if err := r.closed(); err != nil {
		return Result{}, err
	}
	r.rt.reset()
	r.b.clearPane()
	r.b.st.LastError = ""
	r.b.set(v1alpha1.PhasePaused, cFalse(v1alpha1.ReasonPaused, "spec.paused is true"),
		cFalse(v1alpha1.ReasonPaused, "spec.paused is true"), cFalse(v1alpha1.ReasonAsExpected, ""))
	r.write()
	return Result{}, nil
}

// terminating shows, in the status being built, that the member's tab is
// being closed and why: phase Terminating, Ready=False and
// Progressing=True with reason Terminating.
func (r *memberReconcile) terminating(why string) {
	msg := fmt.Sprintf("closing tab %s (pane %s): %s", r.rec.TabID, r.rec.PaneID, why)
	r.b.st.Phase = v1alpha1.PhaseTerminating
	r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionFalse, v1alpha1.ReasonTerminating, msg)
	r.b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionTrue, v1alpha1.ReasonTerminating, msg)
}

// closeTab closes the member's tab for reason (an Options.OnPaneGone
// reason) and drops its record, and reports whether it did. The status
// written first shows the member Terminating, and why, until herdr
// confirmed the close: a close herdr refuses or does not answer (err)
// leaves it so, and the member is retried; while herdr is not in sync
// nothing is closed, and Ready=Unknown (HerdrUnavailable) says so.
func (r *memberReconcile) closeTab(reason, why string) (closed bool, err error) {
	if !r.m.cache.Synced() {
		r.closeWaitsForHerdr(why)
		return false, nil // closed once herdr is back
	}
	if r.b != nil {
		r.terminating(why)
		r.write()
	}
	if err := r.m.closeOwned(r.ctx, r.rec, reason); err != nil {
		return false, err
	}
	r.owned = false
	return true, nil
}

// closeWaitsForHerdr shows, while herdr is not in sync, that the member's
// tab closes once it is (why: what it closes for): Terminating, with
// Ready=Unknown (HerdrUnavailable).
func (r *memberReconcile) closeWaitsForHerdr(why string) {
	if r.b == nil {
		return
	}
	r.terminating(why)
	r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonHerdrUnavailable,
		fmt.Sprintf("waiting for herdr to close tab %s: %s", r.rec.TabID, why))
	r.write()
}

// keep cancels a graceful close under way of a member that is declared
// and not paused again (deleted and declared again, or unpaused, before
// its agent was idle): its tab stays.
func (r *memberReconcile) keep() error {
	if r.memo.Close == nil {
		return nil
	}
	r.event(v1alpha1.EventNormal, reasonCloseCancelled, "the member is declared and not paused again before its tab closed; its tab stays")
	return r.closed()
}

// resolve finds the member's profile, and reports whether the reconcile
// goes on. It does not when an object the member references is missing
// (Ready=False with the reason; not retried until the member or that
// object changes) or when herdr is not in sync (Ready=Unknown,
// HerdrUnavailable: nothing is decided from a cache that does not show
// herdr).
func (r *memberReconcile) resolve() bool {
	for _, ref := range r.mem.References() {
		if r.snap.Referenced(ref) == nil {
			r.unresolved(v1alpha1.NotFoundReason(ref.Kind),
				fmt.Sprintf("%s %q not found; create it or fix %s", strings.ToLower(ref.Kind), ref.Name, ref.Field))
			return false
		}
	}
	r.profile = r.snap.Profiles[r.mem.Spec.Profile]
	if !r.m.cache.Synced() {
		r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonHerdrUnavailable, "herdr is not reachable; nothing is recreated until it answers")
		r.write()
		return false
	}
	return true
}

// specChanged reports whether the owned pane runs another definition of
// the member: an older generation, or an object of the same name that was
// deleted and declared again (another uid).
func (r *memberReconcile) specChanged() bool {
	return r.rec.UID != r.mem.UID || r.rec.Generation != r.mem.Generation
}

// replace closes the tab that runs an older definition of the member, or
// that is to restart (Terminating until herdr confirmed it), and reports
// whether it did; then the member's restart bookkeeping is cleared, it is
// Starting, and create makes the new tab (resuming the agent's session).
func (r *memberReconcile) replace() (bool, error) {
	old := r.rec
	why := fmt.Sprintf("spec changed (generation %d → %d)", old.Generation, r.mem.Generation)
	switch {
	case !r.ownChange():
		why = fmt.Sprintf("profile/%s's rollout", r.profile.Name)
	case !r.specChanged():
		why = "a restart was asked for"
	}
	if closed, err := r.closeTab(goneReplaced, why+"; a new tab replaces it"); !closed {
		return false, err
	}
	r.event(v1alpha1.EventNormal, reasonReplacing, fmt.Sprintf("%s; closed tab %s to start a new one", why, old.TabID))
	r.rt.reset()
	msg := fmt.Sprintf("closed tab %s of generation %d; starting generation %d", old.TabID, old.Generation, r.mem.Generation)
	r.b.clearPane()
	r.b.set(v1alpha1.PhaseStarting, cFalse(v1alpha1.ReasonStarting, msg), cTrue(v1alpha1.ReasonStarting, msg), degradedCond(r.rt, r.m.o.DegradedAfter))
	r.write()
	return true, nil
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
func (r *memberReconcile) stale() (Result, error) {
	msg := r.snap.Stale.Error() + "; creating no pane until the desired state is confirmed (another node may run the member by now)"
	r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonStoreUnavailable, msg)
	r.b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionFalse, v1alpha1.ReasonStoreUnavailable, msg)
	r.write()
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
	if h, held := snap.PruneHeld[name]; held {
		b.cond(v1alpha1.ConditionManifestValid, v1alpha1.ConditionFalse, v1alpha1.ReasonPruneHeld, h.Message)
		return
	}
	switch err := snap.Unreadable; {
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrLost):
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
func (r *memberReconcile) unresolved(reason, msg string) {
	r.b.st.LastError = msg
	r.b.set(v1alpha1.PhasePending, cFalse(reason, msg), cFalse(reason, msg), cFalse(v1alpha1.ReasonAsExpected, ""))
	r.write()
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
	m.dropOwned(rec, reason)
	return nil
}

// tabLabel returns the label the cache shows for a tab.
func (m *Manager) tabLabel(tabID string) (string, bool) {
	t, ok := m.cache.Tab(tabID)
	return t.Label, ok
}

// dropOwned forgets a pane that is gone: its token and its record (neither
// waited for on disk: a start after a crash that kept them finds the pane
// gone, and drops them again).
func (m *Manager) dropOwned(rec Ownership, reason string) {
	if err := m.launcher.Release(launch.Pane{Member: rec.Member, PaneID: rec.PaneID, TerminalID: rec.TerminalID, Token: rec.Token}); err != nil {
		m.log.Warn("launcher could not release a closed pane", "member", rec.Member, "pane", rec.PaneID, "err", err)
	}
	m.own.drop(rec.Member)
	m.mu.Lock()
	delete(m.relaunches, rec.PaneID) // the pane is not the member's any more
	m.mu.Unlock()
	m.signalOwned()
	if m.o.OnPaneGone != nil {
		m.o.OnPaneGone(rec.Member, rec.PaneID, reason)
	}
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
