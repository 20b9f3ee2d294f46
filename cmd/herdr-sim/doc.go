// Command herdr-sim runs the fake herdr server of package herdrsim as a
// process, for `fleetd serve --herdr=sim` and for trying fleetd without
// herdr. Started agents become ready after --ready-delay and, when
// prompted, work for --work-for and go back to idle on their own; time is
// the real clock. Every request is checked against herdr's JSON Schema
// (package herdrsim/validated), so a client that sends what herdr would
// refuse is told so. It prints the socket path and serves until SIGINT or
// SIGTERM.
//
// It is a test double: it runs no processes and must never be mistaken for
// herdr (ping reports herdr's protocol so clients accept it, nothing more).
package main
