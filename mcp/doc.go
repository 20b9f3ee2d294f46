// Package mcp is fleetd's north face: the HTTP listener that carries the REST
// API (GET /members, GET /members/{name}, health and readiness, /metrics)
// and, at /mcp, the MCP gateway.
//
// Every request that reads or changes the fleet is authenticated by its
// bearer token, resolved to an identity (the primary, or one worker) by a
// token registry the package is given; nothing a caller sends in a body or
// query can change who the caller is. Health, readiness and metrics are
// open, because the listener is loopback-only by default and Prometheus
// scrapes without a token. Requests whose Host header is not a loopback name
// are refused while the listener is on loopback, which defeats DNS
// rebinding from a browser.
//
// This package holds no fleet state of its own: members and their events
// come from the controllers through [MemberSource]. It never logs a token.
package mcp
