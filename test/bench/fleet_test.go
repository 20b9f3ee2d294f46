package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
)

// The profile every benchmark member uses, and what the baselines pass to
// herdr for each member (the same args and pane environment).
const (
	benchHarness = "codex"
	profileYAML  = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: bench}
spec:
  harness: codex
  args: ["-m", "bench"]
  env: {BENCH_MODE: "1"}
`
)

var (
	benchArgs = []string{"-m", "bench"}
	benchEnv  = map[string]string{"BENCH_MODE": "1"}
)

// memberNames returns n member names in a stable order.
func memberNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%04d", i)
	}
	return out
}

func memberYAML(name string) string {
	return "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: bench\n"
}

// quietLogger discards fleetd's logs unless FLEETD_TEST_LOG is set, as in
// the controllers' tests.
func quietLogger() *slog.Logger {
	if os.Getenv("FLEETD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startFake starts a fake herdr whose every call takes lat longer (on the
// real clock); it is closed when tb ends.
func startFake(tb testing.TB, lat time.Duration) *herdrsim.Server {
	tb.Helper()
	return startFakeWith(tb, nil, lat)
}

// startFakeWith is startFake with the fake's options (nil: the defaults:
// agents ready as soon as agent.start is answered).
func startFakeWith(tb testing.TB, opts *herdrsim.Options, lat time.Duration) *herdrsim.Server {
	tb.Helper()
	fake, err := validated.Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fake.Close() })
	if lat > 0 {
		fake.InjectFault("", herdrsim.Fault{Latency: lat})
	}
	return fake
}

// herdrClient is a plain client of the fake, for baselines and checks.
func herdrClient(fake *herdrsim.Server) *herdr.Client {
	return herdr.New(&herdr.Options{SocketPath: fake.SocketPath()})
}

// fleetConfig describes one Manager run.
type fleetConfig struct {
	members int
	// poll is the readiness poll interval of agent.start.
	poll time.Duration
	// clock drives the Manager (resync, backoff, resubscription); nil is
	// the real clock. The manifests store always runs on the real clock.
	clock clock.Clock
}

// fleet is a Manager running against a fake herdr on a manifests directory
// of cfg.members members.
type fleet struct {
	fake  *herdrsim.Server
	mgr   *controllers.Manager
	reg   *prometheus.Registry
	names []string
	// stop stops the Manager (also done when the test ends); idempotent.
	stop func()
}

// startFleet writes the manifests and starts a Manager; it is stopped when
// tb ends.
func startFleet(tb testing.TB, fake *herdrsim.Server, cfg fleetConfig) *fleet {
	tb.Helper()
	return startFleetOn(tb, fake, cfg, writeFleet(tb, cfg.members))
}

// writeFleet writes the Profile and the manifests of n members into
// ROOT/manifests of a new directory ROOT and returns ROOT: what an operator
// has in place before fleetd starts.
func writeFleet(tb testing.TB, n int) string {
	tb.Helper()
	root := tb.TempDir()
	dir := filepath.Join(root, "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	write := func(file, content string) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("profile.yaml", profileYAML)
	for _, name := range memberNames(n) {
		write(name+".yaml", memberYAML(name))
	}
	return root
}

// startFleetOn starts a Manager on the manifests writeFleet wrote under
// root, with its state directory beside them.
func startFleetOn(tb testing.TB, fake *herdrsim.Server, cfg fleetConfig, root string) *fleet {
	tb.Helper()
	dir, state := filepath.Join(root, "manifests"), filepath.Join(root, "state")
	names := memberNames(cfg.members)
	st, err := dirstore.New(dir, &dirstore.Options{StateDir: state, Logger: quietLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := statedir.At(state).Create(); err != nil {
		tb.Fatal(err)
	}
	db, err := statedb.Open(statedir.At(state).StateDB(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	mgr, err := controllers.New(&controllers.Options{
		Store: st, State: db, HerdrSocket: fake.SocketPath(), Registerer: reg,
		Logger: quietLogger(), Clock: cfg.clock, PollInterval: cfg.poll,
	})
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("Manager.Run: %v", err)
			}
			if err := db.Close(); err != nil {
				tb.Errorf("state database: %v", err)
			}
		})
	}
	tb.Cleanup(stop)
	return &fleet{fake: fake, mgr: mgr, reg: reg, names: names, stop: stop}
}

// waitReady blocks until every member is Ready.
func (f *fleet) waitReady(ctx context.Context) error {
	return f.waitAll(ctx, "Ready", func(_ string, st v1alpha1.MemberStatus) bool {
		return st.Phase == v1alpha1.PhaseReady
	})
}

// waitAll blocks until cond holds for every member (what names cond in
// the error). At each change it checks the members not yet seen to satisfy
// it in name order and stops at the first that does not, so that watching
// a large fleet costs the measured process O(1) per change; the last
// member satisfying it is a change, and the check then runs through to the
// end. A member is never checked again once it satisfied cond.
func (f *fleet) waitAll(ctx context.Context, what string, cond func(name string, st v1alpha1.MemberStatus) bool) error {
	pending := append([]string(nil), f.names...)
	for {
		ch := f.mgr.Changed()
		for len(pending) > 0 {
			m, ok := f.mgr.Member(pending[0])
			if !ok || !cond(pending[0], m.Status) {
				break
			}
			pending = pending[1:]
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d members not %s (first: %s): %w", len(pending), len(f.names), what, pending[0], ctx.Err())
		}
	}
}

// waitMember blocks until cond holds for the member's status.
func (f *fleet) waitMember(ctx context.Context, name string, cond func(v1alpha1.MemberStatus) bool) error {
	for {
		ch := f.mgr.Changed()
		if m, ok := f.mgr.Member(name); ok && cond(m.Status) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// status returns a member's status.
func (f *fleet) status(tb testing.TB, name string) v1alpha1.MemberStatus {
	tb.Helper()
	m, ok := f.mgr.Member(name)
	if !ok {
		tb.Fatalf("member %s unknown", name)
	}
	return m.Status
}

// perMember divides call counts by n.
func perMember(calls map[string]int, n int) map[string]float64 {
	out := make(map[string]float64, len(calls))
	for m, c := range calls {
		out[m] = float64(c) / float64(n)
	}
	return out
}

// diffCalls returns after - before, without zero entries.
func diffCalls(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for m, c := range after {
		if d := c - before[m]; d != 0 {
			out[m] = d
		}
	}
	return out
}

func total(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// baseMember makes the herdr calls one member strictly needs — tab.create
// (labelled, with the pane environment), then agent.start with agent.get
// readiness polling every poll, as herdr's CLI starts an agent — and
// returns the member's pane.
func baseMember(ctx context.Context, c *herdr.Client, workspaceID, name string, poll time.Duration) (string, error) {
	tab, err := c.CreateTab(ctx, herdr.TabCreateParams{
		WorkspaceID: workspaceID, Label: controllers.TabLabelPrefix + name, Env: benchEnv,
	})
	if err == nil {
		_, err = c.StartAgent(ctx, herdr.AgentStartParams{
			Name: name, Kind: benchHarness, PaneID: tab.RootPane.PaneID, Args: benchArgs,
			TimeoutMS: v1alpha1.DefaultStartupTimeout.Milliseconds(),
		}, poll)
	}
	if err != nil {
		return "", fmt.Errorf("baseline member %s: %w", name, err)
	}
	return tab.RootPane.PaneID, nil
}

// baselineConverge makes only the herdr calls the members strictly need —
// one workspace, then [baseMember] for each — through workers goroutines,
// as fleetd's reconcile workers would; workers ≤ 0 starts every member at
// once (one goroutine each). It returns the workspace and each member's
// pane; the first failure stops it.
func baselineConverge(ctx context.Context, c *herdr.Client, names []string, workers int, poll time.Duration) (string, map[string]string, error) {
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
	if err != nil {
		return "", nil, err
	}
	wsID := ws.Workspace.WorkspaceID
	if workers <= 0 || workers > len(names) {
		workers = len(names)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan string)
	var (
		mu       sync.Mutex
		panes    = make(map[string]string, len(names))
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				pane, err := baseMember(ctx, c, wsID, name, poll)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				panes[name] = pane
				mu.Unlock()
			}
		}()
	}
feed:
	for _, n := range names {
		select {
		case jobs <- n:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return "", nil, firstErr
	}
	return wsID, panes, nil
}

// percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
