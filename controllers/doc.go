// Package controllers is fleetd's south face: the member controller that
// drives herdr until the live panes and agents match the declared Members,
// and the primary-pane follower.
//
// The moving parts, in the order a change travels:
//
//   - The desired state comes from a [store.Store] the caller builds and
//     passes in [Options.Store] (the watched manifests directory, package
//     internal/store/dirstore, or etcd); this package imports no backend.
//     Every change of a member, of the profile or tenant it references, or
//     of its file's errors puts the member's name on the work queue.
//   - herdr is observed, not polled, by one shared, read-only cache
//     (package controllers/herdrcache, the informer): full listings when
//     herdr (re)appears and every [Options.ResyncPeriod], and an
//     events.subscribe stream in between. The Manager creates it, runs it
//     and shares it ([Manager.Cache]); it asks the cache to watch every
//     owned pane (pane.agent_status_changed) and registers handlers that
//     map what the cache observes to member keys on the work queue (a
//     Ready member whose agent status changed is queued however the cache
//     learnt of it — an event, or the agent listing that catches up after
//     a resubscription, which no event accompanies), pass owned agents'
//     numbered statuses to [Options.OnAgentStatus] (the messaging status
//     feed), and run the orphan sweep after every listing. Reconcile reads the cache and writes herdr — tab.create,
//     agent.start, tab.close, workspace.create — telling the cache what it
//     did, so a converged, idle fleet makes no herdr calls beyond the
//     periodic listing. Nothing in this package lists herdr or subscribes
//     to its events.
//   - [FollowPrimaryPane] reads the same cache for the primary's own pane
//     (`fleetd serve --primary-pane`): no subscription of its own.
//   - The work queue (controllers/workqueue) deduplicates names, backs
//     failed ones off exponentially and rate-limits retries; a fixed number
//     of workers run [Manager.reconcile] on them.
//   - Reconcile is level-based, like controller-runtime's: given a name it
//     compares desired and observed state and takes the next step, in
//     named phases, each a method of one per-call struct (reconcile.go):
//     what was asked of the member (Expedite, Restart), deleted, pause,
//     resolve (references, the herdr gate), update (with the store gate),
//     the owned pane (owned.go) and create (the store and backoff gates;
//     create.go). It returns a [Result]: RequeueAfter for a timed look, or
//     Requeue for the next step of a launch — a created tab's agent.start
//     comes in the member's next reconcile, behind the members queued
//     meanwhile, so that a mass creation or repair asks herdr for every
//     tab before it starts their agents, and no worker waits on one
//     member's start while other members' panes are missing. The first
//     recreation after a failure is taken in the same reconcile. The steps: close the tab of a deleted or paused
//     member once its agent is idle (graceful.go), the member Terminating
//     (a deleted one still listed) while it waits and until herdr confirmed
//     the close; report a missing profile or tenant (Ready=False, not
//     retried until something changes); take a spec change that needs no
//     new agent (labels, annotations, prompt, grace period, update
//     strategy) as it is, and replace the tab on one that does once its
//     agent is idle (UpToDate=False meanwhile, shown as Updating),
//     Terminating while the old one closes; adopt a live pane by terminal id, or by pane id
//     after herdr restarted (see below), waiting for herdr to relaunch a
//     restored pane's agent; close a deleted
//     member's workspace when fleetd created it and it is now empty;
//     recreate a closed pane or exited agent per restartPolicy
//     with exponential backoff, counting restarts and turning Degraded in a
//     crash loop; or create the member's dedicated, labelled tab (pane
//     environment set at creation) in its workspace and issue agent.start.
//     A member with a git worktree (its spec.worktree, or its profile's)
//     gets its tab in its worktree instead, found or made first —
//     worktree.list, then worktree.open or worktree.create on herdr 0.9,
//     `git worktree add` on herdr 0.8 — and a deleted member's worktree is
//     kept, or removed when its cleanup says so and nothing would be lost;
//     worktree.go is all of it, called once from create and once from
//     deleted, with a refresher that reads each worktree's status with git
//     when herdr reports a worktree event or the agent goes idle.
//     Every launch resumes the agent's own session herdr last reported
//     (agent_session, kept in the member's memory across panes and fleetd
//     restarts) through launch.Resumer, unless the profile says resume:
//     Never or runs another harness, and starts afresh, with an event,
//     when that cannot work (resume.go).
//   - Nothing closes a busy agent (graceful.go): a member deleted, stopped
//     or paused keeps its tab while herdr shows its agent working or
//     blocked or the messaging core holds something open for it
//     ([Options.Activity]: a turn, a queued message, a question), at most
//     its termination grace period; a replacement waits the same way, at
//     most its update strategy's maxWait; [Manager.Expedite] forces either
//     at once, [Manager.Restart] asks for a replacement of the same
//     definition. Each wait's deadline and force are in the member's
//     memory before the status shows the wait, so a restart of fleetd
//     keeps them, and a wait looks again when the agent's status or the
//     messaging core changes and at its deadline.
//     Status is written only when it changes; a condition's
//     lastTransitionTime moves only when it flips.
//   - A start never holds a worker (start.go): the reconcile that issues
//     agent.start returns with the member Starting. Readiness arrives as
//     herdr events about the pane, each confirmed by one agent.get, under a
//     check timer that backs off to [MaxStartCheck]; the startup deadline
//     is a timer too. agent_pane_busy (a new pane's shell still starting) is
//     retried shortly and boundedly while the pane keeps its terminal id; an
//     agent that comes up blocked at a dialog is Starting with Ready=False
//     reason AwaitingInput and the dialog's text, never killed for its
//     startup timeout while it waits. A herdr call that got no answer is
//     retried on the member's own short backoff, not the queue's rate
//     limit.
//   - A Profile or Tenant change rolls out (rollout.go): the ownership
//     record keeps a digest of what the launch took from the member's
//     profile and tenant, and a member whose digest is outdated waits for
//     a turn in its profile's rollout — at most spec.rollout.maxUnavailable
//     of the profile's members (every node's, in a fleet) are being
//     replaced, the next turn given once the new agent is Ready, in the
//     same order on every node — then for its agent to be idle as a spec
//     change does. A new agent that fails before it is Ready stops the
//     rollout: a halt kept with the profile's revisions
//     ([Options.Revisions], internal/rollout's store, which the caller's
//     recorder fills), until it is resumed or the profile changes again.
//     [Manager.Profile] is a profile with its status: its rollout as this
//     node counts it (other nodes' members from their published statuses,
//     [Manager.FollowPeers]).
//   - What a pane is launched with (args, environment, plan, an opaque
//     token handle) comes from a launch.Launcher (package
//     controllers/launch, the one launch contract); fleetd passes
//     internal/harness's, which implements it directly. This package never
//     imports the harness adapters or the token registry.
//
// Each member's memory (memory.go; one record per member in the state
// database, package statedb, written only when it changes) keeps what outlives
// a pane: the agent's own session, and a graceful close or replacement
// under way — for a deleted member, also what it was, so that it is still
// listed after a restart.
//
// Ownership records in the state database (one record per member: uid,
// generation, the digest of what the launch was made of, terminal id,
// pane id, tab id, the credential's handle, the worktree),
// durable right after tab.create and before agent.start (concurrent ones
// share one fsync), let a
// restarted fleetd adopt its panes instead of creating duplicates — by
// terminal id, or, after herdr restarted or handed off (new terminal ids,
// same pane ids), by pane id confirmed by the agent's name and session.
// After a restart herdr relaunches every agent (a new process in the same
// pane); the cache tells it from a handoff, which keeps the agents running,
// and [Options.OnAgentRelaunched] hears of it, so that the messaging core
// ends the turns the lost process had been given. A
// pane's credential is released with exactly its pane, never by a pane id
// herdr has given another member's pane since. Tabs labelled "fleetd/…" that no record
// claims are closed; tabs without that label are never touched. A failed or
// partial herdr read never counts as a vanished pane: while herdr is
// unreachable the cache is unsynced and nothing is recreated. The Manager
// says so: a warning 3 s after Run started if herdr has not been listed
// yet (every member is then reconciled to Ready=Unknown, HerdrUnavailable),
// and every minute while herdr stays away; at debug level each reconcile
// logs what it decided. Likewise no pane is created — neither a first
// start, a restart nor a replacement — from a snapshot the store marks
// Stale (etcd unreachable or without quorum: another node may own the
// member by now); running agents keep running, the member shows
// Ready=Unknown, StoreUnavailable, and it converges when the store's
// snapshot is current again; nor is a member pruned because a stale
// snapshot lacks it (a lost store — etcd restored empty, say — lacks them
// all). A member the store's prune hold keeps (store.Snapshot.PruneHeld:
// its definition gone with most others at once) runs on, ManifestValid
// False with reason PruneHeld and a Warning event, and gets no pane if it
// has none; prune.go is both gates. One daemon per
// state directory is enforced by the caller, which holds the directory's
// lock (package statedir) while a Manager runs on it.
//
// This package never writes status into an operator's file, never puts a
// secret in a log line, metric label, event or status, and never decides
// anything from wall-clock time it did not get from its injected clock.
package controllers
