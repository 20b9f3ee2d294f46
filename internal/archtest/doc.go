// Package archtest holds fleetd's architecture test: the package graph the
// code must keep, written down once as data, and a test that fails when an
// import outside it appears.
//
// The graph (graph.go) lists, for every package of the module, what it may
// import besides the standard library: other packages of the module and
// third-party modules. Above it, the layers, bottom first:
//
//	leaves                     atomic files, the clock, notify, sse, retry, the state directory, …
//	api                        the API objects, decode/encode, the store's contract, plan, guard
//	herdr, etcd and git        the herdr client and its simulation, etcd's primitives, git's plumbing
//	controllers and messaging  the controllers, the store backends, the messaging core, harness, tokens, tail
//	mcp and console            the gateway, the console, the stdio bridge, the simulated agents
//	fleet                      the fleet on etcd, the scheduler, messaging across nodes
//	daemon                     the wiring of a running fleetd, its listener
//	cmd                        the commands and the command line's libraries
//
// TestLayers fails on an allowed edge that points up a layer (or a package
// no layer places), so the graph cannot grow an upward edge even on
// purpose without moving a package; TestNoUnusedAllowedEdges fails on an
// edge no import uses, so the graph stays the code's own. Within a layer
// the graph keeps the finer rules: the messaging core free of herdr and of
// the controllers (its herdr adapter, internal/messaging/herdrprompt, is
// where herdr's error codes are read); the controllers free of the harness
// adapters, the token registry, the messaging core, the store backends and
// mcp (they declare the one launch contract, controllers/launch, which
// internal/harness implements); mcp and the console reading the desired
// state through interfaces of their own (the store's contract only for its
// shared errors). Whole-system tests under test/ may import anything and
// nothing imports them. A package missing from the graph fails the test
// too: a new package takes its place in the graph when it is added.
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
