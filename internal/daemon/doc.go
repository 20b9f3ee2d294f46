// Package daemon assembles a running fleetd: it checks that the state
// directory is safe to trust and takes its lock (package statedir), opens
// the token registry, the harness launcher, the desired state and the
// messaging core (its journal in the state directory), starts the member
// controller against herdr (or the embedded simulated herdr), and serves
// the REST API, the MCP gateway, /metrics and the browser console (/ui,
// package console, behind the same loopback Host check) on one loopback
// listener until its context ends.
//
// It is wiring only: it owns start-up order and shutdown, and every
// behaviour lives in the packages it wires together. [Run] builds the parts
// and runs them in one errgroup: the first to fail cancels the others and
// its error is the one returned.
//
// The desired state is a backend (backend.go) that serve wires without
// asking which one it is: the manifests directory (package dirstore), or
// with Config.Etcd (`fleetd serve --store etcd`) a fleet of nodes on etcd —
// the node's one lease (package internal/etcd/session), its registration,
// the store of the members bound to it (package etcdstore), and the fleet's
// nodes, published statuses and primary token (package fleet), all read
// once before the listener serves, the node registered before anything
// reconciles and the token registry accepting the fleet's primary token
// before the gateway serves. Once the node's controllers and messaging
// core exist the backend adds what it runs on the node: for the directory,
// nothing (the gateway and the console show the controllers' members and
// use the core); on etcd, the fleet view (what the gateway and the console
// show), the relay across nodes (package fleetmsg: what they message
// through), GET /nodes, and the parts that run — the lease, the
// registration and its herdr and member count (from the controllers and
// their herdr cache), the nodes, statuses and token, the status publisher,
// the scheduler (package scheduler) and the relay. A refused TLS handshake,
// which etcd's client reports only as a timeout, is explained by a probe of
// the endpoints.
//
// Besides:
//
//   - Each store publishes through its prune hold (store.Hold), with
//     Config.PruneHold; the backend hands the hold to the gateway (GET
//     /prune, POST /prune/confirm). The etcd store keeps what the node
//     remembers of its fleet (identity, revision, last good objects) in the
//     state directory.
//   - It refuses to start on a manifests directory that is missing or
//     unreadable (the store would serve an empty fleet), and logs every
//     herdr call at debug level through the client's observer, which sees
//     methods and outcomes, never parameters or tokens.
//   - Before the controllers run, every worker token that no ownership
//     record holds is revoked (tokens of panes whose record was lost, of
//     launches that never got their pane recorded); the controllers release
//     each recorded pane's token when that pane ends.
//   - The controllers feed the messaging core every agent status they
//     observe (ObserveStatus), and every pane gone for good to a small
//     fan-out the later parts register with: the first-prompt controller
//     (FirstPrompts.WorkerGone, the core's WorkerGone keeping a first prompt
//     dropped untyped with a replaced pane owed to the next one), then the
//     gateway (bridge_stop's wait).
//   - The desired state feeds the core's admit and gone policies
//     (messaging.AdmitMembers, messaging.ReportGoneMembers) through
//     [Roster], a thin adapter over the store and the controllers' panes
//     still closing (Manager.RunsPane); the members with their status feed
//     the first-prompt controller (messaging.FirstPrompts).
//   - The core is the controllers' Activity: a member to close or replace
//     waits for what the core holds open for it; the gateway forces such a
//     close through the controllers (mcp's Expediter: bridge_stop force,
//     DELETE ?now=true). On etcd the fleet's agent sessions
//     (fleet.Sessions) are the controllers' SessionKeeper.
//   - The revisions of Profiles and Members (package rollout) are kept in
//     the state directory (rollout.Dir), or on etcd under the fleet's
//     prefix (package etcdrollout, read once before the listener serves);
//     a rollout.Recorder records the desired state before the first
//     request and follows it (on etcd a member that left the node's
//     snapshot keeps its history while the fleet declares it). The
//     controllers read them (a stopped rollout) and are the gateway's
//     Rollouts and the console's Profiles; on etcd they count the other
//     nodes' members through the fleet view (Manager.FollowPeers).
//   - With Config.PrimaryPane (`fleetd serve --primary-pane`) the
//     primary-pane follower (controllers.FollowPrimaryPane, reading the
//     controllers' shared herdr cache) feeds the primary pane's agent status
//     to the core under the primary's name, so that replies nobody waits for
//     are typed into that pane when its agent is idle or done, besides
//     landing in the durable mailbox.
//
// The listener is bounded (package listener, Config.Listener): a cap on
// open connections (at the cap the one waiting on its client longest is
// closed to make room), deadlines on reading headers and whole requests,
// idle keep-alive connections reaped, and a deadline on each write of a
// response rather than on the response, so that a client that stops
// reading is cut while a call held for minutes and the MCP event streams
// are not. The gateway and the console share one quota of calls held open
// (internal/quota), three quarters of the connections
// (listener.Limits.HeldCalls), so that /healthz always finds one.
//
// On shutdown the messaging core first releases the calls held on the
// gateway, then the listener drains, then every part stops; the state
// directory's lock is released last, after the core has closed its
// journal. The agents keep running in herdr; the next start adopts them.
package daemon
