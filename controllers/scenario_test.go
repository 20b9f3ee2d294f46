package controllers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/clock"
	"github.com/fleetd-dev/fleetd/controllers/store"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
)

const testProfile = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: codex-fast}
spec:
  harness: codex
  args: ["-m", "gpt-5.4"]
  env: {REVIEW_MODE: strict}
`

func memberYAML(name string, extra ...string) string {
	s := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: codex-fast\n"
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

// env is one scenario: a fake herdr, a manifests directory, a state
// directory and a running Manager.
type env struct {
	t        *testing.T
	fake     *herdrtest.Server
	client   *herdr.Client
	dir      string
	state    string
	reg      *prometheus.Registry
	mgr      *Manager
	clk      clock.Clock
	cancel   context.CancelFunc
	done     chan error
	tweak    func(*Options)
	fakeOpts *herdrtest.Options
}

func newEnv(t *testing.T, files map[string]string) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{t: t, dir: filepath.Join(root, "manifests"), state: filepath.Join(root, "state"), clk: clock.Real{}}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		e.write(name, content)
	}
	return e
}

func (e *env) startFake(o *herdrtest.Options) {
	e.t.Helper()
	fake, err := herdrtest.Start(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.fake = fake
	e.client = herdr.New(&herdr.Options{SocketPath: fake.SocketPath()})
	e.t.Cleanup(func() { fake.Close() })
}

// start runs a Manager on the fake herdr (started first if needed).
func (e *env) start() {
	e.t.Helper()
	if e.fake == nil {
		e.startFake(e.fakeOpts)
	}
	st, err := store.NewDirectory(e.dir, &store.DirectoryOptions{StateDir: e.state, Debounce: 5 * time.Millisecond,
		RetryInterval: 20 * time.Millisecond, Logger: discard()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.reg = prometheus.NewPedanticRegistry()
	o := &Options{
		Store: st, StateDir: e.state, HerdrSocket: e.fake.SocketPath(), Registerer: e.reg,
		Logger: discard(), Clock: e.clk, PollInterval: 2 * time.Millisecond,
		ReconnectBackoff: 10 * time.Millisecond, MaxReconnect: 50 * time.Millisecond,
		CallTimeout: 2 * time.Second,
	}
	if e.tweak != nil {
		e.tweak(o)
	}
	mgr, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan error, 1)
	go func() { e.done <- mgr.Run(ctx) }()
	e.t.Cleanup(e.stop)
}

func (e *env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("Run: %v", err)
	}
	e.cancel = nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (e *env) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor waits until cond holds for the members, by name.
func (e *env) waitFor(what string, cond func(map[string]v1alpha1.Member) bool) map[string]v1alpha1.Member {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last map[string]v1alpha1.Member
	err := e.mgr.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		last = map[string]v1alpha1.Member{}
		for _, m := range ms {
			last[m.Name] = m
		}
		return cond(last)
	})
	if err != nil {
		var b strings.Builder
		for n, m := range last {
			fmt.Fprintf(&b, "\n  %s: phase=%s pane=%s restarts=%d lastError=%q conds=%+v", n, m.Status.Phase, m.Status.PaneID, m.Status.Restarts, m.Status.LastError, m.Status.Conditions)
		}
		e.t.Fatalf("timed out waiting until %s; members:%s", what, b.String())
	}
	return last
}

func allPhase(phase string, names ...string) func(map[string]v1alpha1.Member) bool {
	return func(ms map[string]v1alpha1.Member) bool {
		if len(ms) != len(names) {
			return false
		}
		for _, n := range names {
			if m, ok := ms[n]; !ok || m.Status.Phase != phase {
				return false
			}
		}
		return true
	}
}

func condition(m v1alpha1.Member, typ string) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1alpha1.Condition{}
}

// tabLabels lists herdr's tabs as id → label.
func (e *env) tabLabels() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	wss, err := e.client.ListWorkspaces(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range wss {
		tabs, err := e.client.ListTabs(ctx, w.WorkspaceID)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, t := range tabs {
			out[t.TabID] = t.Label
		}
	}
	return out
}

func (e *env) paneAlive(id string) bool {
	_, ok := e.fake.Pane(id)
	return ok
}

func TestManager_ThreeMembersReadyEachInOwnTab(t *testing.T) {
	e := newEnv(t, map[string]string{
		"profile.yaml": testProfile,
		"alpha.yaml":   memberYAML("alpha"),
		"beta.yaml":    memberYAML("beta"),
		"team.yml":     memberYAML("gamma", "workspace: api"),
	})
	e.start()
	ms := e.waitFor("three members Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta", "gamma"))
	labels := e.tabLabels()
	tabs := map[string]bool{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		st := ms[name].Status
		if labels[st.TabID] != TabLabelPrefix+name {
			t.Errorf("%s: tab %s labelled %q, want %q", name, st.TabID, labels[st.TabID], TabLabelPrefix+name)
		}
		if tabs[st.TabID] {
			t.Errorf("%s shares tab %s", name, st.TabID)
		}
		tabs[st.TabID] = true
		p, ok := e.fake.Pane(st.PaneID)
		if !ok {
			t.Fatalf("%s: pane %s not in herdr", name, st.PaneID)
		}
		if p.AgentName != name || p.AgentKind != "codex" || p.TerminalID != st.TerminalID {
			t.Errorf("%s: pane runs agent %q kind %q terminal %s", name, p.AgentName, p.AgentKind, p.TerminalID)
		}
		if p.Env["REVIEW_MODE"] != "strict" {
			t.Errorf("%s: pane env lacks the profile's REVIEW_MODE: %v", name, p.Env)
		}
		if c := condition(ms[name], v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionTrue || c.ObservedGeneration != 1 {
			t.Errorf("%s: Ready condition %+v", name, c)
		}
		if st.SessionID == "" || st.ObservedGeneration != 1 || st.Restarts != 0 {
			t.Errorf("%s: status %+v", name, st)
		}
	}
	ws := map[string]string{}
	wss, _ := e.client.ListWorkspaces(context.Background())
	for _, w := range wss {
		ws[w.WorkspaceID] = w.Label
	}
	if ws[ms["gamma"].Status.WorkspaceID] != "api" || ws[ms["alpha"].Status.WorkspaceID] != "fleetd" {
		t.Errorf("workspaces: alpha in %q, gamma in %q", ws[ms["alpha"].Status.WorkspaceID], ws[ms["gamma"].Status.WorkspaceID])
	}
	calls := e.fake.Calls()
	if calls["agent.start"] != 3 || calls["tab.create"] != 3 {
		t.Errorf("agent.start %d, tab.create %d; want 3 each", calls["agent.start"], calls["tab.create"])
	}
}
