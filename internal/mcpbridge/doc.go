// Package mcpbridge relays one MCP session between a stdio boundary and
// fleetd's Streamable HTTP gateway: the engine of `fleetd mcp-bridge`.
//
// A harness that only speaks stdio (Claude Desktop, or any agent kind whose
// HTTP spelling is unproven) launches `fleetd mcp-bridge --url URL` as its MCP
// server. [Run] reads newline-delimited JSON-RPC messages from the harness,
// POSTs each one to the gateway with `Authorization: Bearer <token>`, and
// writes everything the gateway sends back — responses, server-initiated
// requests such as roots/list or sampling, progress and other notifications —
// to the harness. It is a message-level relay built on the go-sdk transports
// ([mcp.IOTransport] on one side, [mcp.StreamableClientTransport] on the
// other): it never parses tool calls, never answers on the gateway's behalf
// and never re-implements an MCP server. The only messages it looks into are
// the initialize exchange, to learn the negotiated protocol version (sent as
// the Mcp-Protocol-Version header) and to open the standalone SSE stream on
// which the gateway sends messages that belong to no request (read through
// internal/sse, bounded per event, resumed with Last-Event-ID after the last
// whole event when it breaks).
//
// What it must never do: put the token anywhere but the Authorization header
// of requests to the gateway's own origin — not in an error, a log line or a
// request to another host a redirect points at. It must not outlive its
// input: when stdin closes it writes the answers to the calls still in
// flight (bounded by Options.DrainTimeout), then ends the gateway session
// (DELETE) and returns nil. A gateway that cannot be reached or answers 401 ends the relay with an
// error that says which, and the harness's pending request is answered with
// that error so the user sees it there too.
package mcpbridge
