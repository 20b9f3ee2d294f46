// Package harness holds the harness adapters: the only code in fleetd that
// knows how one installed coding-agent harness (Claude Code, Codex, …)
// wants an MCP server written in its own configuration. Adapters turn a
// resolved plan — target, canonical transport (stdio or streamable-http),
// URL and credential slot name — into a herdr launch spec.
//
// Vendor spellings of a transport live here and nowhere else; the
// vocabulary sweep in internal/vocab fails the build when one leaks out.
// An adapter never sees a secret value and never writes one to disk.
package harness
