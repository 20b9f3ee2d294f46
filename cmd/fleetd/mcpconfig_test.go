package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/daemon"
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

// startForConfig serves an empty fleet: what mcp-config checks its token
// against. Its state directory holds the primary token it minted.
func startForConfig(t *testing.T, tune ...func(*daemon.Config)) *liveFleetd {
	t.Helper()
	return startFleetd(t, map[string]string{}, tune...)
}

func TestMCPConfig_ShellHarnesses(t *testing.T) {
	t.Parallel()
	f := startForConfig(t)
	tests := []struct {
		harness string
		args    []string
		url     string // the gateway URL printed
		command string // what the harness's own "mcp add" line starts with
		stderr  string
	}{
		{"claude", []string{"--server", f.info.URL}, f.info.MCPURL, "claude mcp add ", ""},
		{"codex", []string{"--server", f.info.URL + "/"}, f.info.MCPURL, "codex mcp add fleetd --url " + f.info.MCPURL + " ", ""},
		// The deprecated spelling still works, and says what replaces it.
		{"codex", []string{"--url", f.info.MCPURL}, f.info.MCPURL, "codex mcp add fleetd --url " + f.info.MCPURL + " ", "fleetd mcp-config: --url is deprecated: use --server"},
	}
	for _, tt := range tests {
		t.Run(tt.harness+strings.Join(tt.args, " "), func(t *testing.T) {
			args := append([]string{"mcp-config", "--harness", tt.harness, "--state-dir", f.stateDir}, tt.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 0 and %q", code, stderr, tt.stderr)
			}
			token := readPrimaryToken(t, f.stateDir)
			if strings.Contains(stdout, token) {
				t.Errorf("output contains the primary token value:\n%s", stdout)
			}
			tokenFile := filepath.Join(f.stateDir, "primary.token")
			export := `export FLEETD_TOKEN="$(cat ` + tokenFile + `)"` + "\n"
			for _, want := range []string{export, "\n" + tt.command} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
			want := adapterOutput(t, harness.PrimaryInput{Harness: tt.harness, URL: tt.url, TokenFile: tokenFile, Token: token})
			if diff := cmp.Diff(want, stdout); diff != "" {
				t.Errorf("output is not the adapter's (-want +got):\n%s", diff)
			}
			if strings.Contains(stdout, "ANTHROPIC_BASE_URL") {
				t.Errorf("primary config sets ANTHROPIC_BASE_URL:\n%s", stdout)
			}
		})
	}
}

func TestMCPConfig_ClaudeDesktop(t *testing.T) {
	t.Parallel()
	f := startForConfig(t)
	code, stdout, stderr := runCLI(t, "mcp-config", "--harness", "claude-desktop", "--state-dir", f.stateDir, "--server", f.info.URL)
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
	token := readPrimaryToken(t, f.stateDir)
	if diff := cmp.Diff(map[string]string{"FLEETD_TOKEN": token}, entry.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if len(entry.Args) == 0 || slices.Contains(entry.Args, token) {
		t.Errorf("args %q: want the bridge's arguments, never the token", entry.Args)
	}
	// The entry itself (its args) is the adapter's spelling.
	want := adapterOutput(t, harness.PrimaryInput{Harness: harness.PrimaryClaudeDesktop, URL: f.info.MCPURL,
		TokenFile: filepath.Join(f.stateDir, "primary.token"), Token: token, Executable: exe})
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("output is not the adapter's (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr, "claude_desktop_config.json") {
		t.Errorf("stderr does not say where the JSON goes: %q", stderr)
	}
}

// TestMCPConfig_DefaultsFollowTheEnvironment: like every client command,
// mcp-config finds fleetd at $FLEETD_SERVER and its state directory under
// $XDG_STATE_HOME — run as its own process, as a user types it.
func TestMCPConfig_DefaultsFollowTheEnvironment(t *testing.T) {
	xdg := t.TempDir()
	f := startForConfig(t, func(c *daemon.Config) { c.StateDir = filepath.Join(xdg, "fleetd") })
	t.Setenv("XDG_STATE_HOME", xdg)
	t.Setenv("FLEETD_SERVER", f.info.URL)
	code, stdout, stderr := execFleetd(t, "mcp-config", "--harness", "codex")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	tokenFile := filepath.Join(xdg, "fleetd", "primary.token")
	for _, want := range []string{tokenFile, "--url " + f.info.MCPURL + " "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestMCPConfig_RefusesAConfigThatWouldGet401: mcp-config prints nothing a
// harness would be refused with, says why, and never creates a primary
// token in a state directory no running fleetd uses (it used to, and the
// harness then got 401: `claude mcp list` said "Failed to connect").
func TestMCPConfig_RefusesAConfigThatWouldGet401(t *testing.T) {
	t.Parallel()
	f := startForConfig(t)
	free := freeAddress("127.0.0.1:1") // nothing listens there
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "primary.token"), []byte("not-the-token-of-that-fleetd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "state")
	for _, tt := range []struct {
		name      string
		args      []string
		wantErr   string
		tokenMade string // a state directory where no token may appear
	}{
		{"no fleetd at --server", []string{"--server", "http://" + free, "--state-dir", f.stateDir},
			"fleetd mcp-config: cannot reach fleetd at http://" + free, ""},
		{"no token in the state directory", []string{"--server", f.info.URL, "--state-dir", empty},
			"fleetd mcp-config: no primary token in " + empty + ": no fleetd has started with this state directory", empty},
		{"another fleetd's state directory", []string{"--server", f.info.URL, "--state-dir", other},
			"fleetd mcp-config: the fleetd at " + f.info.URL + " refuses the primary token in " + other + ", so your harness would be refused too: that fleetd uses another state directory; give its --state-dir", ""},
		{"not a URL", []string{"--server", "localhost:8080", "--state-dir", f.stateDir},
			"fleetd mcp-config: --server localhost:8080: want an absolute http:// or https:// URL", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := execFleetd(t, append([]string{"mcp-config", "--harness", "claude"}, tt.args...)...)
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing printed, and %q", code, stdout, stderr, tt.wantErr)
			}
			if tt.tokenMade != "" {
				if _, err := os.Stat(tt.tokenMade); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("mcp-config created %s (stat: %v); it must not mint a token no fleetd uses", tt.tokenMade, err)
				}
			}
		})
	}
}

func TestMCPConfig_UsageErrors(t *testing.T) {
	t.Parallel()
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

// TestMCPConfig_ExampleKeepsTheExports runs the command line mcp-config's
// help suggests, as printed, in a POSIX shell (fleetd and claude are
// stubs): the exports must still be set in that shell afterwards, where
// claude will start — `fleetd mcp-config … | sh` lost them.
func TestMCPConfig_ExampleKeepsTheExports(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	f := startForConfig(t)
	code, out, stderr := runCLI(t, "mcp-config", "--harness", "claude", "--state-dir", f.stateDir, "--server", f.info.URL)
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
	cmd.Env = append(os.Environ(), "PRINTED="+printed, "TOKEN_FILE="+filepath.Join(f.stateDir, "primary.token"), "FLEETD_TOKEN=", "MCP_TOOL_TIMEOUT=")
	if res, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: %v\n%s", example, err, res)
	}
}
