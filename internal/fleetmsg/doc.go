// Package fleetmsg is fleetd's messaging across the machines of a fleet on
// etcd: the [Relay] the gateway of every node uses as its messaging core
// when the desired state is in etcd, so that the primary may mount any
// node's gateway and reach every member, wherever it runs. The directory
// store (one machine) has no relay: its gateway talks to the core alone.
//
// The relay never types into a pane, never journals and never decides who
// a caller is. Each node's own messaging core (package messaging) keeps
// doing all of that for the members the node runs — status-gated
// delivery, at most once, uncertain never re-sent, turns and their
// deadlines journalled — and etcd is the only channel between nodes: no
// node talks to another over HTTP. It imports neither mcp nor the
// controllers nor herdr.
//
// # Routing
//
// Workers always talk to their own node: Reply and Ask go to the local
// core. A Send for a member this node runs (or a continuation of a turn
// its core holds) goes to the local core unchanged, so that held calls
// resolve in-process as on one machine. A Send for a member bound to
// another node (Options.Locate) is written, in one transaction, as a
// request PREFIX/msg/requests/NODE/TURN (sender, worker, content,
// absolute deadline, origin node) with the turn's location
// PREFIX/msg/turns/TURN (node, worker, caller, deadline); the origin
// chose the turn id. The worker's node mirrors its requests with an
// informer (package internal/etcd/informer: a list, a watch from the
// listed revision, a list again after a compaction or a failure), hands
// each to its core as a detached send with that id and deletes it. A crash
// between the two hands the same request again, and the core, which
// journals the id with the turn ([messaging.SendRequest.ID]), changes
// nothing: a prompt is queued at most once per request. A continuation
// (Send with TurnID: the primary answering a question from any node) finds
// the turn's node in its location and is a request with an id of its
// own, handled the same way; it answers the worker's pending bridge_ask
// through that node's rendezvous. A request the core refuses (the member
// is not, or no longer, on the node; paused; the turn ended) is deleted
// with a notice in the fleet mailbox saying why, never dropped silently.
//
// # The fleet mailbox
//
// Whatever a worker says with nobody waiting on its own node lands in its
// core's mailbox for the primary, as on one machine. A forwarder on every
// node moves that mail into the fleet mailbox,
// PREFIX/msg/mailbox/NODE-MESSAGEID (create-if-absent, in a transaction
// that also drops the turn's location when the mail ends the turn), and
// then acknowledges it in the core. The primary's bridge_poll, bridge_ack
// and pending count read the fleet mailbox, which every node mirrors in
// memory with an informer (reads never wait on etcd), ordered by
// create revision, the cursor made from it. An acknowledgement deletes
// each key and leaves PREFIX/msg/acked/ID under a lease that is never
// renewed (Options.TombstoneTTL), 64 messages to a transaction: a forward made again after a crash
// (forwarded, not yet acknowledged in the core) finds the tombstone and
// delivers nothing twice. The fleet mailbox is bounded in count and bytes
// like the core's; while it is full the forwarder stops and mail stays in
// the core (whose own bound then refuses more): nothing is lost. Mail a
// call waits for, and the notices that end a turn, go over the bound.
// Each forwarder counts from its own mirror, after its own last write:
// nodes forwarding at the same moment may take the mailbox over by a
// message each. A worker's own mailbox stays in its core.
//
// Each node shows the fleet mailbox from its mirror: a message forwarded
// on one node shows on another once that node's watch delivered it (a
// waiting poll wakes then); an acknowledgement returns once the acking
// node's own mirror reflects it. A remote Send has no DispatchID (the
// prompt's id is the worker's core's).
//
// # Held calls
//
// A held Send for a turn on another node writes, in the request's
// transaction, PREFIX/msg/waiting/TURN under the node's lease (its one
// session, package internal/etcd/session: the lease its registration and
// its scheduler candidacy are under too),
// then waits — on its mirror of the fleet mailbox, never polling etcd —
// for mail of that turn that ends or pauses the call (reply, question,
// turn_done, worker_gone, delivery_failed), takes it as an
// acknowledgement does and returns it as the core would. Polls hide the
// mail of turns a call waits on, so that it is returned once: the node
// holding the call from before its request is written, another node once
// its watch saw the waiting key. Progress
// mail stays in the mailbox. Every take — a held call's, an
// acknowledgement's — leaves the message's tombstone, PREFIX/msg/acked/ID,
// naming its taker (a held call names itself with an id of its own), so a
// take etcd failed without saying whether it committed is settled by the
// message id alone before anything else is taken: the tombstone names
// this call, and the call returns the mail (only it can: it is out of the
// mailbox); it names anyone else (a poll on another node acknowledged it
// after this node's lease, and its waiting key, went), and the call does
// not return it twice. At the deadline the call returns timeout, its
// waiting key goes and the turn's later mail shows in polls; a take still
// unsettled then is settled by Run, which puts the mail back into the
// mailbox if the take had committed. Every etcd step of a wait ends by its
// deadline plus a second (a waiting poll's timeout counts from its start,
// its wait for the mailbox's first list included), so every wait does. A
// cancelled context releases the call and nothing else; a node that dies
// takes its waiting keys with its lease.
//
// # Failures
//
// A Send for a member of a lost node (Options.NodeLost: its registration
// gone) fails at once with worker_gone naming the node, and writes
// nothing. Open turns and their deadlines survive any node's restart: the worker's
// node journals the turn with the absolute deadline of the request;
// requests not yet taken wait in etcd; the fleet mailbox is in etcd. A
// turn's location goes with its ending mail, or with its lease
// Options.TurnGrace after its deadline. etcd unreachable: a Send for
// another node fails fast with messaging's unavailable code (each request
// bounded by Options.RequestTimeout), one transaction or nothing written;
// this node's own members go on working through its core, and the
// forwarder and the request taker retry, with a jittered exponential
// backoff (package retry). Every input is bounded: content
// (MaxContentBytes, checked on the origin too), the requests waiting for
// one node (MaxRequests), the fleet mailbox, a page (MaxPollBytes), the
// calls held (MaxWaiters); a stored value is a JSON header line and the
// content unescaped, so its size is the content's plus at most 4 KiB.
// Nothing holds a lock over etcd I/O.
package fleetmsg
