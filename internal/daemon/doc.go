// Package daemon assembles a running fleetd: it opens the state directory,
// the token registry, the harness launcher and the messaging core (its
// journal under STATE_DIR/messages), starts the member controller against
// herdr (or the embedded simulated herdr), and serves the REST API, the MCP
// gateway and /metrics on one loopback listener until its context ends.
//
// The controllers feed the messaging core: every agent status they observe
// (ObserveStatus) and every pane gone for good (WorkerGone, which also lets
// bridge_stop's wait end). The desired state feeds it too
// (ReportGoneMembers, AdmitMembers): a member paused or deleted, with a pane
// or without one, and on start-up one paused or deleted while fleetd was
// down, is reported gone, so that nothing waits on it forever; new messages
// go only to running members. A member's spec.prompt is queued once, as a
// detached send from the primary, when the member is first Ready; which
// members got theirs is kept by uid in STATE_DIR/prompts-delivered.json.
//
// With Config.PrimaryPane (`fleetd serve --primary-pane`) it also wires the
// primary-pane follower (controllers.FollowPrimaryPane, reading the
// controllers' shared herdr cache) to the core under the primary's name, so
// that replies nobody waits for are typed into that pane when its agent is
// idle or done, besides landing in the durable mailbox.
//
// It owns start-up order and shutdown, nothing else: every behaviour lives in
// the packages it wires together. On shutdown the messaging core releases
// the calls held on the gateway, and the agents keep running in herdr; the
// next start adopts them.
package daemon
