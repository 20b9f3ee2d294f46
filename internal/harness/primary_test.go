package harness

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const primaryTestToken = "prim-TOKEN-0123456789abcdefghijklmnopqrstuv"

func primaryInput(harness string) PrimaryInput {
	return PrimaryInput{
		Harness:    harness,
		URL:        "http://127.0.0.1:8080/mcp",
		TokenFile:  "/home/op/.local/state/fleetd/primary.token",
		Token:      primaryTestToken,
		Executable: "/opt/fleetd/bin/fleetd",
	}
}

// updatingGolden reports whether the package's -update test flag is set.
// The flag is looked up rather than declared: one definition per test
// binary, and the adapters' tests own it.
func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func checkPrimaryGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "primary", name+".golden")
	if updatingGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestPrimaryConfig_Golden(t *testing.T) {
	for _, h := range PrimaryHarnesses() {
		t.Run(h, func(t *testing.T) {
			got, err := PrimaryConfig(primaryInput(h))
			if err != nil {
				t.Fatalf("PrimaryConfig: %v", err)
			}
			checkPrimaryGolden(t, h, got)
		})
	}
}

func TestPrimaryConfig_NeverCarriesHarnessCredentials(t *testing.T) {
	for _, h := range PrimaryHarnesses() {
		t.Run(h, func(t *testing.T) {
			got, err := PrimaryConfig(primaryInput(h))
			if err != nil {
				t.Fatalf("PrimaryConfig: %v", err)
			}
			for _, banned := range []string{"ANTHROPIC_", "OPENAI_", "BASE_URL", "API_KEY"} {
				if strings.Contains(got, banned) {
					t.Errorf("config mentions %s:\n%s", banned, got)
				}
			}
		})
	}
}

// The shell forms run as printed: the export reads the token file, and the
// harness CLI receives the exact documented arguments — with the token only
// as a ${VAR} reference or a variable name, never as a value.
func TestPrimaryConfig_ShellLinesRunAsDocumented(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no POSIX shell to run the printed lines: %v", err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "state dir", "primary.token") // a space, to exercise quoting
	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(primaryTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		harness string
		argv    []string
	}{
		{PrimaryClaude, []string{"claude", "mcp", "add", "--transport", "http", "fleetd", "http://127.0.0.1:8080/mcp", "--header", "Authorization: Bearer ${FLEETD_TOKEN}"}},
		{PrimaryCodex, []string{"codex", "mcp", "add", "fleetd", "--url", "http://127.0.0.1:8080/mcp", "--bearer-token-env-var", "FLEETD_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.harness, func(t *testing.T) {
			in := primaryInput(tt.harness)
			in.TokenFile = tokenFile
			script, err := PrimaryConfig(in)
			if err != nil {
				t.Fatalf("PrimaryConfig: %v", err)
			}
			if strings.Contains(script, primaryTestToken) {
				t.Fatalf("shell lines contain the token value:\n%s", script)
			}
			// Stand-ins for the harness CLIs print their argv and the token
			// they would find in their environment.
			stubs := `claude() { printf '%s\n' claude "$@"; printf 'env=%s\n' "$FLEETD_TOKEN"; }
codex() { printf '%s\n' codex "$@"; printf 'env=%s\n' "$FLEETD_TOKEN"; }
`
			out, err := exec.Command(sh, "-e", "-c", stubs+script).CombinedOutput()
			if err != nil {
				t.Fatalf("run printed lines: %v\n%s", err, out)
			}
			want := append(append([]string{}, tt.argv...), "env="+primaryTestToken)
			if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")); diff != "" {
				t.Errorf("harness CLI saw (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrimaryConfig_ClaudeDesktopKeepsTokenInEnv(t *testing.T) {
	got, err := PrimaryConfig(primaryInput(PrimaryClaudeDesktop))
	if err != nil {
		t.Fatalf("PrimaryConfig: %v", err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(got), &cfg); err != nil {
		t.Fatalf("claude-desktop config is not JSON: %v\n%s", err, got)
	}
	e, ok := cfg.MCPServers["fleetd"]
	if !ok {
		t.Fatalf("no fleetd server in %s", got)
	}
	if diff := cmp.Diff([]string{"mcp-bridge", "--url", "http://127.0.0.1:8080/mcp", "--token-env", "FLEETD_TOKEN"}, e.Args); diff != "" {
		t.Errorf("bridge args (-want +got):\n%s", diff)
	}
	if e.Command != "/opt/fleetd/bin/fleetd" {
		t.Errorf("command = %q, want the fleetd executable", e.Command)
	}
	if diff := cmp.Diff(map[string]string{"FLEETD_TOKEN": primaryTestToken}, e.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestPrimaryConfig_Errors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*PrimaryInput)
		want   string
	}{
		{"unknown harness", func(in *PrimaryInput) { in.Harness = "gemini" }, `unknown harness "gemini"; want one of claude, claude-desktop, codex`},
		{"relative URL", func(in *PrimaryInput) { in.URL = "127.0.0.1:8080/mcp" }, "want an absolute http:// or https:// URL"},
		{"URL with user info", func(in *PrimaryInput) { in.URL = "http://a:b@127.0.0.1/mcp" }, "without user info"},
		{"relative token file", func(in *PrimaryInput) { in.TokenFile = "primary.token" }, "token file \"primary.token\": want an absolute path"},
		{"bad variable name", func(in *PrimaryInput) { in.TokenEnv = "FLEETD TOKEN" }, "not a valid environment variable name"},
		{"desktop without executable", func(in *PrimaryInput) { in.Harness = PrimaryClaudeDesktop; in.Executable = "fleetd" }, "absolute path of the fleetd executable"},
		{"desktop without token", func(in *PrimaryInput) { in.Harness = PrimaryClaudeDesktop; in.Token = "" }, "needs the primary token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := primaryInput(PrimaryClaude)
			tt.modify(&in)
			_, err := PrimaryConfig(in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PrimaryConfig = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPrimaryConfig_ToolTimeout(t *testing.T) {
	in := primaryInput(PrimaryClaude)
	in.ToolTimeout = 30 * time.Minute
	got, err := PrimaryConfig(in)
	if err != nil {
		t.Fatalf("PrimaryConfig: %v", err)
	}
	if !strings.Contains(got, "export MCP_TOOL_TIMEOUT=1800000\n") {
		t.Errorf("claude lines do not set MCP_TOOL_TIMEOUT to 30m in ms:\n%s", got)
	}
	in.Harness = PrimaryCodex
	if got, _ = PrimaryConfig(in); !strings.Contains(got, "tool_timeout_sec = 1800\n") {
		t.Errorf("codex lines do not name tool_timeout_sec = 1800:\n%s", got)
	}
}
