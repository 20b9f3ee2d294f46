package harness

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const (
	testExe = "/opt/fleetd/bin/fleetd"
	testDir = "/var/lib/fleetd/harness/reviewer"
)

func row(target, transport string) v1alpha1.PlanRow {
	r := v1alpha1.PlanRow{Server: plan.ServerName, Target: target, Transport: transport,
		URL: "http://127.0.0.1:8080/mcp", CredentialEnv: plan.MemberTokenEnv}
	if target == v1alpha1.TargetTenant {
		r.URL, r.CredentialEnv = "https://fleet.acme.example/mcp", plan.TenantTokenEnv
	}
	return r
}

// describe writes a rendering as the text kept in golden files.
func describe(r Rendering) string {
	var b strings.Builder
	b.WriteString("# args\n")
	for _, a := range r.Args {
		fmt.Fprintf(&b, "%s\n", a)
	}
	b.WriteString("# env\n")
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		fmt.Fprintf(&b, "%s=%s\n", k, r.Env[k])
	}
	for _, f := range r.Files {
		fmt.Fprintf(&b, "# file %s\n%s", f.Path, f.Data)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
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

func TestAdapters_Golden(t *testing.T) {
	// The generic adapter renders the same for every kind; gemini stands in.
	for adapter, kind := range map[string]string{"claude": "claude", "codex": "codex", "generic": "gemini"} {
		for _, target := range []string{v1alpha1.TargetResident, v1alpha1.TargetTenant} {
			for _, transport := range []string{v1alpha1.TransportStreamableHTTP, v1alpha1.TransportStdio} {
				name := adapter + "_" + target + "_" + transport
				t.Run(name, func(t *testing.T) {
					r, err := For(kind).Render(Input{
						Rows:        []v1alpha1.PlanRow{row(target, transport)},
						ToolTimeout: 20 * time.Minute,
						ConfigDir:   testDir,
						Executable:  testExe,
					})
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range r.Files {
						if !json.Valid(f.Data) {
							t.Errorf("%s is not valid JSON:\n%s", f.Path, f.Data)
						}
					}
					golden(t, name, describe(r))
				})
			}
		}
	}
}

func TestFor_PicksAdapterByKind(t *testing.T) {
	tests := map[string]Adapter{
		"claude": Claude{}, "codex": Codex{}, "Claude": Claude{}, "claude-code": Claude{}, " codex ": Codex{}, "CODEX": Codex{},
		"qwen-code": Generic{},
	}
	for _, k := range Kinds() {
		if _, ok := tests[k]; !ok {
			tests[k] = Generic{}
		}
	}
	for kind, want := range tests {
		if got := For(kind); got != want {
			t.Errorf("For(%q) = %T, want %T", kind, got, want)
		}
	}
}

func TestCanonicalKind(t *testing.T) {
	tests := map[string]string{
		"claude": "claude", " Claude-Code ": "claude", "cursor-agent": "cursor", "kiro-cli": "kiro",
		"qwen-code": "qwen", "QWEN": "qwen", "gemini": "gemini",
	}
	for in, want := range tests {
		if got := CanonicalKind(in); got != want {
			t.Errorf("CanonicalKind(%q) = %q, want %q", in, got, want)
		}
	}
	// Every listed kind is already canonical, and protocol 22's qwen is listed.
	for _, k := range Kinds() {
		if got := CanonicalKind(k); got != k {
			t.Errorf("Kinds() lists %q, whose canonical kind is %q", k, got)
		}
	}
	if !slices.Contains(Kinds(), "qwen") {
		t.Errorf("Kinds() = %v, want it to list protocol 22's qwen", Kinds())
	}
}

// Every herdr kind can be a member: each renders a resident plan that runs
// the bridge or speaks HTTP, with no error.
func TestAdapters_EveryHerdrKindRenders(t *testing.T) {
	for _, kind := range Kinds() {
		for _, transport := range []string{v1alpha1.TransportStreamableHTTP, v1alpha1.TransportStdio} {
			r, err := For(kind).Render(Input{Rows: []v1alpha1.PlanRow{row(v1alpha1.TargetResident, transport)}, ConfigDir: testDir, Executable: testExe})
			if err != nil {
				t.Errorf("%s/%s: %v", kind, transport, err)
				continue
			}
			if !strings.Contains(describe(r), "http://127.0.0.1:8080/mcp") {
				t.Errorf("%s/%s: rendering never names the gateway URL:\n%s", kind, transport, describe(r))
			}
		}
	}
}

func TestAdapters_DefaultToolTimeout(t *testing.T) {
	in := Input{Rows: []v1alpha1.PlanRow{row(v1alpha1.TargetResident, v1alpha1.TransportStreamableHTTP)}, ConfigDir: testDir, Executable: testExe}
	c, err := Claude{}.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Env["MCP_TOOL_TIMEOUT"], fmt.Sprint(v1alpha1.DefaultToolTimeout.Milliseconds()); got != want {
		t.Errorf("claude MCP_TOOL_TIMEOUT = %s, want %s", got, want)
	}
	x, err := Codex{}.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("mcp_servers.fleetd.tool_timeout_sec=%d.0", int(v1alpha1.DefaultToolTimeout.Seconds())); !slices.Contains(x.Args, want) {
		t.Errorf("codex args %q lack %q", x.Args, want)
	}
}

func TestAdapters_RejectMalformedInput(t *testing.T) {
	good := row(v1alpha1.TargetResident, v1alpha1.TransportStdio)
	mut := func(f func(*v1alpha1.PlanRow)) []v1alpha1.PlanRow { r := good; f(&r); return []v1alpha1.PlanRow{r} }
	tests := []struct {
		name string
		in   Input
	}{
		{name: "no rows", in: Input{ConfigDir: testDir, Executable: testExe}},
		{name: "server name with a dot", in: Input{Rows: mut(func(r *v1alpha1.PlanRow) { r.Server = "a.b" }), ConfigDir: testDir, Executable: testExe}},
		{name: "no url", in: Input{Rows: mut(func(r *v1alpha1.PlanRow) { r.URL = "" }), ConfigDir: testDir, Executable: testExe}},
		{name: "credential slot is not a name", in: Input{Rows: mut(func(r *v1alpha1.PlanRow) { r.CredentialEnv = "X}; rm -rf" }), ConfigDir: testDir, Executable: testExe}},
		{name: "unknown transport", in: Input{Rows: mut(func(r *v1alpha1.PlanRow) { r.Transport = "carrier-pigeon" }), ConfigDir: testDir, Executable: testExe}},
		{name: "stdio without executable", in: Input{Rows: mut(func(*v1alpha1.PlanRow) {}), ConfigDir: testDir}},
		{name: "relative config dir", in: Input{Rows: mut(func(*v1alpha1.PlanRow) {}), ConfigDir: "harness/x", Executable: testExe}},
	}
	for _, tt := range tests {
		for _, a := range []Adapter{Claude{}, Codex{}, Generic{}} {
			if _, ok := a.(Codex); ok && tt.name == "relative config dir" {
				continue // Codex writes no file, so it needs no directory.
			}
			if _, err := a.Render(tt.in); err == nil {
				t.Errorf("%T %s: Render succeeded", a, tt.name)
			}
		}
	}
}

func TestTOMLString(t *testing.T) {
	tests := map[string]string{
		"http://h/mcp": `"http://h/mcp"`,
		`a"b\c`:        `"a\"b\\c"`,
		"tab\there\n":  `"tab\u0009here\u000A"`,
	}
	for in, want := range tests {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
	if got := tomlSeconds(1.5); got != "1.5" {
		t.Errorf("tomlSeconds(1.5) = %s", got)
	}
}
