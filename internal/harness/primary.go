package harness

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/plan"
)

// Harnesses a primary can mount the gateway from (`fleetd mcp-config
// --harness`). The primary is the operator's own session, not a member, so
// these are not herdr agent kinds: claude-desktop is a desktop app.
const (
	PrimaryClaude        = "claude"
	PrimaryCodex         = "codex"
	PrimaryClaudeDesktop = "claude-desktop"
)

// PrimaryHarnesses lists the values [PrimaryConfig] accepts, sorted.
func PrimaryHarnesses() []string {
	return []string{PrimaryClaude, PrimaryClaudeDesktop, PrimaryCodex}
}

// DefaultPrimaryTokenEnv is the variable the primary's harness reads its
// fleetd token from, the same name workers use.
const DefaultPrimaryTokenEnv = plan.MemberTokenEnv

// DefaultPrimaryToolTimeout is the tool-call timeout a primary's harness
// needs: longer than bridge_send's default wait (10 minutes), so the harness
// does not cut off a delegation the gateway is still holding.
const DefaultPrimaryToolTimeout = 11 * time.Minute

// PrimaryInput is what [PrimaryConfig] renders from.
type PrimaryInput struct {
	// Harness is one of [PrimaryHarnesses].
	Harness string
	// URL is the gateway's MCP endpoint.
	URL string
	// TokenFile is the absolute path of STATE_DIR/primary.token. The
	// shell forms (claude, codex) read the token from it when the export
	// runs, so the printed lines carry no secret.
	TokenFile string
	// Token is the primary token's value. Only claude-desktop uses it: the
	// desktop app does not start from a shell, so its config file must
	// carry the value in the bridge's env block (never in args).
	Token string
	// Executable is the absolute path of the fleetd binary (claude-desktop
	// runs it as the command bridge).
	Executable string
	// TokenEnv names the token variable; empty means [DefaultPrimaryTokenEnv].
	TokenEnv string
	// ToolTimeout is the harness's tool-call timeout; zero means
	// [DefaultPrimaryToolTimeout].
	ToolTimeout time.Duration
}

// PrimaryConfig renders what the operator runs (claude, codex: shell lines)
// or pastes (claude-desktop: JSON) so that their own session mounts the
// gateway as the primary.
//
// The token never appears in an argument: the shell forms export it from
// the token file and hand the harness only the variable's name (Codex) or a
// ${VAR} reference Claude Code expands itself — single-quoted so the shell
// does not expand it into argv. Nothing rendered here sets an API endpoint
// or credential variable of the harness (ANTHROPIC_BASE_URL and the like):
// the primary stays on its own subscription.
func PrimaryConfig(in PrimaryInput) (string, error) {
	if in.TokenEnv == "" {
		in.TokenEnv = DefaultPrimaryTokenEnv
	}
	if in.ToolTimeout <= 0 {
		in.ToolTimeout = DefaultPrimaryToolTimeout
	}
	if !v1alpha1.IsEnvName(in.TokenEnv) {
		return "", fmt.Errorf("primary config: token variable %q is not a valid environment variable name", in.TokenEnv)
	}
	if u, err := url.Parse(in.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("primary config: gateway URL %q: want an absolute http:// or https:// URL without user info", in.URL)
	}
	switch in.Harness {
	case PrimaryClaude, PrimaryCodex:
		if !filepath.IsAbs(in.TokenFile) {
			return "", fmt.Errorf("primary config: token file %q: want an absolute path", in.TokenFile)
		}
		if in.Harness == PrimaryClaude {
			return primaryClaude(in), nil
		}
		return primaryCodex(in), nil
	case PrimaryClaudeDesktop:
		return primaryClaudeDesktop(in)
	}
	return "", fmt.Errorf("primary config: unknown harness %q; want one of %s", in.Harness, strings.Join(PrimaryHarnesses(), ", "))
}

// primaryClaude: `claude mcp add --transport http NAME URL --header …`
// stores {"type":"http","url":…,"headers":{…}} with the ${VAR} reference
// intact; Claude Code expands it from its environment at start-up and reads
// its MCP tool-call timeout (milliseconds) from MCP_TOOL_TIMEOUT.
func primaryClaude(in PrimaryInput) string {
	var b strings.Builder
	b.WriteString("# Mount the fleetd gateway in Claude Code as the primary.\n")
	b.WriteString("# Keep both exports in the environment claude starts from (e.g. your shell profile).\n")
	writeTokenExport(&b, in)
	fmt.Fprintf(&b, "export MCP_TOOL_TIMEOUT=%d\n", in.ToolTimeout.Milliseconds())
	fmt.Fprintf(&b, "claude mcp add --transport http %s %s --header %s\n",
		plan.ServerName, shellQuote(in.URL), shellQuote("Authorization: Bearer ${"+in.TokenEnv+"}"))
	return b.String()
}

// primaryCodex: `codex mcp add NAME --url URL --bearer-token-env-var VAR`
// stores url and bearer_token_env_var; Codex reads the variable when it
// starts. Its tool-call timeout is tool_timeout_sec in config.toml, which
// `codex mcp add` cannot set.
func primaryCodex(in PrimaryInput) string {
	var b strings.Builder
	b.WriteString("# Mount the fleetd gateway in Codex as the primary.\n")
	b.WriteString("# Keep the export in the environment codex starts from (e.g. your shell profile).\n")
	writeTokenExport(&b, in)
	fmt.Fprintf(&b, "codex mcp add %s --url %s --bearer-token-env-var %s\n", plan.ServerName, shellQuote(in.URL), in.TokenEnv)
	fmt.Fprintf(&b, "# bridge_send waits up to 10 minutes: under [mcp_servers.%s] in ~/.codex/config.toml add\n", plan.ServerName)
	fmt.Fprintf(&b, "#   tool_timeout_sec = %s\n", strconv.FormatFloat(in.ToolTimeout.Seconds(), 'f', -1, 64))
	return b.String()
}

// writeTokenExport writes the line that puts the primary token in the
// environment without printing it: the command substitution reads the
// 0600 token file when the line runs.
func writeTokenExport(b *strings.Builder, in PrimaryInput) {
	fmt.Fprintf(b, "export %s=\"$(cat %s)\"\n", in.TokenEnv, shellQuote(in.TokenFile))
}

// primaryClaudeDesktop: Claude Desktop speaks stdio only, so its
// claude_desktop_config.json entry runs `fleetd mcp-bridge`, with the token
// in the entry's env block.
func primaryClaudeDesktop(in PrimaryInput) (string, error) {
	if !filepath.IsAbs(in.Executable) {
		return "", fmt.Errorf("primary config: the command bridge needs the absolute path of the fleetd executable, got %q", in.Executable)
	}
	if in.Token == "" {
		return "", fmt.Errorf("primary config: claude-desktop needs the primary token's value for its env block")
	}
	type entry struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	cfg := map[string]map[string]entry{"mcpServers": {plan.ServerName: {
		Command: in.Executable,
		Args:    []string{"mcp-bridge", "--url", in.URL, "--token-env", in.TokenEnv},
		Env:     map[string]string{in.TokenEnv: in.Token},
	}}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("render claude-desktop config: %w", err)
	}
	return string(data) + "\n", nil
}

// shellQuote quotes s for a POSIX shell, leaving plain words as they are.
func shellQuote(s string) string {
	if s != "" && !slices.ContainsFunc([]rune(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
