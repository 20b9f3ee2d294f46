// Package mcp is fleetd's north face: the HTTP listener that carries the REST
// API (GET, POST and DELETE /members, the member watch; GET, POST, PUT and
// DELETE /profiles and /tenants, the primary's, their writes held to the
// subscription guard, a Profile with its status; the rollouts of Profiles
// and Members at /rollouts, the primary's — status and its watch,
// revisions, undo, restart, pause and resume (rest_rollout.go) — writing
// through the same desired state; a member's terminal tail at
// /members/{ref}/logs, an event stream with follow=1; the caller's mailbox
// at /inbox; health and readiness; /metrics) and, at /mcp, the MCP gateway with the eleven
// bridge_* tools of DESIGN §5.2, whose one write, bridge_spawn, writes
// Members only. [Mailbox] is bridge_poll and bridge_ack as a type that other
// packages can use.
//
// Every request that reads or changes the fleet is authenticated by its
// bearer token, resolved to an identity (the primary, or one worker) by a
// token registry the package is given; nothing a caller sends in a body,
// query or tool argument can change who the caller is. An MCP session is
// bound to the token that opened it: the same session with another token is
// refused. Health, readiness and metrics are open, because the listener is
// loopback-only by default and Prometheus scrapes without a token. Requests
// whose Host header is not a loopback name are refused while the listener is
// on loopback (and the go-sdk's own DNS-rebinding check is on), which
// defeats DNS rebinding from a browser.
//
// The tools are thin adapters: messaging (bridge_send, bridge_reply,
// bridge_ask, bridge_poll, bridge_ack, bridge_status) goes to the messaging
// core through [Messenger]; members are read from [MemberSource] and written
// through [DesiredState] (a manifest file appears or disappears — the
// directory stays the source of truth). Both are interfaces declared here:
// this package never imports the controllers or their store. Who may call what is decided here:
// send, spawn and stop are the primary's; reply and ask are a worker's; a
// worker's status is its own. Spawns pass the subscription guard on the
// arguments exactly as sent, then the Member's closed shape and strict
// decoding, before anything is written. Every tool error carries a stable
// code word (forbidden, not_found, worker_gone, invalid_spec,
// subscription_boundary, too_large, …), as structured content {code,
// message} and as the text "code: message"; REST errors carry the same word
// in {"error": {"code", "message"}} with the matching status.
//
// Inputs are bounded where they enter (limits.go): every timeoutMs lies in
// [0, MaxTimeout], bridge_poll returns a bounded page with a cursor and sends
// each content once (in the structured result; its text block only
// summarises), each bearer token's tool calls pass a token bucket
// (rate_limited beyond it), and every call held open — a wait, a watch, a
// log follow, a session's event stream — takes a slot of the held-call
// quota (Options.Holds, shared with the console): a few per worker token,
// three quarters for the workers together, the rest the primary's
// (too_many_waiters, HTTP 429, beyond it), so that one worker never fills
// the listener.
//
// MCP sessions are bounded (sessions.go): a session with no request in
// flight for Options.SessionTimeout is closed, and a token holds at most
// Options.MaxSessionsPerToken, a new one evicting that token's least
// recently used idle session (429 when none is idle).
//
// The member watch (rest_watch.go, GET /members?watch=1) is a server-sent
// event stream fed by one subscription to the controllers' status changes
// (MemberWaiter), shared by every open stream and running only while one
// is: a stream that falls behind (by events or bytes) is dropped rather
// than waited for, a worker token holds at most Options.MaxWatchersPerToken
// and the workers together three quarters of Options.MaxWatchers (the log
// follow is bounded the same way), and a heartbeat comment keeps a quiet
// one open. The event watch (rest_events.go,
// GET /events?watch=1) waits on the same change signal, one loop per
// stream that diffs the members' events against what it sent, and counts
// as a member watch. They and the log follow write their events through
// internal/sse, fleetd's one event-stream framing. GET /manifests/errors
// (rest_manifests.go) serves the desired state's current problems to the
// primary; GET /prune and POST /prune/confirm (rest_prune.go) the members
// whose prune the store holds, and their confirmation. Members are named the same way everywhere — name, pane,
// terminal or session id — by the one resolver, [ResolveMember]
// (memberref.go).
//
// This package holds no fleet state of its own and never logs a token or a
// message's content.
package mcp
