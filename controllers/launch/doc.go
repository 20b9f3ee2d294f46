// Package launch is the one contract between the member reconciler
// (package controllers) and whatever prepares a member's pane: the
// [Launcher] interface and the [Spec] it returns. The controllers declare
// what they consume here, in a leaf package of their own, so that the
// implementation — fleetd's harness adapters in internal/harness, which
// resolve the MCP plan, write harness config files and mint the pane's token
// — can satisfy it directly without importing the reconciler (and, through
// it, the herdr client and the store), and the reconciler never imports the
// harness adapters or the token registry.
//
// A Launcher that is also a [Resumer] can relaunch a member's agent into the
// agent's own earlier session — herdr's agent_session of the pane that died
// — with the harness's resume command; the [Spec] then says which session it
// resumed. A session that cannot be resumed is refused with
// [ErrCannotResume] before anything is prepared, and the reconciler starts
// the member afresh instead.
//
// The package holds types only (and that one sentinel error): no state, no
// I/O, and it imports nothing of fleetd's but the API types. A Spec's token
// is an opaque handle: the reconciler hands it back to [Launcher.Bind] and
// never looks inside.
package launch
