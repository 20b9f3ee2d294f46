// Package messaging is fleetd's messaging core: the rendezvous between the
// primary and its workers, the per-worker injector that types prompts into
// agent panes, the durable mailboxes, and the journal that makes all of it
// survive a crash. The MCP tools (bridge_send, bridge_reply, bridge_ask,
// bridge_poll, bridge_ack, bridge_status) and the REST handlers are thin
// adapters over a [Core]; this package knows nothing of MCP, HTTP, tokens or
// members, and imports neither the herdr client nor the controllers: herdr
// reaches it through a [Prompter] (package herdrprompt) and through the
// statuses the reconciler reports in the core's own words. It must never
// decide who a caller is (adapters resolve that from
// the bearer token and pass a name), never poll herdr, never read the wall
// clock, and never type a message into a pane twice.
//
// # Turns
//
// Everything is correlated by a turn id. [Core.Send] opens a turn from a
// caller (the primary) to a worker and queues its prompt. While the turn is
// open the worker's [Core.Reply] and [Core.Ask] belong to it (a worker's
// current turn is the turn of the last prompt typed into its pane), and the
// caller continues it with Send{TurnID}. The five flows of DESIGN §5.3:
//
//  1. Delegation: Send{Wait} holds one call; the worker's final Reply
//     resolves it with [OutcomeReply].
//  2. Clarification: the worker's Ask blocks; the held Send returns
//     [OutcomeQuestion] with the turn id; Send{TurnID, Wait} hands the answer
//     to the blocked Ask (never through the pane) and then waits for the same
//     turn's reply.
//  3. Detached: Send without Wait returns [OutcomeDispatched]. Whatever the
//     worker says later with nobody waiting (reply, progress, question) is
//     stored in the caller's mailbox ([Core.Poll], [Core.Ack]), and, when
//     [Options.PrimaryTarget] names the primary's pane, also queued for
//     typing into it.
//  4. Uncooperative worker: when the worker is seen working after the
//     delivery and then idle or done with no reply, the core reads the tail of
//     its terminal ([Prompter.ReadTail]) and ends the turn with
//     [OutcomeTurnDone].
//  5. Timeout returns [OutcomeTimeout] and leaves the turn open; its eventual
//     reply lands in the mailbox, and [Core.Await] can hold a call on it again
//     until its recorded absolute deadline. [Core.WorkerGone] fails every call
//     waiting on the worker with [CodeWorkerGone]; a cancelled context
//     releases its waiter and nothing else.
//
// # Mailboxes
//
// A recipient's mailbox is bounded in count and bytes
// ([Options.MaxMailboxMessages], [Options.MaxMailboxBytes]): a worker's mail
// over them is refused with [CodeMailboxFull] before anything is recorded,
// and nothing stored is ever dropped to make room; the notices the core
// writes itself when a turn ends are kept over the bounds (one per turn).
// Every stored message has a [Message.Seq] that orders its mailbox and
// survives restarts and compaction; [Core.PollPage] returns a bounded page
// after a cursor built from it.
//
// # The injector
//
// Each worker has a FIFO of prompts. The head is typed ([Prompter.Prompt])
// only while the last status the reconciler reported through
// [Core.ObserveStatus] is idle or done — never blocked, working or unknown.
// After a delivery the injector waits for pickup (state_change_seq advances or
// the agent reports working) or for [Options.PickupGrace], so that at most one
// message goes into each turn. A Prompt whose outcome is unknown (herdr's
// agent_prompt_stalled, a broken connection, a call cut short, fleetd dying
// mid-call) is marked uncertain, shown by [Core.Status] and never re-sent;
// herdr refusals that type nothing leave the message at the head: for the
// next observation when the refusal showed the agent's status
// (agent_blocked), else (herdr unreachable for a moment) for a retry after a
// backoff of 250 ms doubling to 5 s, since an idle worker's next observation
// may be a whole resync away.
// The Prompter draws that line (a [*PromptError]); herdr's error codes are
// classified in its herdr adapter, package herdrprompt, never here. There is no polling loop: the core moves
// only when a call, a status event or one of its own timers arrives.
//
// What is typed is made safe for a terminal first (package termtext: escape
// sequences dropped, controls shown escaped, a carriage return a newline) and
// bounded by [Options.MaxContentBytes]. A prompt is typed as its sender wrote
// it; mail typed into the primary's pane is one header line in fleetd's
// words and the sender's text with every line quoted, so that no worker can
// forge the header (see render).
//
// # Durability
//
// State changes are records in an append-only journal in the directory given
// to [New]: each line carries a CRC-32C, a batch is fsynced before the call
// that caused it returns, and the same apply function serves live changes and
// replay, so the two cannot drift apart. On New the journal is replayed: queued
// messages stay queued, unacknowledged mail stays pollable, open turns keep
// their absolute deadlines, a prompt that was being typed becomes uncertain,
// and a torn last batch is dropped. A journal damaged any other way makes New
// fail with [ErrJournalCorrupt] and stay untouched; [CheckJournal] and
// [RepairJournal] (fleetd journal check|repair) list the damage and keep
// every intact record. A commit whose write failed returns CodeUnavailable
// and changes nothing, in memory or on disk. When the journal outgrows
// [Options.CompactBytes] and is mostly history (it doubled since the last
// compaction, or acknowledgements retired most of it) it is rewritten with
// only live state (temporary file, fsync, rename), in the background: the
// journal on disk holds every acknowledged record at every instant of it.
//
// A caller that may make the same request twice — fleetd's relay across
// nodes (package fleetmsg) hands the core requests it keeps in etcd and
// deletes only after the core took them — names it: [SendRequest.ID] is
// journalled with the change it causes (for a new turn it is the turn's
// id), and a request whose id the core holds (an open turn, or one of the
// last [Options.MaxRequestIDs] ids, kept through compaction) changes
// nothing, so a prompt is never queued twice for one request.
//
// Blocking calls (the caller's held Send, a worker's Ask, a waiting Poll) are
// not journalled: they die with the process, and their turns stay open for
// Await, Poll and late replies.
//
// # Wiring
//
// The reconciler owns the herdr event subscription and calls
// [Core.ObserveStatus] for every agent status change of a member's pane (and
// after each resync), and [Core.WorkerGone] when a member is deleted or
// paused or its pane is closed; a recreated pane's first observation brings
// the worker back. [Core.AgentRelaunched] is for a worker whose agent was
// started again in the same pane (herdr restarted with session restore):
// the turns whose prompt the old process was given end with turn_done and
// a text saying so — the prompt is never typed again — while its queue
// waits for the new agent. The gateway resolves the caller from its token and calls
// Send/Await (primary), Reply/Ask (worker), Poll/Ack/Status/Pending (either),
// mapping [Error.Code] to its own error words. The process must hold the
// state directory's lock (package statedir) from before [New] until after
// [Core.Close]: two Cores on one journal would corrupt it.
//
// # Members
//
// Two policies read the declared fleet, through interfaces this package
// declares and the daemon satisfies (it never imports the controllers, their
// store or herdr). [AdmitMembers], the core's [Options.Admit], refuses a new
// message to a name that is not a member (not_found), is a paused one, or
// is one whose tab is closing once its agent is idle (worker_gone: nothing
// new is typed into a member being deleted, stopped or paused, while what
// it was given goes on); [ReportGoneMembers] reports every busy worker
// that is not a running member and has no pane left gone, after each
// change of the desired state and on the first pass after a restart — a
// closing pane is reported by the controllers when it closes. Both read a
// [Roster]. The controllers, in turn, wait for what [Core.Outstanding]
// says the core holds open for a member before they close its tab or
// replace its agent, and a replacement that found the agent idle takes
// [Core.Hold] until its old tab is closed, so that nothing is typed into
// it in between. [FirstPrompts] owes each
// member its spec.prompt until it was typed into one of its panes: once per
// member uid, when the member is first Ready, as a detached send from the
// primary, recorded in the state database (package statedb) — and once more for
// each changed prompt; a prompt the core
// dropped untyped with a pane that went away ([FirstPrompts.WorkerGone],
// which the daemon calls instead of [Core.WorkerGone]) is owed to the next
// pane. It reads the members with their status from a [Fleet].
//
// # Concurrency
//
// Two locks. The commit lock serialises every call that changes the state
// (Send, Reply, Ask, Ack, ObserveStatus, WorkerGone, a delivery's outcome):
// it is held for the whole call, journal write included, so the order of the
// journal is the order of the changes and a call's decisions still hold when
// its records are applied. The state lock guards the in-memory state; a
// changing call holds it too, except while its records are written and
// fsynced. They are applied only after the fsync, so no change is visible
// (to a poll, a status, a waiting caller) before it is durable. Calls that
// only read — Poll and PollPage, Status, Pending, Busy, Outstanding — take the state lock
// alone, for in-memory work only: they never wait on the disk, however slow
// its fsync. Compaction takes its snapshot under both locks, in memory, and
// writes the new file in a goroutine that holds neither: calls go on
// appending to the old file meanwhile, and the journal carries their records
// into the new one before it renames it into place
// ([journal.Journal.BeginRewrite]). Prompt and ReadTail run in goroutines
// owned by the Core (Close cancels and waits for them) and take the locks
// only to record their outcome; a blocked caller waits on its own channel,
// never on a lock. Timers come from [Options.Clock].
//
// Writers still take turns at the disk: N concurrent changes cost N fsyncs,
// one after another (no group commit).
package messaging
