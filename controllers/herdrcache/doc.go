// Package herdrcache is fleetd's one shared, read-only cache of herdr's
// state — workspaces, tabs, panes and agents — the informer of client-go
// applied to herdr. The member reconciler, the messaging status feed and
// the primary-pane follower all read this one cache; nobody else lists
// herdr or subscribes to its events.
//
// What it owns:
//
//   - Filling: a full listing (a fixed handful of calls — workspace.list, a
//     tab.list per workspace, pane.list, agent.list — whatever the number
//     of panes) when herdr (re)appears and every [Options.ResyncPeriod].
//     Before the first listing after herdr (re)appears it pings herdr and
//     refuses a herdr that speaks another protocol.
//   - Keeping current: one events.subscribe stream in between (behind the
//     [Source] and [Stream] interfaces, so that tests fake it in memory):
//     lifecycle events plus pane.agent_status_changed for every pane a
//     reader asked to [Cache.Watch]. The stream is renewed when the watched
//     panes change (one renewal per burst, [Options.ResubscribeDelay]
//     after its first change; the new stream opens before the old one
//     closes), and every (re)subscription is followed by one agent.list,
//     because herdr does not replay per-pane status events. A watched pane
//     that herdr has not shown (it does not exist yet) is tried with a
//     capped backoff until a subscription to it is accepted.
//   - Reachability: while herdr is unreachable, or its stream dropped, the
//     cache reconnects with exponential backoff and is not [Cache.Synced]
//     until its next complete listing. A failed or partial listing never
//     changes the cache: an unsynced cache is never evidence that a pane
//     is gone.
//   - Races with its writers: the member reconciler reports what it did to
//     herdr itself (WorkspaceCreated, TabCreated, AgentStarted, TabClosed,
//     WorkspaceClosed). Every such local write, and every applied event, is
//     stamped with a sequence number; installing a listing keeps the local
//     version of anything changed after that listing began, so a listing
//     that started before a tab.create does not make the new tab vanish.
//     Tab and pane created events are not applied (subscriptions start with
//     replays of past events, which would resurrect closed tabs).
//   - Agent status numbering: every status observed for a pane (event,
//     listing, catch-up, agent started) is passed to the
//     [Handler.OnAgentStatus] handlers with a sequence number that grows
//     with every change of the agent's state, per pane, from 1 — the way
//     herdr's state_change_seq does, which its events do not carry. idle
//     and done count as one state, and a status seen again does not move
//     the number. The member status feed and the primary-pane follower get
//     the same numbering.
//
// Readers use the lookups (Pane by terminal or pane id, WorkspaceByLabel,
// TabsWithLabelPrefix, Synced) and register [Handler] funcs, called
// synchronously and in order for every applied event, status observation,
// installed listing and loss of herdr.
//
// What it must never do: write to herdr. It creates, closes, starts and
// prompts nothing; it only lists, pings and subscribes. Decisions (what to
// recreate, which tab is an orphan) belong to its readers.
package herdrcache
