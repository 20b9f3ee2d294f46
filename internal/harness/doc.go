// Package harness holds the harness adapters: the only code in fleetd that
// knows how one installed coding-agent harness (Claude Code, Codex, …) wants
// an MCP server written in its own configuration, and the [Launcher] that
// turns a Member into what the reconciler hands herdr. The Launcher
// implements the reconciler's contract, controllers/launch.Launcher,
// directly: it returns a launch.Spec whose token is the minted token's id as
// an opaque string, and this package imports only that leaf package of the
// controllers side, never the reconciler.
//
// An [Adapter] renders a member's resolved plan rows (package plan: target,
// canonical transport stdio or streamable-http, URL, credential slot name)
// into a [Rendering]: extra agent.start arguments, pane environment, and
// config files. [Claude] writes an MCP JSON file passed with --mcp-config
// and sets MCP_TOOL_TIMEOUT; [Codex] passes -c mcp_servers.fleetd.… overrides
// including tool_timeout_sec; [Generic] serves every other herdr agent kind
// with a command entry that runs `fleetd mcp-bridge` (stdio toward the
// harness, Streamable HTTP toward the gateway). Each adapter's doc says which
// spellings were checked against the real CLI and which were not.
//
// [Launcher.Prepare] resolves the plan, renders the adapter, writes its files
// (mode 0600, atomically) under STATE_DIR/harness/MEMBER/, mints the pane's
// token and assembles the pane environment: the profile's env, the adapter's,
// FLEETD_TOKEN, FLEETD_URL, FLEETD_MEMBER and, for tenant members only, the
// tenant credential under FLEETD_TENANT_TOKEN.
//
// [Launcher.PrepareResume] is Prepare for a relaunch into the agent's own
// earlier session (herdr's agent_session): [ResumeArgs] appends the
// harness's resume command — Claude Code `--resume ID`, Codex `resume ID`
// — after everything else, or refuses with launch.ErrCannotResume (a
// harness without a known resume command, a transcript path, another agent
// kind's session, a value that could pass for an option or carries control
// characters) before anything is written or minted.
//
// Vendor spellings of a transport live here and nowhere else; the vocabulary
// sweep in internal/vocab fails the build when one leaks out. Tokens and
// credentials reach argv and config files only as environment-variable
// references (${FLEETD_TOKEN}, bearer_token_env_var, --token-env); their
// values go into the pane environment and nowhere else.
package harness
