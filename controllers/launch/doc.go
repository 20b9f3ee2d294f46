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
// The package holds types only: no state, no I/O, and it imports nothing of
// fleetd's but the API types. A Spec's token is an opaque handle: the
// reconciler hands it back to [Launcher.Bind] and never looks inside.
package launch
