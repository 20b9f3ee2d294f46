// Package daemon assembles a running fleetd: it checks that the state
// directory is safe to trust and takes its lock (package statedir), opens the token registry, the harness launcher,
// the desired-state store and the messaging core (its journal in the state
// directory), starts the member controller against herdr (or the embedded
// simulated herdr), and serves the REST API, the MCP gateway, /metrics and
// the browser console (/ui, package console, behind the same loopback Host
// check) on one loopback listener until its context ends.
//
// It owns start-up order and shutdown, nothing else: every behaviour lives
// in the packages it wires together. It refuses to start on a manifests
// directory that is missing or unreadable (the store would serve an empty
// fleet), and logs every herdr call at debug level through the client's
// observer, which sees methods and outcomes, never parameters or tokens.
//
//   - Before the controllers run, every worker token that no ownership
//     record holds is revoked (tokens of panes whose record was lost, of
//     launches that never got their pane recorded); the controllers release
//     each recorded pane's token when that pane ends.
//   - The controllers feed the messaging core every agent status they
//     observe (ObserveStatus) and every pane gone for good (WorkerGone,
//     which also lets bridge_stop's wait end), through the first-prompt
//     controller (FirstPrompts.WorkerGone), so that a first prompt dropped
//     untyped with a replaced pane is owed to the next one.
//   - The desired state feeds the core's admit and gone policies
//     (messaging.AdmitMembers, messaging.ReportGoneMembers) through
//     [Roster], a thin adapter over the store; the members with their
//     status feed the first-prompt controller (messaging.FirstPrompts).
//   - With Config.PrimaryPane (`fleetd serve --primary-pane`) the
//     primary-pane follower (controllers.FollowPrimaryPane, reading the
//     controllers' shared herdr cache) feeds the primary pane's agent status
//     to the core under the primary's name, so that replies nobody waits for
//     are typed into that pane when its agent is idle or done, besides
//     landing in the durable mailbox.
//   - The desired state is the manifests directory (internal/store), or
//     with Config.Etcd (`fleetd serve --store etcd`) etcd (internal/store/etcdstore):
//     the node is registered under a lease before anything reconciles, its
//     store shows the controllers only the members bound to it, every node
//     campaigns to be the fleet's scheduler (etcdstore.RunScheduler), and
//     the store reads the prefix once
//     before the listener serves. A refused TLS handshake, which etcd's
//     client reports only as a timeout, is explained by a probe of the
//     endpoints. The registration carries the node's labels and capacity,
//     and is kept current with its herdr (version, protocol and
//     reachability: the controllers' HerdrSynced, and herdr's last ping as
//     the daemon's own fleetd_herdr_info shows it) and member count, written
//     only when they change;
//     GET /nodes serves every registration from the store's watch. The
//     node publishes the status of each member it runs, with the messaging
//     core's state of it, at PREFIX/status/MEMBER (fleetstatus.go,
//     etcdstore.PublishStatuses: written only when it changes, in bursts of
//     at most 3 and then once a second per member, deleted when the node
//     stops running it). The REST API's members — and bridge_list's,
//     `?wait=true`'s and the console's — are the whole fleet (fleetView):
//     this node's with their
//     status, another node's with the status that node published when it is
//     the node the member is bound to and it is Ready, NodeLost when its
//     lease expired, OnAnotherNode (with why) otherwise, and the unbound
//     with why no node takes them (Unschedulable). fleetView.RemoteWorker
//     gives a remote member's published messaging state, for bridge_status.
//     The fleet has one primary token (fleettoken.go): its hash is at
//     PREFIX/tokens/primary, claimed by the first node with a
//     create-if-absent transaction; every node's registry accepts only that
//     token, and follows the hash when it changes.
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
// [Run] runs the parts in one errgroup: the first to fail cancels the
// others and its error is the one returned. On shutdown the messaging core
// first releases the calls held on the gateway, then the listener drains,
// then every part stops; the state directory's lock is released last,
// after the core has closed its journal. The agents keep running in herdr;
// the next start adopts them.
package daemon
