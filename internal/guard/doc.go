// Package guard enforces the subscription boundary on spawn requests that
// arrive over MCP (bridge_spawn) or REST (POST /members).
//
// The primary runs on the operator's subscription; workers may be pointed at
// other endpoints or accounts, but only by an operator's Profile file. So
// nothing in a spawn request may set, read or forward a credential-bearing
// variable (ANTHROPIC_BASE_URL, *_API_KEY, *_TOKEN, …), carry an
// environment bag, headers, or an endpoint URL. [CheckSpawnJSON] walks the
// whole request as it arrived — the raw bytes, so that a duplicate key
// cannot hide a value from it — at every depth, and returns a
// [*BoundaryError] (code subscription_boundary, REST 403) for the first
// thing that crosses the line. The exact rule is on [CheckSpawnJSON]; the
// words that give a key away are api/v1alpha1's one closed-spec word list
// ([v1alpha1.ClassifyKey]), shared with the manifest decoder.
//
// Profiles and Tenants may also be written over REST and the console (the
// primary's token): [CheckObjectWrite] holds such a write to the same line.
// It may keep what the stored definition — the operator's file, or what
// the operator put into etcd — already says, but never add or change a
// Profile's environment entry or argument that names or carries a
// credential or an endpoint, nor point a Tenant at a provider's variable.
//
// This package only judges requests. It never reads the process
// environment, never echoes a request's values in an error (only the path
// of the offending field), and never judges a definition read from the
// operator's manifests directory or etcd: those are trusted.
package guard
