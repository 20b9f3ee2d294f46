// Package herdrcache is fleetd's one shared, read-only cache of herdr's
// state — workspaces, tabs, panes and agents — the informer of client-go
// applied to herdr. The member reconciler, the messaging status feed and
// the primary-pane follower all read this one cache; nobody else lists
// herdr or subscribes to its events.
//
// What it owns:
//
//   - Subscribe first, then read: the cache opens its events.subscribe
//     stream (behind the [Source] and [Stream] interfaces, so that tests
//     fake it in memory), waits for herdr's acknowledgement, and only then
//     reads herdr in full — session.snapshot where the source and herdr
//     have it ([Snapshotter]), else a fixed handful of listings
//     (workspace.list, a tab.list per workspace, pane.list, agent.list)
//     whatever the number of panes. herdr (protocol 22) replays no past
//     events, so a read taken before subscribing would miss what changed
//     in between; events that arrive during the read wait on the stream and
//     are applied, in order, after it is installed. The same read follows
//     every (re)subscription and comes every [Options.ResyncPeriod]. Before
//     the first read after herdr (re)appears the cache pings herdr, shows
//     what answered in fleetd_herdr_info{version,protocol} ([Metrics]) and
//     to readers ([Cache.Herdr]: a node of a fleet publishes it),
//     warns about a protocol newer than [herdr.LatestProtocol] and reports a herdr
//     the client refuses.
//   - Keeping current: lifecycle events (not tab.created and pane.created,
//     which it does not apply; and herdr 0.9's worktree events,
//     passed on to handlers; herdr 0.8 refuses them, and the cache then
//     subscribes without them) plus pane.agent_status_changed for
//     every pane a reader asked to [Cache.Watch]. The stream is renewed
//     when the watched panes change (one renewal per burst,
//     [Options.ResubscribeDelay] after its first change; the new stream
//     opens before the old one closes), and such a renewal is followed by
//     one agent.list, because herdr does not replay per-pane status events.
//     Neither holds an event up (each takes herdr milliseconds for a few
//     hundred panes): the old stream is applied until herdr acknowledges
//     the new one, the new one's events while the listing runs, and the
//     listing, which may be older, does not overwrite the status of a pane
//     the new stream reported meanwhile.
//     The old stream's end is not read once it is replaced: an agent that
//     listing shows under another terminal id than the view's (herdr
//     handed off or restarted meanwhile) makes it a full read instead.
//     herdr refuses a whole subscription for one unknown pane, so a refused
//     (re)subscription is retried with the lifecycle events only and the
//     panes the read shows are added right after it; a watched pane that
//     herdr has not shown (it does not exist yet) is tried with a capped
//     backoff until a subscription to it is accepted. Bursts are applied in
//     full: the stream is read as fast as events are applied, and herdr
//     holds what it has not sent.
//   - A stream that ends — events_lost (the subscriber fell behind herdr's
//     history; [herdr.ErrEventsLost]) or any other drop — is followed by a
//     new subscription and a new read (after events_lost on a stream that
//     lived a while, at once; a stream that keeps ending backs off like a
//     reconnect). events_lost is not a loss of herdr:
//     the cache stays [Cache.Synced] throughout, so readers recreate
//     nothing because of it, and the read after the new subscription drops
//     only what herdr no longer has. Every watched pane's status in that
//     read is passed on, so a change no event reported is numbered and
//     delivered like one that was. A pane that joins the watched set after
//     a read (a watcher that adopts a restored pane under its new terminal
//     id once the read is installed) has its status passed on then: from a
//     catch-up listing when the stream is replaced to cover it, from the
//     view when the stream already covered it.
//   - Reachability: while herdr is unreachable, or its stream dropped with
//     the connection, the cache reconnects with exponential backoff and is
//     not [Cache.Synced] until its next complete read. A failed or partial
//     read never changes the cache: an unsynced cache is never evidence
//     that a pane is gone.
//   - Races with its writers: the member reconciler reports what it did to
//     herdr itself (WorkspaceCreated, TabCreated, AgentStarted, TabClosed,
//     WorkspaceClosed). Every such local write, and every applied event, is
//     stamped with a sequence number; installing a listing keeps the local
//     version of anything changed after that listing began, so a listing
//     that started before a tab.create does not make the new tab vanish.
//     Tab and pane created events are not applied (protocol 20 starts
//     subscriptions with replays of past events, which would resurrect
//     closed tabs; writers report what they create, reads bring the rest).
//   - Agent status numbering: every status observed for a pane (event,
//     listing, catch-up, agent started) is passed to the
//     [Handler.OnAgentStatus] handlers with a sequence number that grows
//     with every change of the agent's state, per pane, from 1 — the way
//     herdr's state_change_seq does, which its events do not carry. idle
//     and done count as one state, and a status seen again does not move
//     the number. The member status feed and the primary-pane follower get
//     the same numbering.
//   - Relaunched agents: herdr gives every pane a new terminal id both when
//     it restarts with session restore (its agents are relaunched: new
//     processes) and when it hands off live to a new binary (its agents
//     keep running, with their state). When a listing shows a
//     pane under a new terminal id, its agent counts as relaunched if
//     herdr's socket refused a connection since the last listing (its
//     process went away; a handoff never refuses one), or if the pane has
//     no agent, or its agent is launch_pending where the last one was not,
//     or herdr's state_change_seq or completion_seq went back (a new
//     agent counts from zero; between listings the view keeps a lower
//     bound of state_change_seq by counting a ready agent's status
//     changes). [Handler.OnAgentRelaunched] hears of each such pane before
//     any status of its new agent is passed on.
//
// Readers use the lookups (Pane by terminal or pane id, WorkspaceByLabel,
// TabsWithLabelPrefix, Synced) and register [Handler] funcs, called
// synchronously and in order for every applied event, status observation,
// installed listing and loss of herdr.
//
// What it must never do: write to herdr. It creates, closes, starts and
// prompts nothing; it only reads, pings and subscribes. Decisions (what to
// recreate, which tab is an orphan) belong to its readers.
package herdrcache
