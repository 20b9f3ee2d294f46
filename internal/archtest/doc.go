// Package archtest holds fleetd's architecture test: the package graph the
// code must keep, written down once as data, and a test that fails when an
// import outside it appears.
//
// The graph (graph.go) lists, for every package of the module, what it may
// import besides the standard library: other packages of the module and
// third-party modules. Imports point one way — api at the bottom; the herdr
// client, the clock, atomic files and the state directory beside it; the
// store, work queue, herdr cache and the controllers above them; the
// messaging core free of herdr and of the controllers (its herdr adapter,
// internal/messaging/herdrprompt, is where herdr's error codes are read);
// the controllers free of the harness adapters, the token registry, the
// messaging core and mcp (they declare the one launch contract,
// controllers/launch, which internal/harness implements); mcp reading the
// desired state through an interface of its own rather than
// internal/store; and internal/daemon and the commands wiring it all.
// Whole-system tests under test/ may import anything and nothing imports
// them. A package missing from the graph fails the test too: a new package
// takes its place in the graph when it is added.
//
// The test also checks what the fleetd binary links: not
// github.com/santhosh-tekuri/jsonschema (herdr's JSON Schema validator, used
// only by tests of the fake herdr through herdr/herdrsim/validated).
// github.com/google/jsonschema-go is a different library and stays: it is
// the MCP go-sdk's own tool-schema package, which the SDK and mcp's tool
// definitions need.
//
// Test files are not checked: a test may wire real collaborators (the
// controllers' tests run internal/harness's launcher, for instance). The
// package graph comes from `go list -deps -json ./...`, run by the test;
// [Check] itself is a pure function of that listing and the graph, with its
// own tests on synthetic graphs.
package archtest
