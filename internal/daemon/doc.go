// Package daemon assembles a running fleetd: it takes the state directory's
// lock (package statedir), opens the token registry, the harness launcher,
// the desired-state store and the messaging core (its journal in the state
// directory), starts the member controller against herdr (or the embedded
// simulated herdr), and serves the REST API, the MCP gateway and /metrics
// on one loopback listener until its context ends.
//
// It owns start-up order and shutdown, nothing else: every behaviour lives
// in the packages it wires together.
//
//   - Before the controllers run, every worker token that no ownership
//     record holds is revoked (tokens of panes whose record was lost, of
//     launches that never got their pane recorded); the controllers release
//     each recorded pane's token when that pane ends.
//   - The controllers feed the messaging core every agent status they
//     observe (ObserveStatus) and every pane gone for good (WorkerGone,
//     which also lets bridge_stop's wait end).
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
//
// [Run] runs the parts in one errgroup: the first to fail cancels the
// others and its error is the one returned. On shutdown the messaging core
// first releases the calls held on the gateway, then the listener drains,
// then every part stops; the state directory's lock is released last,
// after the core has closed its journal. The agents keep running in herdr;
// the next start adopts them.
package daemon
