// Package guard enforces the subscription boundary on spawn requests that
// arrive over MCP (bridge_spawn) or REST (POST /members).
//
// The primary runs on the operator's subscription; workers may be pointed at
// other endpoints or accounts, but only by an operator's Profile file. So
// nothing in a spawn request may set, read or forward a credential-bearing
// variable (ANTHROPIC_BASE_URL, *_API_KEY, *_TOKEN, …), carry an
// environment bag, headers, or an endpoint URL. [CheckSpawn] and
// [CheckSpawnJSON] walk the whole request, at every depth, and return a
// [*BoundaryError] (code subscription_boundary, REST 403) for the first
// thing that crosses the line. The exact rule is on [CheckSpawnJSON].
//
// This package only judges requests. It never reads the process
// environment, never echoes a request's values in an error (only the path
// of the offending field), and knows nothing about Profiles, which are
// trusted operator files and are not checked here.
package guard
