package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/harness"
)

func readPrimaryToken(t *testing.T, stateDir string) string {
	t.Helper()
	path := filepath.Join(stateDir, "primary.token")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("primary token: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// adapterOutput is what the harness adapter renders for the primary: the
// command prints exactly that. The harness's own spelling is pinned by the
// adapter's golden files (internal/harness/testdata/primary/), the one
// place it may be written.
func adapterOutput(t *testing.T, in harness.PrimaryInput) string {
	t.Helper()
	out, err := harness.PrimaryConfig(in)
	if err != nil {
		t.Fatalf("harness.PrimaryConfig: %v", err)
	}
	return out
}

func TestMCPConfig_ShellHarnesses(t *testing.T) {
	tests := []struct {
		harness string
		url     string
		command string // what the harness's own "mcp add" line starts with
	}{
		{"claude", "", "claude mcp add "},
		{"codex", "http://127.0.0.1:9090/mcp", "codex mcp add fleetd --url http://127.0.0.1:9090/mcp "},
	}
	for _, tt := range tests {
		t.Run(tt.harness, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			args := []string{"mcp-config", "--harness", tt.harness, "--state-dir", stateDir}
			if tt.url != "" {
				args = append(args, "--url", tt.url)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			token := readPrimaryToken(t, stateDir) // created on first use
			if strings.Contains(stdout, token) {
				t.Errorf("output contains the primary token value:\n%s", stdout)
			}
			tokenFile := filepath.Join(stateDir, "primary.token")
			export := `export FLEETD_TOKEN="$(cat ` + tokenFile + `)"` + "\n"
			for _, want := range []string{export, "\n" + tt.command} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
			url := tt.url
			if url == "" {
				url = defaultGatewayURL
			}
			want := adapterOutput(t, harness.PrimaryInput{Harness: tt.harness, URL: url, TokenFile: tokenFile, Token: token})
			if diff := cmp.Diff(want, stdout); diff != "" {
				t.Errorf("output is not the adapter's (-want +got):\n%s", diff)
			}
			if strings.Contains(stdout, "ANTHROPIC_BASE_URL") {
				t.Errorf("primary config sets ANTHROPIC_BASE_URL:\n%s", stdout)
			}

			// A second run reuses the same token.
			if code, _, stderr := runCLI(t, args...); code != 0 {
				t.Fatalf("second run: exit %d, stderr:\n%s", code, stderr)
			}
			if again := readPrimaryToken(t, stateDir); again != token {
				t.Error("second mcp-config run replaced the primary token")
			}
		})
	}
}

func TestMCPConfig_ClaudeDesktop(t *testing.T) {
	stateDir := t.TempDir()
	code, stdout, stderr := runCLI(t, "mcp-config", "--harness", "claude-desktop", "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(stdout), &cfg); err != nil {
		t.Fatalf("stdout is not the JSON to paste: %v\n%s", err, stdout)
	}
	exe, err := fleetdExecutable()
	if err != nil {
		t.Fatal(err)
	}
	entry := cfg.MCPServers["fleetd"]
	if entry.Command != exe || !filepath.IsAbs(entry.Command) {
		t.Errorf("command = %q, want the absolute path of this executable %q", entry.Command, exe)
	}
	token := readPrimaryToken(t, stateDir)
	if diff := cmp.Diff(map[string]string{"FLEETD_TOKEN": token}, entry.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(entry.Args) == 0 || slices.Contains(entry.Args, token) {
		t.Errorf("args %q: want the bridge's arguments, never the token", entry.Args)
	}
	// The entry itself (its args) is the adapter's spelling.
	want := adapterOutput(t, harness.PrimaryInput{Harness: harness.PrimaryClaudeDesktop, URL: defaultGatewayURL,
		TokenFile: filepath.Join(stateDir, "primary.token"), Token: token, Executable: exe})
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("output is not the adapter's (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr, "claude_desktop_config.json") {
		t.Errorf("stderr does not say where the JSON goes: %q", stderr)
	}
}

func TestMCPConfig_DefaultStateDirFollowsXDG(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	code, stdout, stderr := runCLI(t, "mcp-config", "--harness", "codex")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	tokenFile := filepath.Join(xdg, "fleetd", "primary.token")
	readPrimaryToken(t, filepath.Dir(tokenFile))
	if !strings.Contains(stdout, tokenFile) {
		t.Errorf("output does not read the token from %s:\n%s", tokenFile, stdout)
	}
}

func TestMCPConfig_UsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown harness", []string{"--harness", "gemini"}, `unknown harness "gemini"; want one of claude, claude-desktop, codex`},
		{"no harness", nil, "--harness is required; want one of claude, claude-desktop, codex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			code, stdout, stderr := runCLI(t, append([]string{"mcp-config", "--state-dir", stateDir}, tt.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (usage)", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.want)
			}
			if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
				t.Errorf("a usage error touched the state directory (stat: %v)", err)
			}
		})
	}
}

func TestMCPConfig_BadURL(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mcp-config", "--harness", "claude", "--state-dir", t.TempDir(), "--url", "localhost:8080")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "want an absolute http:// or https:// URL") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the URL problem", code, stdout, stderr)
	}
}

// TestMCPConfig_ExampleKeepsTheExports runs the command line mcp-config's
// help suggests, as printed, in a POSIX shell (fleetd and claude are
// stubs): the exports must still be set in that shell afterwards, where
// claude will start — `fleetd mcp-config … | sh` lost them.
func TestMCPConfig_ExampleKeepsTheExports(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	code, out, stderr := runCLI(t, "mcp-config", "--harness", "claude", "--state-dir", state)
	if code != 0 {
		t.Fatalf("mcp-config: exit %d, stderr %q", code, stderr)
	}
	printed := filepath.Join(t.TempDir(), "printed")
	if err := os.WriteFile(printed, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	example := strings.TrimSpace(strings.Split(newMCPConfigCmd().Example, "\n")[0])
	script := `fleetd() { cat "$PRINTED"; }
claude() { CLAUDE_RAN=1; }
` + example + `
test "$CLAUDE_RAN" = 1 || { echo "claude mcp add did not run"; exit 1; }
test "$FLEETD_TOKEN" = "$(cat "$TOKEN_FILE")" || { echo "FLEETD_TOKEN is not the primary token"; exit 1; }
test "$MCP_TOOL_TIMEOUT" = 660000 || { echo "MCP_TOOL_TIMEOUT=$MCP_TOOL_TIMEOUT"; exit 1; }
`
	cmd := exec.Command(sh, "-e", "-c", script)
	cmd.Env = append(os.Environ(), "PRINTED="+printed, "TOKEN_FILE="+filepath.Join(state, "primary.token"), "FLEETD_TOKEN=", "MCP_TOOL_TIMEOUT=")
	if res, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: %v\n%s", example, err, res)
	}
}
