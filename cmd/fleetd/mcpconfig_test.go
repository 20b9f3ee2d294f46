package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestMCPConfig_ShellHarnesses(t *testing.T) {
	tests := []struct {
		harness string
		url     string
		command string
	}{
		{"claude", "", "claude mcp add --transport http fleetd http://127.0.0.1:8080/mcp --header 'Authorization: Bearer ${FLEETD_TOKEN}'\n"},
		{"codex", "http://127.0.0.1:9090/mcp", "codex mcp add fleetd --url http://127.0.0.1:9090/mcp --bearer-token-env-var FLEETD_TOKEN\n"},
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
			export := `export FLEETD_TOKEN="$(cat ` + filepath.Join(stateDir, "primary.token") + `)"` + "\n"
			for _, want := range []string{export, tt.command} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
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
	if diff := cmp.Diff([]string{"mcp-bridge", "--url", defaultGatewayURL, "--token-env", "FLEETD_TOKEN"}, entry.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"FLEETD_TOKEN": readPrimaryToken(t, stateDir)}, entry.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
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
