package harness

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
)

// Input is what an adapter renders: the member's resolved plan rows plus the
// few facts about this fleetd the rendering needs.
type Input struct {
	// Rows are the member's plan rows (package plan). Each row's
	// CredentialEnv names the pane variable holding its credential.
	Rows []v1alpha1.PlanRow
	// ToolTimeout is how long the harness lets one MCP tool call run; zero
	// means v1alpha1.DefaultToolTimeout. A blocking bridge_ask must fit.
	ToolTimeout time.Duration
	// ConfigDir is the absolute directory the rendering's Files are written
	// to (the launcher's per-member directory under the state directory).
	ConfigDir string
	// Executable is the absolute path of the fleetd binary, run as
	// `fleetd mcp-bridge` by command-bridge entries.
	Executable string
}

// File is a configuration file an adapter wants written (mode 0600) before
// the harness starts. Its content holds environment-variable references,
// never a secret value.
type File struct {
	Path string
	Data []byte
}

// Rendering is an adapter's output for one member.
type Rendering struct {
	// Args are appended to the profile's args in agent.start.
	Args []string
	// Env is pane environment the adapter needs (timeouts, config paths).
	// It never holds a credential.
	Env map[string]string
	// Files are written under Input.ConfigDir before the pane is created.
	Files []File
}

// Adapter renders a plan into one harness's own spelling. Render is pure:
// it reads nothing and writes nothing.
type Adapter interface {
	Render(in Input) (Rendering, error)
}

// For returns the adapter for a Profile's spec.harness (a herdr agent kind,
// matched case-insensitively, in any spelling herdr accepts): [Claude] for
// claude, [Codex] for codex, and [Generic] for every other kind.
func For(harness string) Adapter {
	switch CanonicalKind(harness) {
	case "claude":
		return Claude{}
	case "codex":
		return Codex{}
	default:
		return Generic{}
	}
}

// CanonicalKind returns herdr's canonical name for the agent kind harness
// (herdr.CanonicalKind of it, trimmed): herdr reports agents, and their
// agent_session, under the canonical kind.
func CanonicalKind(harness string) string { return herdr.CanonicalKind(strings.TrimSpace(harness)) }

// Kinds returns the canonical agent kinds herdr's agent.start accepts:
// protocol 20's, and qwen (Qwen Code, executable qwen), which protocol 22
// added. Every one of them can be a member: claude and codex through their
// own adapters, the rest through [Generic].
func Kinds() []string {
	return []string{
		"pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
		"copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki", "qwen",
	}
}

// bridgeArgs are the arguments after the fleetd executable for a command
// entry that runs `fleetd mcp-bridge`: a stdio MCP server on the harness
// side relaying to row's Streamable HTTP URL with the bearer token read from
// the row's credential variable.
func bridgeArgs(row v1alpha1.PlanRow) []string {
	return []string{"mcp-bridge", "--url", row.URL, "--token-env", row.CredentialEnv}
}

var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// check validates what every adapter relies on, so a malformed row can
// never smuggle syntax into a config key or an argument.
func (in Input) check(needFiles bool) error {
	if len(in.Rows) == 0 {
		return fmt.Errorf("render harness config: plan has no rows")
	}
	for i, r := range in.Rows {
		if !serverNameRE.MatchString(r.Server) {
			return fmt.Errorf("render harness config: row %d: server name %q is not [A-Za-z0-9_-]+", i, r.Server)
		}
		if r.URL == "" {
			return fmt.Errorf("render harness config: row %d (%s): no URL", i, r.Server)
		}
		if !v1alpha1.IsEnvName(r.CredentialEnv) {
			return fmt.Errorf("render harness config: row %d (%s): credential slot %q is not an environment variable name", i, r.Server, r.CredentialEnv)
		}
		switch r.Transport {
		case v1alpha1.TransportStdio, v1alpha1.TransportStreamableHTTP:
		default:
			return fmt.Errorf("render harness config: row %d (%s): unknown transport %q", i, r.Server, r.Transport)
		}
		if r.Transport == v1alpha1.TransportStdio && !filepath.IsAbs(in.Executable) {
			return fmt.Errorf("render harness config: row %d (%s): stdio needs the absolute path of the fleetd executable, got %q", i, r.Server, in.Executable)
		}
	}
	if needFiles && !filepath.IsAbs(in.ConfigDir) {
		return fmt.Errorf("render harness config: config directory %q is not absolute", in.ConfigDir)
	}
	return nil
}

func (in Input) toolTimeout() time.Duration {
	if in.ToolTimeout <= 0 {
		return v1alpha1.DefaultToolTimeout
	}
	return in.ToolTimeout
}
