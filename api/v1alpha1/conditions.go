package v1alpha1

import "time"

// Condition types a member's status carries.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	// ConditionManifestValid reports whether the file defining a member
	// parses; False means the member runs on the file's last good
	// definition.
	ConditionManifestValid = "ManifestValid"
	// ConditionUpToDate reports whether the running agent runs the
	// member's current definition. False (WaitingForIdle) while a spec
	// change that needs a new agent waits for the agent's next idle
	// moment; `fleetd get` shows the phase as Updating meanwhile.
	ConditionUpToDate = "UpToDate"
)

// PhaseUpdating is the phase [Member.DisplayPhase] shows for a running
// member whose replacement waits for its agent to be idle
// (UpToDate=False, WaitingForIdle). It is a display of that condition, not
// a value of status.phase, which stays Ready or Degraded: the agent runs.
const PhaseUpdating = "Updating"

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition reasons: the one list of the CamelCase words a condition's
// reason (and an event's) may carry. The member controller writes them; the
// plan resolver and the harness launcher return the ones that say a spec
// cannot be launched as it is; tools read them to tell a member that will
// not start without a change from one that is still on its way.
const (
	ReasonAgentReady = "AgentReady"
	ReasonStarting   = "Starting"
	// ReasonStarted is the event of a member whose new agent herdr
	// reports ready, recorded as the member is marked Ready.
	ReasonStarted = "Started"
	// ReasonAwaitingInput: the agent came up at a dialog (a first-run
	// trust prompt, a login) and waits for a person to answer it in herdr;
	// the start has not failed and no startup deadline runs meanwhile.
	ReasonAwaitingInput = "AwaitingInput"
	ReasonBackOff       = "BackOff"
	ReasonCrashLoop     = "CrashLoop"
	ReasonFailed        = "Failed"
	ReasonPaused        = "Paused"
	ReasonAsExpected    = "AsExpected"
	// ReasonTerminating: fleetd is closing the member's tab — the member
	// was deleted, paused or replaced by a new definition; the message
	// says which tab and why. The phase is Terminating until herdr
	// confirmed the close.
	ReasonTerminating = "Terminating"
	// ReasonWaitingForIdle: what the member was asked for — to close its
	// tab (deleted, stopped, paused) or to be replaced by a new definition
	// — waits for its agent to be idle with nothing open (no turn, no
	// queued message, no question held), at most the termination grace
	// period or the update strategy's maxWait; the message says what it
	// waits for, since when, and until when.
	ReasonWaitingForIdle = "WaitingForIdle"

	// Reasons of a Profile's rollout (its Progressing condition) and of a
	// member waiting for it (its UpToDate condition False).
	//
	// ReasonRollingOut: members of the profile run an older definition of
	// it (or of their tenant) and are being replaced, each at its agent's
	// next idle moment, at most spec.rollout.maxUnavailable at a time.
	ReasonRollingOut = "RollingOut"
	// ReasonRolloutComplete: every member runs the profile as it is.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonRolloutPending: the member runs an older definition of its
	// profile (or tenant) and waits for its turn in the profile's
	// rollout; its agent runs on meanwhile.
	ReasonRolloutPending = "RolloutPending"
	// ReasonRolloutPaused: the profile's rollout is paused
	// (spec.rollout.paused) — the profile's reason, and that of a member
	// that waits for it to resume.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRolloutFailed: a member replaced by the profile's rollout did
	// not become Ready, so the rollout stopped until `fleetd rollout
	// resume` or `undo` (the profile's reason, the member's event, and
	// that of a member that waits behind it).
	ReasonRolloutFailed = "RolloutFailed"

	// Reasons a member waits for its spec, or an object it references, to
	// change (Ready=False, no retries).
	ReasonProfileNotFound   = "ProfileNotFound"
	ReasonTenantNotFound    = "TenantNotFound"
	ReasonCredentialMissing = "CredentialMissing"
	ReasonInvalidSpec       = "InvalidSpec"
	// ReasonWorktreeConflict: another member claims the same branch of
	// the same repository (spec.worktree, or its profile's); the member
	// waits until one of them changes.
	ReasonWorktreeConflict = "WorktreeConflict"

	// ReasonWorktreeFailed: the member's git worktree could not be made
	// or opened — its repository path is no repository, git or herdr
	// refused; the message says why. The member is Failed and tried again
	// with backoff.
	ReasonWorktreeFailed = "WorktreeFailed"

	ReasonHerdrUnavailable = "HerdrUnavailable"
	// ReasonStoreUnavailable: the store cannot confirm the desired state
	// (etcd unreachable or without quorum), so no pane is created for the
	// member — neither a first start, a restart nor a replacement — until
	// it can; a running agent keeps running.
	// With a lost store (etcd restored empty or from an older backup,
	// or another fleet's: the message says which, and how to accept it)
	// nothing is pruned or created either, until an operator accepts it.
	ReasonStoreUnavailable = "StoreUnavailable"
	// ReasonPruneHeld: the member's definition disappeared in one change
	// with most of the node's members, without a delete through fleetd (a
	// directory emptied, a file removed, an etcd prefix deleted by hand).
	// It keeps running on its last definition (ManifestValid False, and an
	// event) until the prune is confirmed (`fleetd prune --confirm`) or
	// the hold (--prune-hold) ends; a held member without a pane gets
	// none.
	ReasonPruneHeld  = "PruneHeld"
	ReasonHerdrError = "HerdrError"
	// ReasonReconcileError: fleetd could not take the member's next step
	// (a state file it could not write, a launch it could not prepare);
	// retried with backoff, the message holds the error.
	ReasonReconcileError = "ReconcileError"

	// Reasons of the Ready condition a node of a fleet on etcd shows for a
	// member it does not run (package fleet's view). ReasonNodeLost (a
	// Node's reason too) is also one: the member is bound to a node whose
	// lease expired, and is rescheduled after --reschedule-after unless
	// spec.nodeName pins it there.
	//
	// ReasonUnschedulable: no node can take the member; the message says
	// why (the scheduler's own words, from the same placement rule).
	ReasonUnschedulable = "Unschedulable"
	// ReasonScheduling: a node can take the member and the scheduler has
	// not bound it yet; the message names the node the placement rule
	// picks now.
	ReasonScheduling = "Scheduling"
	// ReasonOnAnotherNode: the member is bound to another node, whose
	// status of it is not shown here; the message says why (not published
	// yet, its herdr does not answer, this node cannot read etcd).
	ReasonOnAnotherNode = "OnAnotherNode"
	// ReasonNodeFenced: the node that ran the member could not confirm,
	// before its fence deadline, that the member is still its own (its
	// lease in etcd not renewed, or its registration another fleetd's),
	// and closed its pane before another node may start it (with
	// --fence-policy pause: interrupted its agent and kept the pane); the
	// member waits, with no running agent there, until the node confirms
	// it again.
	ReasonNodeFenced = "NodeFenced"

	// Reasons of ConditionManifestValid (and ReasonStoreUnavailable: the
	// store's source, etcd, did not answer).
	ReasonManifestError    = "ManifestError"
	ReasonManifestParsed   = "Parsed"
	ReasonDirectoryMissing = "DirectoryUnreadable"
)

// Condition is shaped like metav1.Condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
}
