// Package daemon assembles a running fleetd: it opens the state directory,
// the token registry and the harness launcher, starts the member controller
// against herdr (or the embedded simulated herdr), and serves the REST API,
// the MCP gateway and /metrics on one loopback listener until its context
// ends.
//
// It owns start-up order and shutdown, nothing else: every behaviour lives in
// the packages it wires together. On shutdown the agents keep running in
// herdr; the next start adopts them.
package daemon
