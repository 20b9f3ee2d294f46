// Command fleetd runs and manages a fleet of coding agents inside herdr.
//
// It is thin verbs: each command lives in its own file as an options
// struct that cobra fills from the flags, with Complete, Validate and Run
// (verb.go says how; kubectl's commands are written the same way), and is
// registered in newRootCmd; a command appears in --help only once it works.
// usage.go makes every usage error exit 2 with the problem and a hint (the
// command or flag meant, when it can tell); hints.go writes the commands
// a command suggests next so that they reach the same fleetd (--server,
// --state-dir) and names the broken manifest behind a missing member.
//
// What the commands share is not here: the client of a running fleetd
// (internal/cli/client), the printers of get, describe, inbox and prune
// (internal/cli/printers, with internal/cli/jsonpath), label selectors
// (internal/cli/labels) and the reading of -f (internal/cli/manifests);
// the daemon is internal/daemon; what `fleetd store accept` makes a node
// forget is internal/store/etcdstore's.
package main
