// Package listener bounds fleetd's one HTTP listener (the REST API, the MCP
// gateway, /metrics and the console) so that no number of idle, slow or
// stalled clients can take it down, /healthz included: a cap on open
// connections, deadlines on reading a request's headers and the whole
// request, idle keep-alive connections reaped, a bound on the header block,
// and a deadline on each write of a response rather than on the response,
// so that a client that stops reading is cut while a call held for minutes
// and the event streams are not.
//
// [NewServer] returns the http.Server and the capped net.Listener to serve
// it on. [Limits] are the bounds; docs/security.md ("The listener's
// bounds") repeats them for operators.
//
// It never does: look at who is calling (tokens are package mcp's), cut a
// call whose request was read in full and that is waiting for its outcome,
// or keep any state of a connection beyond its own count.
package listener
