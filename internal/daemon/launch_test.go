package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// copyExamples copies the example fleet (manifests/*.yaml, not its
// subdirectories) into a fresh directory, its worktree member
// (manifests/builder.yaml) on a throwaway repository instead of the one
// `make run` creates.
func copyExamples(t *testing.T) string {
	t.Helper()
	dir, repo := t.TempDir(), gitrepotest.Repo(t)
	entries, err := os.ReadDir("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !decode.IsManifestFile(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../../manifests", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("/tmp/fleetd-demo-repo"), []byte(repo))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func condition(m v1alpha1.Member, typ string) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1alpha1.Condition{}
}

func byName(ms []v1alpha1.Member) map[string]v1alpha1.Member {
	out := make(map[string]v1alpha1.Member, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

// launches returns, per member, the env given to its tab.create and the args
// given to its agent.start, as the fake herdr recorded them.
func launches(t *testing.T, sim *herdrsim.Server) (env map[string]map[string]string, args map[string][]string) {
	t.Helper()
	env, args = map[string]map[string]string{}, map[string][]string{}
	for _, r := range sim.Requests() {
		switch r.Method {
		case "tab.create":
			var p struct {
				Label string            `json:"label"`
				Env   map[string]string `json:"env"`
			}
			if err := json.Unmarshal(r.Params, &p); err != nil {
				t.Fatal(err)
			}
			env[strings.TrimPrefix(p.Label, "fleetd/")] = p.Env
		case "agent.start":
			var p struct {
				Name string   `json:"name"`
				Args []string `json:"args"`
			}
			if err := json.Unmarshal(r.Params, &p); err != nil {
				t.Fatal(err)
			}
			args[p.Name] = p.Args
		}
	}
	return env, args
}

// The example fleet launches every member with its harness adapter's args
// and environment; the tenant member waits with CredentialMissing until its
// credential variable is set and fleetd restarted; and no secret — the
// primary token, a worker token, the tenant credential — shows up anywhere
// but the pane environment, primary.token and the hashed registry.
func TestRun_ExampleFleetLaunchesThroughAdapters(t *testing.T) {
	const credVar, credValue = "ACME_FLEETD_TOKEN", "tenant-credential-0f9e8d7c"
	t.Setenv(credVar, "")
	os.Unsetenv(credVar)
	manifests := copyExamples(t)
	stateDir := t.TempDir()
	ctx := testCtx(t)
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// First start: no credential in fleetd's environment.
	runCtx, stop := context.WithCancel(context.Background())
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Config{ManifestsDir: manifests, StateDir: stateDir, Listen: "127.0.0.1:0", Sim: true, SimValidator: validated.Schema(),
			Logger: logger, Ready: func(i Info) { ready <- i }})
	}()
	info := <-ready
	// builder too: a fleetd stopped while the simulated herdr's git is
	// still adding the worktree leaves a half-made directory, and the
	// second start's worktree.create then fails on it ("already exists")
	// until someone removes it — a gap of its own, not this test's subject.
	err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		by := byName(ms)
		return by["reviewer"].Status.Phase == v1alpha1.PhaseReady && by["docs-writer"].Status.Phase == v1alpha1.PhaseReady &&
			by["builder"].Status.Phase == v1alpha1.PhaseReady &&
			condition(by["acme-triage"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonCredentialMissing
	})
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	env, args := launches(t, info.Sim)
	if _, ok := env["acme-triage"]; ok {
		t.Error("a tab was created for acme-triage without its credential")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Second start with the credential: the tenant member comes up.
	t.Setenv(credVar, credValue)
	runCtx, stop = context.WithCancel(context.Background())
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	go func() {
		done <- Run(runCtx, Config{ManifestsDir: manifests, StateDir: stateDir, Listen: "127.0.0.1:0", Sim: true, SimValidator: validated.Schema(),
			Logger: logger, Ready: func(i Info) { ready <- i }})
	}()
	info = <-ready
	var members map[string]v1alpha1.Member
	err = info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		members = byName(ms)
		for _, m := range ms {
			if m.Status.Phase != v1alpha1.PhaseReady {
				return false
			}
		}
		return len(ms) == 4
	})
	if err != nil {
		t.Fatalf("second start: %v (members %+v)", err, members)
	}
	env2, args2 := launches(t, info.Sim)
	for k, v := range env2 {
		env[k] = v
	}
	for k, v := range args2 {
		args[k] = v
	}

	profiles := map[string]v1alpha1.ProfileSpec{}
	r, err := decode.Dir(manifests, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Objects() {
		if p, ok := o.(*v1alpha1.Profile); ok {
			profiles[p.Name] = p.Spec
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for name, m := range members {
		prof := profiles[m.Spec.Profile]
		rendering, err := harness.For(prof.Harness).Render(harness.Input{Rows: m.Status.Plan, ToolTimeout: prof.ToolTimeout.Duration,
			ConfigDir: filepath.Join(info.StateDir, "harness", name), Executable: exe})
		if err != nil {
			t.Fatal(err)
		}
		wantArgs := append(append([]string{}, prof.Args...), rendering.Args...)
		if s := m.Status.ResumedSession; s != nil {
			// Relaunched by the second start: into the agent's own
			// session, which the simulated agent reported.
			tail, err := harness.ResumeArgs(prof.Harness, *s)
			if err != nil {
				t.Fatal(err)
			}
			wantArgs = append(wantArgs, tail...)
		}
		if diff := cmp.Diff(wantArgs, args[name]); diff != "" {
			t.Errorf("%s: agent.start args (-want +got):\n%s", name, diff)
		}
		e := env[name]
		for k, v := range rendering.Env {
			if e[k] != v {
				t.Errorf("%s: pane env %s = %q, want the adapter's %q", name, k, e[k], v)
			}
		}
		for k, v := range prof.Env {
			if e[k] != v {
				t.Errorf("%s: pane env %s = %q, want the profile's %q", name, k, e[k], v)
			}
		}
		if e[harness.URLEnv] != info.MCPURL || e[harness.MemberEnv] != name || e[harness.TokenEnv] == "" {
			t.Errorf("%s: pane env lacks FLEETD_URL/FLEETD_MEMBER/FLEETD_TOKEN: %v", name, e)
		}
		for _, f := range rendering.Files {
			fi, err := os.Stat(f.Path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: config file %s: %v, mode %v; want it written 0600", name, f.Path, err, fi.Mode().Perm())
			}
		}
		_, hasSlot := e[plan.TenantTokenEnv]
		if tenant := m.Spec.MCPTarget.Kind == v1alpha1.TargetTenant; tenant != hasSlot {
			t.Errorf("%s: tenant credential slot in pane env = %v, want %v", name, hasSlot, tenant)
		} else if tenant && e[plan.TenantTokenEnv] != credValue {
			t.Errorf("%s: tenant slot holds %q", name, e[plan.TenantTokenEnv])
		}
		secrets = append(secrets, e[harness.TokenEnv])
	}
	primary, err := os.ReadFile(statedir.At(stateDir).PrimaryToken())
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, strings.TrimSpace(string(primary)), credValue)

	// Scan every place a secret must never be.
	var places []struct{ what, text string }
	add := func(what, text string) { places = append(places, struct{ what, text string }{what, text}) }
	for _, r := range info.Sim.Requests() {
		if r.Method == "agent.start" {
			add("an agent.start request", string(r.Params))
		}
	}
	paths := []string{"/members", "/metrics"}
	for name := range members {
		paths = append(paths, "/members/"+name+"/events")
	}
	for _, path := range paths {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, info.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(primary)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		add("GET "+path, string(body))
	}
	add("logs", logs.String())
	for _, dir := range []string{stateDir, manifests} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
				return err
			}
			if path == statedir.At(stateDir).PrimaryToken() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			add("file "+path, string(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range places {
		for i, s := range secrets {
			if s != "" && strings.Contains(p.text, s) {
				t.Errorf("secret %d found in %s", i, p.what)
			}
		}
	}
	if !strings.Contains(logs.String(), "acme-triage") {
		t.Error("the log scan saw no log lines about members; is the logger wired?")
	}
}
