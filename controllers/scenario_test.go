package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
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

// testDeadline bounds every wait of a scenario. Scenarios run inside a
// testing/synctest bubble, so it is virtual time: it passes only while the
// whole fleet is idle and the awaited outcome has not come, failing the test
// at once instead of hanging it; nothing waits for it otherwise.
const testDeadline = 20 * time.Second

// env is one scenario, run inside a synctest bubble: an in-memory fake
// herdr (no socket), a manifests directory read by a dirstore.Directory on
// explicit nudges (no fsnotify), a state directory and a running Manager
// on the real clock, which the bubble makes virtual.
type env struct {
	t        *testing.T
	fake     *herdrsim.Server
	client   *herdr.Client
	dir      string
	state    string
	db       *statedb.DB      // the state database of state, opened by stateDB
	dbOpts   *statedb.Options // how stateDB opens it; nil for the defaults
	nudge    chan struct{}    // the store's Rescan: every change of e.dir is followed by one
	reg      *prometheus.Registry
	metrics  *Metrics
	mgr      *Manager
	cancel   context.CancelFunc
	done     chan error
	tweak    func(*Options)
	fakeOpts *herdrsim.Options
	// protocol is the herdr protocol the fake speaks when its options name
	// none (0: the fake's default, 22).
	protocol int
}

// protocols are the herdr protocols the scenarios run on: 22 (herdr 0.9,
// what people run and the fake's default) and 20 (herdr 0.8.2).
var protocols = []int{herdrsim.DefaultProtocol, herdrsim.Protocol20}

// eachProtocol runs a scenario once per herdr protocol, as the subtests
// "protocol22" and "protocol20", each in its own synctest bubble with an
// env whose fake speaks that protocol (unless the scenario's fakeOpts name
// one).
func eachProtocol(t *testing.T, files map[string]string, scenario func(t *testing.T, e *env)) {
	t.Helper()
	for _, p := range protocols {
		t.Run(fmt.Sprintf("protocol%d", p), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, files)
				e.protocol = p
				scenario(t, e)
			})
		})
	}
}

func newEnv(t *testing.T, files map[string]string) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{t: t, dir: filepath.Join(root, "manifests"), state: filepath.Join(root, "state"), nudge: make(chan struct{}, 1)}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		e.write(name, content)
	}
	return e
}

// startFake starts the in-memory fake herdr; o may be nil.
func (e *env) startFake(o *herdrsim.Options) {
	e.t.Helper()
	var fo herdrsim.Options
	if o != nil {
		fo = *o
	}
	fo.InMemory = true
	fo.Validator = validated.Schema()
	if fo.Protocol == 0 {
		fo.Protocol = e.protocol
	}
	fake, err := herdrsim.Start(&fo)
	if err != nil {
		e.t.Fatal(err)
	}
	e.fake = fake
	e.client = herdr.New(&herdr.Options{Dial: fake.Dial})
	e.t.Cleanup(func() { fake.Close() })
}

// start runs a Manager on the fake herdr (started first if needed), with
// its own herdr client on the fake's Dial observed by its metrics, as
// New would build one for a socket.
func (e *env) start() {
	e.t.Helper()
	if e.fake == nil {
		e.startFake(e.fakeOpts)
	}
	st, err := dirstore.New(e.dir, &dirstore.Options{StateDir: e.state, Debounce: 5 * time.Millisecond,
		RetryInterval: 20 * time.Millisecond, Rescan: e.nudge, Logger: discard()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.reg = prometheus.NewPedanticRegistry()
	e.metrics = NewMetrics(e.reg)
	o := &Options{
		Store: st, State: e.stateDB(), Metrics: e.metrics,
		Herdr:  herdr.New(&herdr.Options{Dial: e.fake.Dial, Observer: e.metrics.HerdrObserver()}),
		Logger: discard(), PollInterval: 2 * time.Millisecond,
		ReconnectBackoff: 10 * time.Millisecond, MaxReconnect: 50 * time.Millisecond,
		CallTimeout: 2 * time.Second, ResubscribeDelay: 5 * time.Millisecond,
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

// stateDB is the state database of the scenario's state directory, opened
// at its first use and closed when the test ends. Every Manager of the
// scenario (a fleetd restarted) runs on it; each reads what the one before
// it left (Run returns once its changes are durable).
func (e *env) stateDB() *statedb.DB {
	e.t.Helper()
	if e.db == nil {
		state := statedir.At(e.state)
		if err := state.Create(); err != nil {
			e.t.Fatal(err)
		}
		db, err := statedb.Open(state.StateDB(), e.dbOpts)
		if err != nil {
			e.t.Fatal(err)
		}
		e.db = db
		e.t.Cleanup(func() { db.Close() })
	}
	return e.db
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

func discard() *slog.Logger {
	if os.Getenv("FLEETD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// write writes a manifest file the way editors save one — a dot-file
// renamed over it — so that the store never reads it half written (an
// empty file would delete its members for a moment).
func (e *env) write(name, content string) {
	e.t.Helper()
	tmp := filepath.Join(e.dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.dir, name)); err != nil {
		e.t.Fatal(err)
	}
	e.changedDir()
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
		e.t.Fatal(err)
	}
	e.changedDir()
}

// rename renames a path and tells the store, as fsnotify's event on the
// manifests directory's parent would.
func (e *env) rename(from, to string) {
	e.t.Helper()
	if err := os.Rename(from, to); err != nil {
		e.t.Fatal(err)
	}
	e.changedDir()
}

// changedDir nudges the store to read the manifests directory again, the
// job fsnotify does outside the bubble (nudges coalesce like its events).
func (e *env) changedDir() {
	select {
	case e.nudge <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds for the members, by name.
func (e *env) waitFor(what string, cond func(map[string]v1alpha1.Member) bool) map[string]v1alpha1.Member {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
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

// idleMembers waits until the work queue is idle (waitIdle) and returns
// the members then. What waitFor returned can be a status a reconcile
// wrote on its way to the next one (a pane's loss counted before the
// prune hold keeps the member without a pane): what a test asserts of the
// state fleetd settles in is read here.
func (e *env) idleMembers() map[string]v1alpha1.Member {
	e.t.Helper()
	e.waitIdle()
	ms := map[string]v1alpha1.Member{}
	for _, m := range e.mgr.Members() {
		ms[m.Name] = m
	}
	return ms
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
	eachProtocol(t, map[string]string{
		"profile.yaml": testProfile,
		"alpha.yaml":   memberYAML("alpha"),
		"beta.yaml":    memberYAML("beta"),
		"team.yml":     memberYAML("gamma", "workspace: api"),
	}, func(t *testing.T, e *env) {
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
	})
}

func TestManager_DeletePauseUnpause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		e.start()
		ms := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		alphaTab, betaPane := ms["alpha"].Status.TabID, ms["beta"].Status.PaneID

		e.remove("alpha.yaml")
		e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { _, ok := ms["alpha"]; return !ok })
		e.waitForHerdr("alpha's tab closed", func() bool { _, ok := e.tabLabels()[alphaTab]; return !ok })

		e.write("beta.yaml", memberYAML("beta", "paused: true"))
		ms = e.waitFor("beta Paused", allPhase(v1alpha1.PhasePaused, "beta"))
		if e.paneAlive(betaPane) {
			t.Error("paused member's pane still open")
		}
		if c := condition(ms["beta"], v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionFalse || c.Reason != v1alpha1.ReasonPaused {
			t.Errorf("paused Ready condition %+v", c)
		}
		e.write("beta.yaml", memberYAML("beta"))
		ms = e.waitFor("beta back", allPhase(v1alpha1.PhaseReady, "beta"))
		if !e.paneAlive(ms["beta"].Status.PaneID) || ms["beta"].Status.PaneID == betaPane {
			t.Errorf("unpaused beta runs in pane %s (was %s)", ms["beta"].Status.PaneID, betaPane)
		}
		if ms["beta"].Status.Restarts != 0 {
			t.Errorf("pause/unpause counted as restart: %d", ms["beta"].Status.Restarts)
		}
	})
}

func TestManager_SpecEditReplacesPane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		old := ms["alpha"].Status
		readySince := condition(ms["alpha"], v1alpha1.ConditionReady).LastTransitionTime

		e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp"))
		ms = e.waitFor("alpha replaced", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"]
			return a.Status.Phase == v1alpha1.PhaseReady && a.Status.ObservedGeneration == 2 && a.Status.PaneID != old.PaneID
		})
		a := ms["alpha"]
		if a.Generation != 2 || condition(a, v1alpha1.ConditionReady).ObservedGeneration != 2 {
			t.Errorf("generation %d, Ready observedGeneration %d", a.Generation, condition(a, v1alpha1.ConditionReady).ObservedGeneration)
		}
		if e.paneAlive(old.PaneID) {
			t.Error("old pane still open after replace")
		}
		if p, _ := e.fake.Pane(a.Status.PaneID); p.Cwd != "/tmp" {
			t.Errorf("new pane cwd %q", p.Cwd)
		}
		if a.Status.SessionID != old.SessionID {
			t.Errorf("session id changed on replace: %s → %s", old.SessionID, a.Status.SessionID)
		}
		if got := condition(a, v1alpha1.ConditionReady).LastTransitionTime; got.Before(readySince) {
			t.Errorf("Ready lastTransitionTime went backwards")
		}
		if c := e.fake.Calls(); c["agent.start"] != 2 || c["tab.close"] != 1 {
			t.Errorf("agent.start %d tab.close %d, want 2 and 1", c["agent.start"], c["tab.close"])
		}
		// A metadata-only edit changes nothing in herdr.
		e.write("alpha.yaml", strings.Replace(memberYAML("alpha", "cwd: /tmp"), "{name: alpha}", "{name: alpha, labels: {team: x}}", 1))
		e.waitFor("label seen", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Labels["team"] == "x" })
		e.waitIdle()
		if c := e.fake.Calls(); c["agent.start"] != 2 {
			t.Errorf("label edit restarted the agent: agent.start %d", c["agent.start"])
		}
	})
}

func TestManager_KilledPaneIsRecreatedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.tweak = func(o *Options) { o.RestartBackoff = 5 * time.Millisecond } // the second failure in a row waits
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		old := ms["alpha"].Status
		if err := e.fake.KillPane(old.PaneID); err != nil {
			t.Fatal(err)
		}
		ms = e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"].Status
			return a.Phase == v1alpha1.PhaseReady && a.Restarts == 1 && a.PaneID != old.PaneID
		})
		if !e.paneAlive(ms["alpha"].Status.PaneID) {
			t.Error("recreated pane not in herdr")
		}
		// The agent exits back to its shell: the pane stays but is replaced.
		pane := ms["alpha"].Status.PaneID
		if err := e.fake.ExitAgent(pane); err != nil {
			t.Fatal(err)
		}
		ms = e.waitFor("alpha recreated after agent exit", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"].Status
			return a.Phase == v1alpha1.PhaseReady && a.Restarts == 2 && a.PaneID != pane
		})
		if p, ok := e.fake.Pane(ms["alpha"].Status.PaneID); !ok || p.AgentName != "alpha" {
			t.Errorf("recreated pane runs %+v", p)
		}
		if e.paneAlive(pane) {
			t.Error("pane whose agent exited was left open")
		}
		ev := e.mgr.MemberEvents("alpha")
		if len(ev) == 0 || !strings.Contains(fmt.Sprint(ev), v1alpha1.ReasonBackOff) {
			t.Errorf("events lack the restart: %+v", ev)
		}
	})
}

// A pane found gone is asked of herdr again before fleetd publishes the
// loss: when the replacement's tab.create is written, the member's
// BackOff event and its restart are not shown yet, and once it runs again
// they are. The herdr client's connection looks at what the Manager shows
// as the request goes out.
func TestManager_ALostPaneIsAskedForAgainBeforeTheLossIsPublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		var armed atomic.Bool
		type seen struct {
			backOff  bool
			restarts int32
		}
		atWrite := make(chan seen, 1)
		e.tweak = func(o *Options) {
			o.Herdr = herdr.New(&herdr.Options{Dial: func(ctx context.Context) (net.Conn, error) {
				c, err := e.fake.Dial(ctx)
				if err != nil {
					return nil, err
				}
				return &writeWatch{Conn: c, wrote: func(line []byte) {
					if !bytes.Contains(line, []byte(`"method":"tab.create"`)) || !armed.CompareAndSwap(true, false) {
						return
					}
					st, _ := e.mgr.Member("alpha")
					atWrite <- seen{strings.Contains(fmt.Sprint(e.mgr.MemberEvents("alpha")), v1alpha1.ReasonBackOff), st.Status.Restarts}
				}}, nil
			}})
		}
		e.start()
		old := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		armed.Store(true)
		if err := e.fake.KillPane(old.PaneID); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"].Status
			return a.Phase == v1alpha1.PhaseReady && a.Restarts == 1 && a.PaneID != old.PaneID
		})
		if got := <-atWrite; got.backOff || got.restarts != 0 {
			t.Errorf("as the replacement's tab.create was written the member showed %+v; want no BackOff event and no restart yet", got)
		}
		if ev := e.mgr.MemberEvents("alpha"); !strings.Contains(fmt.Sprint(ev), v1alpha1.ReasonBackOff) {
			t.Errorf("events lack the restart once the member runs again: %+v", ev)
		}
	})
}

// writeWatch is a herdr connection that shows each request line to wrote
// before writing it.
type writeWatch struct {
	net.Conn
	wrote func(line []byte)
}

func (w *writeWatch) Write(b []byte) (int, error) {
	w.wrote(b)
	return w.Conn.Write(b)
}

func TestManager_UnresolvedReferenceWaitsThenStarts(t *testing.T) {
	for _, tc := range []struct {
		name, member, reason, fixFile, fix string
	}{
		{"profile", memberYAML("alpha"), v1alpha1.ReasonProfileNotFound, "profile.yaml", testProfile},
		{"tenant", memberYAML("alpha", "mcpTarget: {kind: tenant, tenantId: acme}"), v1alpha1.ReasonTenantNotFound, "tenant.yaml",
			"apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: https://fleet.acme.example/mcp, credentialEnv: ACME_TOKEN}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				files := map[string]string{"alpha.yaml": tc.member}
				if tc.fixFile != "profile.yaml" {
					files["profile.yaml"] = testProfile
				}
				e := newEnv(t, files)
				e.start()
				ms := e.waitFor(tc.reason, func(ms map[string]v1alpha1.Member) bool {
					return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == tc.reason
				})
				if c := condition(ms["alpha"], v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionFalse || ms["alpha"].Status.Phase != v1alpha1.PhasePending {
					t.Errorf("phase %s, Ready %+v", ms["alpha"].Status.Phase, c)
				}
				e.waitIdle()
				if n := e.fake.Calls()["tab.create"]; n != 0 {
					t.Errorf("tab.create called %d times with an unresolved reference", n)
				}
				if n := e.mgr.queue.NumRequeues("alpha"); n != 0 {
					t.Errorf("unresolved reference retried %d times", n)
				}
				if _, ok := e.mgr.queue.NextDelayed(); ok {
					t.Error("unresolved reference scheduled a retry")
				}
				e.write(tc.fixFile, tc.fix)
				e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
			})
		})
	}
}

func TestManager_RestartPolicyNeverStaysFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": strings.Replace(testProfile, "spec:\n", "spec:\n  restartPolicy: Never\n", 1),
			"alpha.yaml": memberYAML("alpha")})
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if err := e.fake.KillPane(ms["alpha"].Status.PaneID); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha Failed", allPhase(v1alpha1.PhaseFailed, "alpha"))
		ms = e.idleMembers()
		if n := e.fake.Calls()["agent.start"]; n != 1 || ms["alpha"].Status.Restarts != 0 {
			t.Errorf("agent.start %d restarts %d; restartPolicy Never must not recreate", n, ms["alpha"].Status.Restarts)
		}
		// Editing the member starts it again.
		e.write("alpha.yaml", memberYAML("alpha", "cwd: /tmp"))
		e.waitFor("alpha Ready again", allPhase(v1alpha1.PhaseReady, "alpha"))
	})
}

func TestManager_UnlaunchableSpecFailsWithoutRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := strings.Replace(testProfile, "harness: codex", "harness: nosuchagent", 1)
		e := newEnv(t, map[string]string{"profile.yaml": bad, "alpha.yaml": memberYAML("alpha")})
		e.start()
		ms := e.waitFor("alpha Failed", allPhase(v1alpha1.PhaseFailed, "alpha"))
		if c := condition(ms["alpha"], v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "unsupported_agent_kind") {
			t.Errorf("Ready %+v", c)
		}
		e.waitIdle()
		if n := e.fake.Calls()["agent.start"]; n != 1 {
			t.Errorf("agent.start called %d times for an unlaunchable spec", n)
		}
		if len(e.fake.Panes()) != 1 {
			t.Errorf("the failed member's pane was left open: %d panes", len(e.fake.Panes()))
		}
		// Fixing the profile brings it up without restarting fleetd.
		e.write("profile.yaml", testProfile)
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
	})
}

func TestManager_ClosedWorkspaceRecreatesItsMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta", "workspace: api")})
		e.start()
		ms := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		if err := e.client.CloseWorkspace(context.Background(), ms["alpha"].Status.WorkspaceID); err != nil {
			t.Fatal(err)
		}
		after := e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"].Status
			return a.Phase == v1alpha1.PhaseReady && a.Restarts == 1
		})
		if n := e.fake.Calls()["workspace.create"]; n != 3 {
			t.Errorf("workspace.create called %d times; want fleetd, api and fleetd again", n)
		}
		if after["beta"].Status.PaneID != ms["beta"].Status.PaneID || after["beta"].Status.Restarts != 0 {
			t.Error("a member in another workspace was disturbed")
		}
	})
}

// waitForHerdr waits for a condition on herdr's side (or any the Manager
// does not broadcast). It is checked whenever every goroutine of the
// bubble is blocked, so never while the fleet is still acting on what came
// before. While it does not hold, virtual time moves on — a millisecond,
// then twice as long each time up to 100 ms — letting the fleet's timers
// (debounce, resubscription, backoff) fire in order, up to testDeadline.
func (e *env) waitForHerdr(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(testDeadline)
	for step := time.Millisecond; ; step = min(2*step, 100*time.Millisecond) {
		synctest.Wait()
		if cond() {
			return
		}
		if !time.Now().Before(deadline) {
			e.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(step)
	}
}

// waitIdle waits until the work queue has nothing ready or in progress and
// every goroutine of the bubble (the observer too) is blocked.
func (e *env) waitIdle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := e.mgr.queue.WaitInactive(ctx); err != nil {
		e.t.Fatal("timed out waiting for the work queue to go idle")
	}
	synctest.Wait()
}

func TestManager_RestartAdoptsPanesWithoutDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		e.start()
		before := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		e.stop()
		if !e.paneAlive(before["alpha"].Status.PaneID) {
			t.Fatal("stopping fleetd closed a pane")
		}
		calls := e.fake.Calls()

		// (A second fleetd on the same state directory is refused by the
		// state directory's lock, which the daemon takes: internal/statedir
		// and internal/daemon test it.)
		e.start()
		after := e.waitFor("both adopted", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha", "beta")(ms) && ms["alpha"].Status.PaneID != "" && ms["beta"].Status.PaneID != ""
		})
		for _, n := range []string{"alpha", "beta"} {
			if after[n].Status.PaneID != before[n].Status.PaneID || after[n].Status.TerminalID != before[n].Status.TerminalID {
				t.Errorf("%s: pane %s/%s after restart, was %s/%s", n, after[n].Status.PaneID, after[n].Status.TerminalID,
					before[n].Status.PaneID, before[n].Status.TerminalID)
			}
			if after[n].Status.SessionID != before[n].Status.SessionID {
				t.Errorf("%s: session id changed across restart", n)
			}
		}
		now := e.fake.Calls()
		for _, m := range []string{"tab.create", "agent.start", "tab.close", "workspace.create"} {
			if now[m] != calls[m] {
				t.Errorf("%s called %d times after restart (was %d)", m, now[m]-calls[m], calls[m])
			}
		}
	})
}

func TestManager_OrphanTabClosedForeignTabUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.startFake(nil)
		ctx := context.Background()
		ws, err := e.client.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
		if err != nil {
			t.Fatal(err)
		}
		orphan, err := e.client.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: TabLabelPrefix + "ghost"})
		if err != nil {
			t.Fatal(err)
		}
		// A tab claiming a live member's name but owned by no record is a
		// leftover too: fleetd creates its own.
		dup, err := e.client.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: TabLabelPrefix + "alpha"})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := e.client.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: "my-notes"})
		if err != nil {
			t.Fatal(err)
		}
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		e.waitForHerdr("orphans closed", func() bool {
			l := e.tabLabels()
			_, o := l[orphan.Tab.TabID]
			_, d := l[dup.Tab.TabID]
			return !o && !d
		})
		labels := e.tabLabels()
		if labels[foreign.Tab.TabID] != "my-notes" || labels[ws.Tab.TabID] == "" {
			t.Errorf("a tab fleetd does not own was closed: %v", labels)
		}
		if ms["alpha"].Status.WorkspaceID != ws.Workspace.WorkspaceID {
			t.Errorf("alpha placed in %s, want the existing workspace %s", ms["alpha"].Status.WorkspaceID, ws.Workspace.WorkspaceID)
		}
		if c := e.fake.Calls()["workspace.create"]; c != 1 {
			t.Errorf("workspace.create called %d times, want only the test's", c)
		}
	})
}

func TestManager_SyntaxErrorKeepsMemberRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		pane := ms["alpha"].Status.PaneID
		e.write("alpha.yaml", memberYAML("alpha", "cwd: [unclosed"))
		ms = e.waitFor("error visible", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Status == v1alpha1.ConditionFalse
		})
		c := condition(ms["alpha"], v1alpha1.ConditionManifestValid)
		if !strings.Contains(c.Message, "alpha.yaml:") || c.Reason != v1alpha1.ReasonManifestError {
			t.Errorf("ManifestValid %+v: want the file and line", c)
		}
		if ms["alpha"].Status.Phase != v1alpha1.PhaseReady || ms["alpha"].Status.PaneID != pane || !e.paneAlive(pane) {
			t.Errorf("member disturbed by a typo: %+v", ms["alpha"].Status)
		}
		if got := metricValue(t, e.reg, "fleetd_manifest_errors"); got != 1 {
			t.Errorf("fleetd_manifest_errors = %v, want 1", got)
		}
		if len(e.mgr.ManifestErrors()) != 1 {
			t.Errorf("ManifestErrors = %v", e.mgr.ManifestErrors())
		}
		e.write("alpha.yaml", memberYAML("alpha"))
		ms = e.waitFor("error cleared", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Status == v1alpha1.ConditionTrue
		})
		if ms["alpha"].Status.PaneID != pane || e.fake.Calls()["agent.start"] != 1 {
			t.Errorf("fixing the file restarted the agent")
		}
		if got := metricValue(t, e.reg, "fleetd_manifest_errors"); got != 0 {
			t.Errorf("fleetd_manifest_errors = %v after fix", got)
		}
	})
}

func TestManager_ManifestsDirRenamedAwayClosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		e.start()
		before := e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		calls := e.fake.Calls()
		away := e.dir + ".away"
		e.rename(e.dir, away)
		ms := e.waitFor("directory problem visible", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Reason == v1alpha1.ReasonDirectoryMissing
		})
		if len(ms) != 2 || !e.paneAlive(before["alpha"].Status.PaneID) || !e.paneAlive(before["beta"].Status.PaneID) {
			t.Fatalf("members or panes pruned while the directory was away")
		}
		if e.mgr.Ready() == nil {
			t.Error("Ready() reports ready while the manifests directory is missing")
		}
		e.rename(away, e.dir)
		e.waitFor("directory back", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionManifestValid).Status == v1alpha1.ConditionTrue &&
				condition(ms["beta"], v1alpha1.ConditionManifestValid).Status == v1alpha1.ConditionTrue
		})
		e.waitIdle()
		now := e.fake.Calls()
		for _, m := range []string{"tab.create", "agent.start", "tab.close"} {
			if now[m] != calls[m] {
				t.Errorf("%s: %d calls while the directory went away and back", m, now[m]-calls[m])
			}
		}
	})
}

func TestManager_HerdrUnavailableRecreatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		before := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		calls := e.fake.Calls()
		if err := e.fake.Stop(); err != nil {
			t.Fatal(err)
		}
		e.waitFor("herdr down visible", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonHerdrUnavailable
		})
		if got := metricValue(t, e.reg, "fleetd_herdr_up"); got != 0 {
			t.Errorf("fleetd_herdr_up = %v while herdr is down", got)
		}
		// A member added while herdr is down waits for it.
		e.write("beta.yaml", memberYAML("beta"))
		e.waitFor("beta waits", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["beta"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonHerdrUnavailable
		})
		if err := e.fake.Restart(); err != nil {
			t.Fatal(err)
		}
		after := e.waitFor("converged", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		if after["alpha"].Status.PaneID != before["alpha"].Status.PaneID {
			t.Errorf("alpha recreated: pane %s, was %s", after["alpha"].Status.PaneID, before["alpha"].Status.PaneID)
		}
		now := e.fake.Calls()
		if now["tab.create"] != calls["tab.create"]+1 || now["agent.start"] != calls["agent.start"]+1 || now["tab.close"] != calls["tab.close"] {
			t.Errorf("after the outage: tab.create +%d, agent.start +%d, tab.close +%d; want +1, +1, +0",
				now["tab.create"]-calls["tab.create"], now["agent.start"]-calls["agent.start"], now["tab.close"]-calls["tab.close"])
		}
		if got := metricValue(t, e.reg, "fleetd_herdr_up"); got != 1 {
			t.Errorf("fleetd_herdr_up = %v after herdr came back", got)
		}
	})
}

func TestManager_FailedHerdrReadsRecreateNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		fault  herdrsim.Fault
	}{
		{"every call hangs", "", herdrsim.Fault{Hang: true}}, // fleetd then retries with ping
		{"snapshot dropped", "session.snapshot", herdrsim.Fault{Drop: true}},
		{"snapshot garbled", "session.snapshot", herdrsim.Fault{Garbage: []byte(`{"id":"x","result":{"type":"session_snapshot","snapshot":{`)}},
		{"snapshot refused", "session.snapshot", herdrsim.Fault{Garbage: []byte(`{"id":"x","error":{"code":"internal_error","message":"boom"}}`)}},
		// A herdr without session.snapshot is read with the four listings.
		{"pane list dropped", "pane.list", herdrsim.Fault{Drop: true}},
		{"agent list garbled", "agent.list", herdrsim.Fault{Garbage: []byte(`{"id":"x","result":{"type":"agent_list","agents":[]`)}},
		{"tab list refused", "tab.list", herdrsim.Fault{Garbage: []byte(`{"id":"x","error":{"code":"internal_error","message":"boom"}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				e.tweak = func(o *Options) { o.CallTimeout = 200 * time.Millisecond; o.ResyncPeriod = 20 * time.Millisecond }
				e.startFake(nil)
				if strings.HasSuffix(tc.method, ".list") {
					e.fake.InjectFault("session.snapshot", noSnapshot)
				}
				e.start()
				before := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
				e.fake.InjectFault(tc.method, tc.fault)
				ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
				defer cancel()
				// Let several periodic listings fail.
				if err := e.fake.WaitCalls(ctx, cmpOr(tc.method, "ping"), e.fake.Calls()[cmpOr(tc.method, "ping")]+3); err != nil {
					t.Fatal(err)
				}
				e.fake.ClearFaults()
				if strings.HasSuffix(tc.method, ".list") {
					e.fake.InjectFault("session.snapshot", noSnapshot)
				}
				after := e.waitFor("converged", func(ms map[string]v1alpha1.Member) bool {
					return condition(ms["alpha"], v1alpha1.ConditionReady).Status == v1alpha1.ConditionTrue && e.mgr.Ready() == nil
				})
				if after["alpha"].Status.PaneID != before["alpha"].Status.PaneID {
					t.Errorf("alpha recreated after failed reads")
				}
				if c := e.fake.Calls(); c["agent.start"] != 1 || c["tab.close"] != 0 || c["tab.create"] != 1 {
					t.Errorf("agent.start %d, tab.create %d, tab.close %d after failed reads", c["agent.start"], c["tab.create"], c["tab.close"])
				}
			})
		})
	}
}

// noSnapshot makes the fake answer session.snapshot as a herdr without it
// does, so the cache reads herdr with the four listings.
var noSnapshot = herdrsim.Fault{Garbage: []byte(`{"id":"x","error":{"code":"unknown_method","message":"unknown method: session.snapshot"}}`)}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// metricValue reads the single series of a gauge or counter.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// A member's runtime keeps its rare part only while something out of the
// ordinary lasts: a member whose agent runs keeps none; one whose pane was
// killed keeps its failure (the last error a crash loop names) until its
// new agent ran stably, then none again. A runtime is its member's
// reconcile's, read and written without the Manager's lock, so each case
// reads it once the Manager has stopped and no reconcile can run.
func TestManager_RuntimeKeepsItsRarePartOnlyWhileNeeded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stable bool // wait until alpha's new agent ran stably
	}{{"right after the repair", false}, {"once the new agent ran stably", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
				e.tweak = func(o *Options) { o.StableAfter = time.Minute }
				e.start()
				ms := e.waitFor("Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
				if err := e.fake.KillPane(ms["alpha"].Status.PaneID); err != nil {
					t.Fatal(err)
				}
				e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
					return ms["alpha"].Status.Phase == v1alpha1.PhaseReady && ms["alpha"].Status.Restarts == 1
				})
				if tc.stable {
					time.Sleep(time.Minute) // its new agent runs stably
				}
				e.waitIdle()
				e.stop()
				rare := func(name string) *rareRuntime { return e.mgr.states.Get(name).rt.rare }
				switch r := rare("alpha"); {
				case !tc.stable && (r == nil || r.lastError == ""):
					t.Errorf("a member that failed keeps %+v, want its last error", r)
				case tc.stable && r != nil:
					t.Errorf("a member whose agent ran stably again keeps %+v", r)
				}
				if r := rare("beta"); r != nil {
					t.Errorf("a member whose agent runs keeps %+v", r)
				}
			})
		})
	}
}

func TestManager_CrashLoopBacksOffAndGoesDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.fakeOpts = &herdrsim.Options{Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchExit}}
		e.start()
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		if err := e.fake.WaitCalls(ctx, "agent.start", 1); err != nil {
			t.Fatal(err)
		}
		// Ten minutes pass (virtual time: every timer of the fleet fires in
		// order on the way).
		time.Sleep(time.Until(t0.Add(10 * time.Minute)))
		e.waitIdle()
		// Starts at 0, ~0 (the first recreation is immediate), then after 10s,
		// 20s, 40s, 80s and 160s of backoff: t = 0, 0, 10, 30, 70, 150, 310 s.
		// The next would be 300s (the cap) later, at 610 s.
		if got := e.fake.Calls()["agent.start"]; got != 7 {
			t.Errorf("agent.start called %d times in 10 simulated minutes, want 7", got)
		}
		ms := e.waitFor("Degraded", allPhase(v1alpha1.PhaseDegraded, "alpha"))
		a := ms["alpha"]
		if a.Status.Restarts != 7 || a.Status.LastError == "" {
			t.Errorf("restarts %d lastError %q; want 7 and the failure", a.Status.Restarts, a.Status.LastError)
		}
		if c := condition(a, v1alpha1.ConditionDegraded); c.Status != v1alpha1.ConditionTrue || c.Reason != v1alpha1.ReasonCrashLoop {
			t.Errorf("Degraded condition %+v", c)
		}
		if c := condition(a, v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionFalse || !strings.Contains(c.Message, "5m0s") {
			t.Errorf("Ready condition %+v; want the capped backoff named", c)
		}
		if got := metricValue(t, e.reg, "fleetd_member_restarts_total"); got != 7 {
			t.Errorf("fleetd_member_restarts_total = %v", got)
		}
		if n := len(e.fake.Panes()); n != 1 {
			t.Errorf("%d panes left in herdr, want only the workspace's first", n)
		}
	})
}

func TestManager_TwoHundredMembersConvergeAndIdleResyncIsConstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		files := map[string]string{"profile.yaml": testProfile}
		var names []string
		for i := range n {
			name := fmt.Sprintf("m%03d", i)
			names = append(names, name)
			files[name+".yaml"] = memberYAML(name)
		}
		e := newEnv(t, files)
		e.start()
		e.waitFor("200 members Ready", allPhase(v1alpha1.PhaseReady, names...))
		if c := e.fake.Calls(); c["tab.create"] != n || c["agent.start"] != n {
			t.Fatalf("tab.create %d agent.start %d, want %d each", c["tab.create"], c["agent.start"], n)
		}
		// Wait until the event stream covers every owned pane, then for quiet.
		e.settled(n)

		// The resync timer was armed when herdr was first listed, before
		// now, and is re-armed after each resync: every period from now on
		// holds exactly one resync.
		for round := 1; round <= 2; round++ {
			before := e.fake.Calls()
			time.Sleep(DefaultResyncPeriod)
			e.waitIdle() // the resync is over and has queued every member, who are done
			after := e.fake.Calls()
			delta := map[string]int{}
			for m, c := range after {
				if d := c - before[m]; d != 0 {
					delta[m] = d
				}
			}
			want := map[string]int{"session.snapshot": 1}
			if diff := cmp.Diff(want, delta); diff != "" {
				t.Errorf("round %d: herdr calls of one resync of an idle fleet of %d (-want +got):\n%s", round, n, diff)
			}
		}
	})
}

// herdrListed reports whether the Manager has listed herdr and holds that
// listing (fleetd_herdr_up: herdr answers and the view is in sync).
func (e *env) herdrListed() bool {
	return metricValue(e.t, e.reg, "fleetd_herdr_up") == 1
}

// lastSubscriptionPanes counts the per-pane entries of the newest
// events.subscribe request.
func (e *env) lastSubscriptionPanes() int {
	reqs := e.fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method != "events.subscribe" {
			continue
		}
		var p struct {
			Subscriptions []herdr.Subscription `json:"subscriptions"`
		}
		if err := json.Unmarshal(reqs[i].Params, &p); err != nil {
			e.t.Fatal(err)
		}
		count := 0
		for _, s := range p.Subscriptions {
			if s.Type == herdr.SubPaneAgentStatusChanged {
				count++
			}
		}
		return count
	}
	return 0
}

func TestMetrics_LintAndSeriesMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		e.startFake(nil)
		e.start()
		e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		e.waitIdle()
		problems, err := testutil.GatherAndLint(e.reg)
		if err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %+v", err, problems)
		}
		const want = `
# HELP fleetd_members Number of members per phase.
# TYPE fleetd_members gauge
fleetd_members{phase="Degraded"} 0
fleetd_members{phase="Failed"} 0
fleetd_members{phase="Paused"} 0
fleetd_members{phase="Pending"} 0
fleetd_members{phase="Ready"} 2
fleetd_members{phase="Starting"} 0
fleetd_members{phase="Terminating"} 0
# HELP fleetd_herdr_up 1 while herdr answers and fleetd's view of it is in sync, 0 otherwise.
# TYPE fleetd_herdr_up gauge
fleetd_herdr_up 1
# HELP fleetd_members_awaiting_input Number of members whose agent waits at a dialog for a person to answer it in herdr.
# TYPE fleetd_members_awaiting_input gauge
fleetd_members_awaiting_input 0
`
		if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "fleetd_members", "fleetd_herdr_up", "fleetd_members_awaiting_input"); err != nil {
			t.Error(err)
		}
		total := e.metrics.reconcileTotal
		if got := testutil.ToFloat64(total.WithLabelValues(controllerName, resultSuccess)); got < 2 {
			t.Errorf("fleetd_reconcile_total{result=success} = %v, want ≥ 2", got)
		}
		if got := testutil.ToFloat64(total.WithLabelValues(controllerName, resultError)); got != 0 {
			t.Errorf("fleetd_reconcile_total{result=error} = %v in a clean run", got)
		}
		// Each created tab hands its agent.start to the next reconcile.
		if got := testutil.ToFloat64(total.WithLabelValues(controllerName, resultRequeue)); got != 2 {
			t.Errorf("fleetd_reconcile_total{result=requeue} = %v, want 2 (one per tab created)", got)
		}
		// A start returns at once with its check timer (and deadline)
		// scheduled: one requeue_after per start at least.
		if got := testutil.ToFloat64(total.WithLabelValues(controllerName, resultRequeueAfter)); got < 2 {
			t.Errorf("fleetd_reconcile_total{result=requeue_after} = %v, want ≥ 2 (one per start)", got)
		}
		if got := testutil.ToFloat64(e.metrics.herdrRequests.WithLabelValues("tab.create", "ok")); got != 2 {
			t.Errorf("fleetd_herdr_requests_total{method=tab.create,code=ok} = %v, want 2", got)
		}
		if got := testutil.CollectAndCount(e.metrics.reconcileTime); got != 1 {
			t.Errorf("reconcile time series: %d", got)
		}
		for _, name := range []string{"fleetd_workqueue_adds_total", "fleetd_workqueue_depth", "fleetd_herdr_request_duration_seconds", "fleetd_manifest_errors", "fleetd_member_restarts_total", "fleetd_reconcile_errors_total"} {
			if n, err := testutil.GatherAndCount(e.reg, name); err != nil || n == 0 {
				t.Errorf("%s: %d series, %v", name, n, err)
			}
		}
	})
}

func TestNew_PreinitialisesReconcileSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	st, err := dirstore.New(t.TempDir(), &dirstore.Options{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := New(&Options{Store: st, Registerer: reg, HerdrSocket: filepath.Join(t.TempDir(), "none.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	n, err := testutil.GatherAndCount(reg, "fleetd_reconcile_total")
	if err != nil || n != 4 {
		t.Errorf("fleetd_reconcile_total has %d series before any reconcile (%v), want 4", n, err)
	}
}

func TestManager_HarnessLauncherTokenOnlyInPaneEnv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		reg, l := e.harnessLauncher()
		var gone []string
		goneCh := make(chan struct{}, 4)
		e.tweak = func(o *Options) {
			o.Launcher = l
			o.OnPaneGone = func(member, pane, reason string) {
				gone = append(gone, member+"@"+pane+" "+reason)
				goneCh <- struct{}{}
			}
		}
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		st := ms["alpha"].Status
		env, _ := e.fake.PaneEnv(st.PaneID)
		tok := env[harness.TokenEnv]
		if tok == "" || env["REVIEW_MODE"] != "strict" {
			t.Fatalf("pane env lacks the token or the profile env: keys %v", keys(env))
		}
		id, ok := reg.Resolve(tok)
		if !ok || id.Member != "alpha" || id.PaneID != st.PaneID || id.TerminalID != st.TerminalID {
			t.Errorf("token resolves to %+v, ok %v; want alpha bound to %s", id, ok, st.PaneID)
		}
		for _, r := range e.fake.Requests() {
			if r.Method == "agent.start" && strings.Contains(string(r.Params), tok) {
				t.Error("token in agent.start argv")
			}
		}
		if len(st.Plan) == 0 || st.Plan[0].Transport != v1alpha1.TransportStreamableHTTP {
			t.Errorf("status.plan = %+v", st.Plan)
		}
		if strings.Contains(fmt.Sprint(e.mgr.MemberEvents("alpha")), tok) || strings.Contains(fmt.Sprint(ms), tok) {
			t.Error("token in status or events")
		}
		// Deleting the member revokes the token and reports the pane gone.
		e.remove("alpha.yaml")
		select {
		case <-goneCh:
		case <-time.After(testDeadline):
			t.Fatal("OnPaneGone not called")
		}
		if _, ok := reg.Resolve(tok); ok {
			t.Error("token still valid after the member was deleted")
		}
		if len(gone) != 1 || gone[0] != "alpha@"+st.PaneID+" deleted" {
			t.Errorf("OnPaneGone calls %v", gone)
		}
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestManager_AgentStatusFollowsHerdrEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		type obs struct {
			status string
			seq    uint64
		}
		var mu sync.Mutex
		var seen []obs
		e.tweak = func(o *Options) {
			o.OnAgentStatus = func(member, status string, seq uint64) {
				mu.Lock()
				defer mu.Unlock()
				if member == "alpha" {
					seen = append(seen, obs{status, seq})
				}
			}
		}
		e.start()
		ms := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		pane := ms["alpha"].Status.PaneID
		e.waitForHerdr("pane subscribed and statuses caught up", func() bool {
			return e.lastSubscriptionPanes() == 1 && e.readAgentsAfterSubscribe()
		})
		calls := e.fake.Calls()
		// done → idle is someone looking at the pane, not a change of state.
		for _, s := range []string{"working", "blocked", "idle", "done", "idle"} {
			if err := e.fake.SetAgentStatus(pane, s); err != nil {
				t.Fatal(err)
			}
			e.waitFor("agentStatus "+s, func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.AgentStatus == s })
		}
		now := e.fake.Calls()
		for m, c := range now {
			if m != "events.subscribe" && c != calls[m] {
				t.Errorf("following agent status cost %d %s calls", c-calls[m], m)
			}
		}
		// The messaging hook saw every status, numbered in order; idle and done
		// share a number.
		mu.Lock()
		defer mu.Unlock()
		var last uint64
		var order []string
		sawDone := false
		for _, o := range seen {
			sawDone = sawDone || o.status == "done"
			if o.seq < last {
				t.Errorf("seq went back: %+v", seen)
			}
			if o.seq > last {
				order = append(order, o.status)
			}
			last = o.seq
		}
		if n := len(order); !sawDone || n < 3 || !slices.Equal(order[n-3:], []string{"working", "blocked", "idle"}) {
			t.Errorf("statuses passed on %v (all: %+v); want done passed on without a new number", order, seen)
		}
	})
}

func TestManager_ChangesWhileStoppedAreAppliedOnStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile,
			"alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta"), "gamma.yaml": memberYAML("gamma")})
		e.start()
		before := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta", "gamma"))
		e.stop()
		e.remove("beta.yaml")                                   // deleted while fleetd was down
		e.write("gamma.yaml", memberYAML("gamma", "cwd: /tmp")) // edited while fleetd was down
		e.start()
		after := e.waitFor("converged", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha", "gamma")(ms) && ms["gamma"].Status.ObservedGeneration == 2
		})
		e.waitForHerdr("beta's pane closed", func() bool { return !e.paneAlive(before["beta"].Status.PaneID) })
		if after["alpha"].Status.PaneID != before["alpha"].Status.PaneID {
			t.Error("alpha not adopted")
		}
		if after["gamma"].Status.PaneID == before["gamma"].Status.PaneID || e.paneAlive(before["gamma"].Status.PaneID) {
			t.Error("gamma, edited while fleetd was down, was not replaced")
		}
	})
}

func TestManager_StartWithoutManifestsDirPrunesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.start()
		before := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		e.stop()
		away := e.dir + ".away"
		e.rename(e.dir, away)
		e.start()
		e.waitForHerdr("herdr listed", e.herdrListed)
		e.waitIdle()
		if !e.paneAlive(before["alpha"].Status.PaneID) || e.fake.Calls()["tab.close"] != 0 {
			t.Fatal("a pane was closed while the manifests directory was missing")
		}
		if err := e.mgr.Ready(); err == nil {
			t.Error("ready without manifests")
		}
		e.rename(away, e.dir)
		after := e.waitFor("alpha adopted", func(ms map[string]v1alpha1.Member) bool {
			return allPhase(v1alpha1.PhaseReady, "alpha")(ms) && ms["alpha"].Status.PaneID != ""
		})
		if after["alpha"].Status.PaneID != before["alpha"].Status.PaneID || e.fake.Calls()["tab.create"] != 1 {
			t.Errorf("alpha recreated instead of adopted")
		}
	})
}

func TestManager_RefusedTabCreateIsShownAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile})
		e.tweak = func(o *Options) { o.QueueBaseDelay = time.Millisecond }
		e.start()
		e.waitForHerdr("herdr listed", e.herdrListed)
		e.fake.InjectFault("tab.create", herdrsim.Fault{Times: 3,
			Garbage: []byte(`{"id":"x","error":{"code":"tab_create_failed","message":"no room for another tab"}}`)})
		e.write("alpha.yaml", memberYAML("alpha"))
		e.waitFor("refusal visible", func(ms map[string]v1alpha1.Member) bool {
			c := condition(ms["alpha"], v1alpha1.ConditionReady)
			return c.Reason == v1alpha1.ReasonHerdrError && strings.Contains(c.Message, "no room") && strings.Contains(ms["alpha"].Status.LastError, "no room")
		})
		e.waitFor("alpha Ready after retries", allPhase(v1alpha1.PhaseReady, "alpha"))
		if n := e.fake.Calls()["tab.create"]; n != 4 {
			t.Errorf("tab.create called %d times, want 3 refused + 1", n)
		}
	})
}

// A status change while a (re)started fleetd's first events.subscribe is
// under way is caught up on, not lost until the next resync: herdr does
// not replay per-pane status events, and protocol 22 replays none at all.
func TestManager_StatusChangeBeforeFirstSubscribeAfterRestartIsSeen(t *testing.T) {
	eachProtocol(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")}, func(t *testing.T, e *env) {
		var mu sync.Mutex
		var seen []string
		e.tweak = func(o *Options) {
			o.OnAgentStatus = func(member, status string, _ uint64) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, member+"="+status)
			}
		}
		// Protocol 20 replays recent events to a new subscription; protocol
		// 22 replays nothing, so there only subscribing first and then
		// reading herdr catches the change.
		e.start()
		pane := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status.PaneID
		if err := e.fake.SetAgentStatus(pane, "blocked"); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha blocked", func(ms map[string]v1alpha1.Member) bool { return ms["alpha"].Status.AgentStatus == "blocked" })
		e.stop()

		// The restarted fleetd lists herdr, then subscribes; the subscription
		// is held while the agent unblocks.
		e.fake.InjectFault("events.subscribe", herdrsim.Fault{Latency: time.Second, Times: 1})
		subs := e.fake.Calls()["events.subscribe"]
		mu.Lock()
		seen = nil
		mu.Unlock()
		e.start()
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		if err := e.fake.WaitCalls(ctx, "events.subscribe", subs+1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the fake holds the subscription; no virtual time has passed
		if err := e.fake.SetAgentStatus(pane, "idle"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the held subscription is answered
		e.waitFor("alpha unblocked after the restart", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Status.AgentStatus == "idle"
		})
		e.waitForHerdr("OnAgentStatus told of the unblock", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(seen, "alpha=idle")
		})
	})
}

// Deleting a member closes the tab its ownership record names even when
// the view has lost that tab, at once rather than at the next resync.
func TestManager_DeleteClosesRecordedTabTheViewLacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
		e.startFake(nil)
		e.fake.InjectFault("session.snapshot", noSnapshot) // read with the listings, one of which loses the tab
		e.start()
		tab := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status.TabID
		e.waitIdle()
		// One resync's tab listing comes back without the tab: the pane
		// stays, only the tab entry is missing from fleetd's view.
		e.fake.InjectFault("tab.list", herdrsim.Fault{Times: 1, Garbage: []byte(`{"id":"x","result":{"type":"tab_list","tabs":[]}}`)})
		lists := e.fake.Calls()["tab.list"]
		time.Sleep(DefaultResyncPeriod)
		e.waitIdle()
		if c := e.fake.Calls(); c["tab.list"] != lists+1 || c["tab.close"] != 0 || c["agent.start"] != 1 {
			t.Fatalf("the resync that lost the tab: tab.list +%d, tab.close %d, agent.start %d; want +1, 0, 1",
				c["tab.list"]-lists, c["tab.close"], c["agent.start"])
		}
		e.remove("alpha.yaml")
		e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { return len(ms) == 0 })
		e.waitForHerdr("alpha's tab closed", func() bool {
			_, open := e.tabLabels()[tab]
			return !open
		})
	})
}

// gatedStore hides the manifests (an unsynced, empty snapshot) until open
// is closed, like a manifests directory read after herdr was listed.
type gatedStore struct {
	store.Store
	open chan struct{}
}

func (g *gatedStore) Snapshot() *store.Snapshot {
	select {
	case <-g.open:
		return g.Store.Snapshot()
	default:
		return &store.Snapshot{}
	}
}

func (g *gatedStore) Watch(ctx context.Context) <-chan struct{} {
	in := g.Store.Watch(ctx)
	out := make(chan struct{}, 1)
	go func() {
		open := g.open
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
			case <-open:
				open = nil
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

func (g *gatedStore) Run(ctx context.Context) error {
	return g.Store.(interface{ Run(context.Context) error }).Run(ctx)
}

// An orphaned fleetd tab seen by a listing made before the manifests were
// read is swept as soon as they are, not at the next resync.
func TestManager_OrphanSweptWhenManifestsAreReadAfterListing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile})
		e.startFake(nil)
		ctx := context.Background()
		ws, err := e.client.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
		if err != nil {
			t.Fatal(err)
		}
		orphan, err := e.client.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: TabLabelPrefix + "ghost"})
		if err != nil {
			t.Fatal(err)
		}
		gate := &gatedStore{open: make(chan struct{})}
		e.tweak = func(o *Options) {
			gate.Store = o.Store
			o.Store = gate
		}
		e.start()
		e.waitForHerdr("herdr listed and followed", func() bool {
			return e.herdrListed() && e.fake.Calls()["events.subscribe"] > 0
		})
		if _, open := e.tabLabels()[orphan.Tab.TabID]; !open {
			t.Fatal("orphan swept before the manifests were read")
		}
		close(gate.open)
		e.waitForHerdr("orphan closed", func() bool {
			_, open := e.tabLabels()[orphan.Tab.TabID]
			return !open
		})
	})
}
