// Package vocab guards fleetd's vocabulary (DESIGN §1): target selection,
// canonical wire transport and harness spelling are three layers that never
// share words.
//
// The package has no code of its own. Its test, the negative vocabulary
// sweep, walks every file of the repository (tracked and untracked, minus
// what .gitignore ignores) and fails when
//
//   - the legacy transport mode that conflated target and transport appears
//     outside the one-shot migration (internal/migrate/, whose testdata
//     holds the legacy example), or
//   - a vendor spelling of a transport — Codex's underscore spelling of
//     Streamable HTTP, an MCP server entry typed "http" in JSON as Claude
//     Code writes it, Claude's CLI flag selecting that transport (as a
//     shell line or argv), or a command-bridge entry (an MCP server entry
//     whose args start with fleetd's bridge subcommand, in JSON, TOML, a
//     Codex -c override or a Go slice, or whose command string runs it) —
//     appears outside the harness adapters (internal/harness/, with their
//     tests and golden files). `fleetd mcp-config` prints the adapter's
//     output (harness.PrimaryConfig); its command file and tests only
//     compare against it, and the operator guide points at the adapter's
//     golden files instead of repeating the spellings.
//
// The allowed places are listed once, in the sweep's rules. Widening them
// is a design change, not a test fix.
package vocab
