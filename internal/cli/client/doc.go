// Package client is the fleetd CLI's client of a running fleetd: its REST
// API (GET, POST and DELETE of members, profiles, tenants, nodes and the
// inbox; the members' events; the manifests' errors; the rollouts of
// profiles and members, their watch, revisions and writes; the held prune
// and its confirmation) and its MCP gateway
// (bridge_send), as the holder of one bearer token — the primary's, or a
// worker's own $FLEETD_TOKEN.
//
// A [Client] makes each request with the token and a 30-second bound; a
// non-2xx answer is an [*HTTPError] carrying fleetd's code word and
// message ([IsNotFound] for a 404). The long-lived calls have their own
// bounds: the member and event watches ([Client.WatchMembers],
// [Client.WatchEvents]) and a log follow ([Client.FollowLogs]) are
// server-sent event streams read with package sse, each event bounded, a
// watch ended when it hears nothing — not even fleetd's heartbeat — for a
// minute; a held inbox poll and bridge_send are
// bounded by their own timeout plus a margin, so that fleetd's timeout
// answer arrives first.
//
// The member watch applies a filter on the client, the way a Kubernetes
// watch with a label selector behaves on the server: a member that stops
// matching is DELETED from the watch, one that starts is ADDED.
//
// It never does: read the token itself (its caller resolves --state-dir
// and $FLEETD_TOKEN), print anything, or put the token anywhere but the
// Authorization header of requests to the fleetd it was made for. What
// fleetd answers is someone else's text: [HTTPError.Error] makes it safe
// for a terminal on one line (package termtext).
package client
