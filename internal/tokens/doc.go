// Package tokens mints and recognises the bearer tokens callers present to
// fleetd's MCP gateway.
//
// Every member pane fleetd creates gets a fresh worker token (32 bytes from
// crypto/rand, base64url) in its environment as FLEETD_TOKEN. The [Registry]
// remembers each token only as its SHA-256 hash, together with the member's
// name and uid and, once the pane exists, its pane and terminal ids; the
// hashes live in the state database (internal/statedb, one record per
// token, a mint durable before the token is handed out) so panes adopted
// after a fleetd restart keep working. A
// token is revoked by its [ID], by member, or by member and pane together
// ([Registry.RevokeMemberPane]) — never by a pane id alone, which herdr may
// give another member's pane after a restart. The
// primary — the operator's own agent session — authenticates with the token in
// STATE_DIR/primary.token, created on first use by [PrimaryToken]. Package
// statedir names the paths and their modes. In a fleet on etcd the primary
// token is the fleet's, chosen by the node that minted it: a registry
// opened with Options.FleetPrimary reads and creates no primary.token and
// accepts, once told with [Registry.AcceptPrimary], only the token with the
// fleet's hash. There is no rotation here: the caller decides which hash
// is the primary's.
//
// [Registry.Resolve] is what the gateway asks on every request: presented
// token in, [Identity] out. It hashes the presented token and finds the entry
// by that hash, then confirms it with a constant-time comparison, so neither
// the lookup nor the comparison runs in time that depends on how much of a
// valid token a caller guessed.
//
// This package must never write a token value anywhere but the returned
// string and primary.token, and never log one. It does not know about herdr,
// harnesses or HTTP; callers decide when to mint, bind and revoke.
package tokens
