package controllers

import (
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// The store decides what is really deleted; this file is how the
// controllers obey it. Two things keep an agent alive although its member
// looks gone or bodiless:
//
//   - A stale snapshot (etcd unreachable, or a lost store: restored empty,
//     from an older backup, another fleet's) cannot confirm that a member
//     missing from it was deleted: pruneGate keeps its tab open, as create
//     and replace already create nothing from such a snapshot, until the
//     snapshot is current again.
//   - A member whose definition disappeared in one mass removal is still
//     in the snapshot, on its last definition, and listed in
//     store.Snapshot.PruneHeld (package store's Hold): it keeps running
//     (ManifestValid False, reason PruneHeld, and a Warning event once),
//     one without a pane is not given one (createGate), and its agent is
//     not replaced (heldFromReplace) — by a change of its profile or
//     tenant, nor by a restart — since its replacement would get no pane.

// pruneGate reports whether a deleted member must not be pruned yet
// because the snapshot that lacks it is stale; its status (when the
// controller still has one) says why, and the member is looked at again
// after staleRecheck in case the store's return goes by unseen.
func (r *memberReconcile) pruneGate() (Result, bool) {
	if r.snap.Stale == nil {
		return Result{}, false
	}
	if r.b != nil {
		msg := r.snap.Stale.Error() + "; pruning nothing until the desired state is confirmed (the member is missing from a snapshot that may not be current)"
		r.b.cond(v1alpha1.ConditionReady, v1alpha1.ConditionUnknown, v1alpha1.ReasonStoreUnavailable, msg)
		r.b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionFalse, v1alpha1.ReasonStoreUnavailable, msg)
		r.write()
	}
	return Result{RequeueAfter: staleRecheck}, true
}

// createGate reports whether a held member (PruneHeld) must not get a
// pane: its definition is gone, and only the running agent is kept.
func (r *memberReconcile) createGate() bool {
	h, held := r.snap.PruneHeld[r.name]
	if !held {
		return false
	}
	msg := "its definition is gone and its prune is held; no pane is made for it: " + h.Message
	r.b.set(v1alpha1.PhasePending, cFalse(v1alpha1.ReasonPruneHeld, msg), cFalse(v1alpha1.ReasonPruneHeld, msg), cFalse(v1alpha1.ReasonAsExpected, ""))
	r.write()
	return true
}

// heldFromReplace reports whether a held member (PruneHeld) that would
// need a new agent keeps the one it runs: UpToDate=False says why, and its
// profile's rollout counts it out (profileStates).
func (r *memberReconcile) heldFromReplace() bool {
	h, held := r.snap.PruneHeld[r.name]
	if !held {
		return false
	}
	r.b.cond(v1alpha1.ConditionUpToDate, v1alpha1.ConditionFalse, v1alpha1.ReasonPruneHeld,
		"its definition is gone and its prune is held; its agent runs on and is not replaced: "+h.Message)
	r.updateWaits = true
	return true
}

// manifestConditions sets ManifestValid (manifestCondition) and, when the
// member has just been held (PruneHeld), records a Warning event that says
// why and how to confirm.
func (r *memberReconcile) manifestConditions() {
	was := r.b.condition(v1alpha1.ConditionManifestValid).Reason
	manifestCondition(r.b, r.snap, r.name)
	if h, held := r.snap.PruneHeld[r.name]; held && was != v1alpha1.ReasonPruneHeld {
		r.event(v1alpha1.EventWarning, v1alpha1.ReasonPruneHeld, fmt.Sprintf("prune held: %s", h.Message))
	}
}
