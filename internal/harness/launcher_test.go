package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/google/go-cmp/cmp"
)

const tenantSecret = "tenant-credential-VALUE-0123456789"

const gatewayURL = "http://127.0.0.1:8080/mcp"

// countingRegistry counts mints so tests can see that a failed Prepare
// minted nothing.
type countingRegistry struct {
	*tokens.Registry
	mints int
}

func (c *countingRegistry) Mint(member, uid string) (string, tokens.ID, error) {
	c.mints++
	return c.Registry.Mint(member, uid)
}

type fixture struct {
	stateDir string
	reg      *countingRegistry
	l        *Launcher
	tenants  map[string]*v1alpha1.Tenant
}

func newFixture(t *testing.T, env map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := statedb.Open(statedir.At(dir).StateDB(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	reg, err := tokens.Open(dir, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{stateDir: dir, reg: &countingRegistry{Registry: reg}}
	f.l, err = NewLauncher(LauncherOptions{
		StateDir: dir, Gateway: plan.Gateway{URL: gatewayURL}, Tokens: f.reg, Executable: testExe,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.tenants = map[string]*v1alpha1.Tenant{"acme": {
		ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"},
		Spec:       v1alpha1.TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"},
	}}
	return f
}

func testMember(target, transport string) *v1alpha1.Member {
	m := &v1alpha1.Member{
		ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer", UID: "uid-reviewer"},
		Spec:       v1alpha1.MemberSpec{Profile: "p", Transport: transport, MCPTarget: &v1alpha1.MCPTarget{Kind: target}},
	}
	if target == v1alpha1.TargetTenant {
		m.Spec.MCPTarget.TenantID = "acme"
	}
	return m
}

func testProfile(harness string) *v1alpha1.Profile {
	return &v1alpha1.Profile{
		ObjectMeta: v1alpha1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.ProfileSpec{
			Harness: harness, Args: []string{"--model", "opus"},
			Env:         map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.internal", "LANG": "C.UTF-8"},
			ToolTimeout: v1alpha1.Duration{Duration: 30 * time.Minute},
		},
	}
}

func TestLauncher_PrepareClaudeResident(t *testing.T) {
	f := newFixture(t, nil)
	spec, err := f.l.Prepare(context.Background(), testMember(v1alpha1.TargetResident, ""), testProfile("claude"), f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(f.stateDir, "harness", "reviewer", ClaudeConfigFile)
	if diff := cmp.Diff([]string{"--model", "opus", "--mcp-config", cfg}, spec.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	tok := spec.Env[TokenEnv]
	wantEnv := map[string]string{
		"ANTHROPIC_BASE_URL": "https://proxy.internal", // operator's profile env reaches the pane
		"LANG":               "C.UTF-8",
		"MCP_TOOL_TIMEOUT":   "1800000",
		TokenEnv:             tok,
		URLEnv:               gatewayURL,
		MemberEnv:            "reviewer",
	}
	if diff := cmp.Diff(wantEnv, spec.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	wantPlan := []v1alpha1.PlanRow{{Server: "fleetd", Target: "resident", Transport: "streamable-http", URL: gatewayURL, CredentialEnv: "FLEETD_TOKEN"}}
	if diff := cmp.Diff(wantPlan, spec.Plan); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	for path, want := range map[string]fs.FileMode{cfg: 0o600, filepath.Dir(cfg): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %#o, want %#o", path, got, want)
		}
	}

	// The token identifies the member, then the pane once bound, and
	// stops working once revoked.
	if id, ok := f.reg.Resolve(tok); !ok || id.Member != "reviewer" || id.MemberUID != "uid-reviewer" {
		t.Fatalf("Resolve(minted) = %+v, %v", id, ok)
	}
	if err := f.l.Bind(spec, "w1:p3", "term_9"); err != nil {
		t.Fatal(err)
	}
	if id, _ := f.reg.Resolve(tok); id.PaneID != "w1:p3" || id.TerminalID != "term_9" {
		t.Errorf("after Bind identity = %+v", id)
	}
	if err := spec.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.reg.Resolve(tok); ok {
		t.Error("token still resolves after cleanup")
	}
}

func TestLauncher_TenantCredentialOnlyForTenantMembers(t *testing.T) {
	f := newFixture(t, map[string]string{"ACME_FLEETD_TOKEN": tenantSecret})
	tenant, err := f.l.Prepare(context.Background(), testMember(v1alpha1.TargetTenant, ""), testProfile("codex"), f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	if got := tenant.Env[plan.TenantTokenEnv]; got != tenantSecret {
		t.Errorf("tenant member %s = %q, want the tenant credential", plan.TenantTokenEnv, got)
	}
	if _, ok := tenant.Env["ACME_FLEETD_TOKEN"]; ok {
		t.Error("tenant member's pane carries fleetd's own credential variable name; want only the slot")
	}
	resident, err := f.l.Prepare(context.Background(), testMember(v1alpha1.TargetResident, ""), testProfile("codex"), f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resident.Env[plan.TenantTokenEnv]; ok {
		t.Error("resident member's pane carries the tenant slot")
	}
}

func TestLauncher_ProfileEnvOverridesAdapterDefaults(t *testing.T) {
	f := newFixture(t, nil)
	p := testProfile("claude")
	p.Spec.Env["MCP_TOOL_TIMEOUT"] = "42"
	spec, err := f.l.Prepare(context.Background(), testMember(v1alpha1.TargetResident, ""), p, f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Env["MCP_TOOL_TIMEOUT"]; got != "42" {
		t.Errorf("MCP_TOOL_TIMEOUT = %q, want the profile's 42", got)
	}
}

func TestLauncher_UnresolvableSpecsMintNothing(t *testing.T) {
	tests := []struct {
		name       string
		member     *v1alpha1.Member
		profile    func() *v1alpha1.Profile
		wantReason string
	}{
		{
			name: "missing tenant credential", member: testMember(v1alpha1.TargetTenant, ""),
			profile: func() *v1alpha1.Profile { return testProfile("claude") }, wantReason: v1alpha1.ReasonCredentialMissing,
		},
		{
			name: "unknown tenant",
			member: &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"},
				Spec: v1alpha1.MemberSpec{MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "globex"}}},
			profile: func() *v1alpha1.Profile { return testProfile("claude") }, wantReason: v1alpha1.ReasonTenantNotFound,
		},
		{
			name: "profile sets FLEETD_TOKEN", member: testMember(v1alpha1.TargetResident, ""),
			profile: func() *v1alpha1.Profile {
				p := testProfile("claude")
				p.Spec.Env[TokenEnv] = "chosen"
				return p
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "profile sets the tenant slot", member: testMember(v1alpha1.TargetResident, ""),
			profile: func() *v1alpha1.Profile {
				p := testProfile("claude")
				p.Spec.Env[plan.TenantTokenEnv] = "x"
				return p
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "member name escapes the state directory", member: &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: ".."}},
			profile: func() *v1alpha1.Profile { return testProfile("claude") }, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "no profile", member: testMember(v1alpha1.TargetResident, ""),
			profile: func() *v1alpha1.Profile { return nil }, wantReason: v1alpha1.ReasonInvalidSpec,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			spec, err := f.l.Prepare(context.Background(), tt.member, tt.profile(), f.tenants)
			var r interface{ Reason() string }
			if !errors.As(err, &r) || r.Reason() != tt.wantReason {
				t.Fatalf("Prepare error = %v, want reason %s", err, tt.wantReason)
			}
			if spec.Cleanup != nil {
				t.Error("cleanup returned with an error")
			}
			if f.reg.mints != 0 {
				t.Errorf("minted %d token(s) for an unresolvable spec", f.reg.mints)
			}
			if _, err := os.Stat(filepath.Join(f.stateDir, "harness")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("config directory written for an unresolvable spec (stat: %v)", err)
			}
		})
	}
}

func TestLauncher_PrepareHonoursCancelledContext(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.l.Prepare(ctx, testMember(v1alpha1.TargetResident, ""), testProfile("claude"), f.tenants); !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare(cancelled) = %v", err)
	}
}

func TestLauncher_ReleaseAndForget(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	first, err := f.l.Prepare(ctx, testMember(v1alpha1.TargetResident, ""), testProfile("gemini"), f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.l.Bind(first, "w1:p1", "term_1"); err != nil {
		t.Fatal(err)
	}
	// A replace: the new pane gets a new token, the old pane's is released.
	second, err := f.l.Prepare(ctx, testMember(v1alpha1.TargetResident, ""), testProfile("gemini"), f.tenants)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.l.Release(launch.Pane{Member: "reviewer", PaneID: "w1:p1", Token: first.Token}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.reg.Resolve(first.Env[TokenEnv]); ok {
		t.Error("replaced pane's token still resolves")
	}
	if _, ok := f.reg.Resolve(second.Env[TokenEnv]); !ok {
		t.Error("new pane's token was released with the old pane")
	}
	if err := f.l.Forget("reviewer"); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.reg.Resolve(second.Env[TokenEnv]); ok {
		t.Error("deleted member's token still resolves")
	}
	if _, err := os.Stat(filepath.Join(f.stateDir, "harness", "reviewer")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("deleted member's config directory remains (stat: %v)", err)
	}
}

// No token or credential value may appear in argv, in any file fleetd
// writes other than the hashed registry and primary.token, in plan rows, or
// in what a log line would print of a launch spec.
func TestLauncher_SecretsStayInPaneEnvOnly(t *testing.T) {
	f := newFixture(t, map[string]string{"ACME_FLEETD_TOKEN": tenantSecret})
	primary, err := tokens.PrimaryToken(f.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{tenantSecret, primary}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var visible [][]byte // everything argv, status and logs would show
	for _, kind := range []string{"claude", "codex", "opencode"} {
		for _, target := range []string{v1alpha1.TargetResident, v1alpha1.TargetTenant} {
			for _, transport := range []string{v1alpha1.TransportStreamableHTTP, v1alpha1.TransportStdio} {
				m := testMember(target, transport)
				m.Name = fmt.Sprintf("%s-%s-%s", kind, target[:3], transport[:3])
				spec, err := f.l.Prepare(context.Background(), m, testProfile(kind), f.tenants)
				if err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
				secrets = append(secrets, spec.Env[TokenEnv])
				args, _ := json.Marshal(spec.Args)
				rows, _ := json.Marshal(spec.Plan)
				visible = append(visible, args, rows, []byte(spec.String()), []byte(fmt.Sprintf("%v %+v", spec, spec)))
				log.Info("launch", "member", m.Name, "spec", spec)
			}
		}
	}
	visible = append(visible, logs.Bytes())
	err = filepath.WalkDir(f.stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == statedir.At(f.stateDir).PrimaryToken() {
			return err
		}
		b, err := os.ReadFile(path)
		visible = append(visible, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if len(s) < 32 {
			t.Fatalf("implausible secret %q", s)
		}
		for _, v := range visible {
			if bytes.Contains(v, []byte(s)) {
				t.Errorf("a secret value appears in visible output:\n%s", v)
			}
		}
	}
}

func TestNewLauncher_RequiresItsDependencies(t *testing.T) {
	reg, err := tokens.Open(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]LauncherOptions{
		"relative state dir": {StateDir: "state", Gateway: plan.Gateway{URL: gatewayURL}, Tokens: reg},
		"no gateway":         {StateDir: t.TempDir(), Tokens: reg},
		"no registry":        {StateDir: t.TempDir(), Gateway: plan.Gateway{URL: gatewayURL}},
	} {
		if _, err := NewLauncher(opts); err == nil {
			t.Errorf("%s: NewLauncher succeeded", name)
		}
	}
}

// A relaunch whose config is the one on disk writes nothing (a repair
// pays no atomic write and its fsyncs); a changed config, or a file whose
// mode someone changed, is written again.
func TestLauncher_RelaunchRewritesOnlyAChangedConfig(t *testing.T) {
	f := newFixture(t, map[string]string{"ACME_FLEETD_TOKEN": tenantSecret})
	m, p := testMember(v1alpha1.TargetResident, ""), testProfile("claude")
	prepare := func() os.FileInfo {
		t.Helper()
		if _, err := f.l.Prepare(context.Background(), m, p, f.tenants); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(f.stateDir, "harness", "reviewer", ClaudeConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	first := prepare()
	if again := prepare(); !os.SameFile(first, again) {
		t.Error("a relaunch with the same config wrote its file again")
	}
	m = testMember(v1alpha1.TargetTenant, "") // another server in the config
	changed := prepare()
	if os.SameFile(first, changed) {
		t.Error("a changed config was not written")
	}
	if err := os.Chmod(filepath.Join(f.stateDir, "harness", "reviewer", ClaudeConfigFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi := prepare(); os.SameFile(changed, fi) || fi.Mode().Perm() != 0o600 {
		t.Errorf("a config file of mode 0644 was left as it was (mode now %#o)", fi.Mode().Perm())
	}
}
