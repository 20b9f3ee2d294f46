package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// convergence is one convergence run of fleetd and of the baseline.
type convergence struct {
	wall, baseWall   time.Duration
	cpu, baseCPU     time.Duration // CPU time of this process (fleetd or the baseline client, and the fake herdr)
	calls, baseCalls map[string]int
}

// convergenceConfig describes one convergence measurement.
type convergenceConfig struct {
	members int
	// latency is added to every herdr call; poll is the readiness poll
	// interval of fleetd and of the baseline.
	latency, poll time.Duration
	// ready is the fake's agent start time (Options.ReadyDelay, on the real
	// clock): how long after agent.start an agent is interactive-ready.
	ready time.Duration
	// baseWorkers is the baseline's concurrency; 0 starts every member at
	// once.
	baseWorkers int
}

// measureConvergence converges cfg.members members from an empty herdr
// with fleetd, then makes the baseline's strictly needed calls on a second,
// fresh fake with the same latency and agent start time.
func measureConvergence(tb testing.TB, cfg convergenceConfig) convergence {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var r convergence
	opts := func() *herdrsim.Options { return &herdrsim.Options{ReadyDelay: cfg.ready} }

	fake := startFakeWith(tb, opts(), cfg.latency)
	written := writeFleet(tb, cfg.members) // the operator's, before fleetd starts
	start, cpu := time.Now(), cpuTime(tb)
	f := startFleetOn(tb, fake, fleetConfig{members: cfg.members, poll: cfg.poll}, written)
	if err := f.waitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	r.wall, r.cpu = time.Since(start), cpuTime(tb)-cpu
	r.calls = fake.Calls()
	f.stop()
	fake.Close()

	base := startFakeWith(tb, opts(), cfg.latency)
	start, cpu = time.Now(), cpuTime(tb)
	if _, _, err := baselineConverge(ctx, herdrClient(base), memberNames(cfg.members), cfg.baseWorkers, cfg.poll); err != nil {
		tb.Fatal(err)
	}
	r.baseWall, r.baseCPU = time.Since(start), cpuTime(tb)-cpu
	r.baseCalls = base.Calls()
	base.Close()
	return r
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleFleet is a converged fleet on a manual manager clock, so that resync
// intervals pass only when the measurement says so.
type idleFleet struct {
	*fleet
	clk *clock.Fake
	// converge counts the herdr calls fleetd made to converge: from start
	// until the fleet was Ready, its event stream covered every pane and
	// whatever follows a resubscription was over.
	converge map[string]int
}

// startIdleFleet converges n members with the manager on a fake clock and
// waits until the event stream covers all of them and the fleet is idle.
func startIdleFleet(tb testing.TB, n int, lat time.Duration) *idleFleet {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	fake := startFake(tb, lat)
	f := &idleFleet{fleet: startFleet(tb, fake, fleetConfig{members: n, poll: time.Millisecond, clock: clk}), clk: clk}
	if err := f.waitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	// Owned panes changed: the resubscription waits ResubscribeDelay on the
	// manager's clock. Step it until the newest subscription covers all.
	for subscribedPanes(tb, fake) != n {
		waitTimer(ctx, tb, clk)
		before := fake.Calls()
		clk.Step(controllers.DefaultResubscribeDelay)
		if err := fake.WaitCalls(ctx, "events.subscribe", before["events.subscribe"]+1); err != nil {
			tb.Fatalf("no resubscription covering the fleet: %v", err)
		}
		// Every renewal is followed by one agent listing (statuses from
		// before the new stream are on no stream), made once the cache
		// takes the renewal's answer. Wait for it here: the cache may
		// take the next resync timer first, and the listing would then
		// fall into the measured interval instead of convergence.
		if err := fake.WaitCalls(ctx, "agent.list", before["agent.list"]+1); err != nil {
			tb.Fatalf("no agent listing after the resubscription: %v", err)
		}
	}
	// The observer may still be busy after resubscribing; it handles the
	// resync timer only afterwards. So one settling interval, then one
	// measured interval (nothing in flight any more): convergence is what
	// came before the settling interval's listing.
	f.resyncIntervals(tb, 1)
	settled := fake.Calls()
	steady := f.resyncIntervals(tb, 1)[0]
	f.converge = map[string]int{}
	for m, c := range settled {
		if d := c - steady[m]; d != 0 {
			f.converge[m] = d
		}
	}
	return f
}

// resyncIntervals lets intervals resync periods pass over an idle fleet and
// returns the herdr calls of each. Each interval ends once the resync has
// re-armed its timer and every member it queued has been reconciled.
func (f *idleFleet) resyncIntervals(tb testing.TB, intervals int) []map[string]int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []map[string]int
	for range intervals {
		waitTimer(ctx, tb, f.clk)
		before, reconciled := f.fake.Calls(), reconciles(tb, f.reg)
		f.clk.Step(controllers.DefaultResyncPeriod)
		if err := f.fake.WaitCalls(ctx, "session.snapshot", before["session.snapshot"]+1); err != nil {
			tb.Fatalf("no resync after a resync period: %v", err)
		}
		waitTimer(ctx, tb, f.clk) // re-armed: the resync is over and has queued every member
		for reconciles(tb, f.reg) < reconciled+len(f.names) {
			if !pause(ctx) {
				tb.Fatal("members queued by the resync were not reconciled")
			}
		}
		out = append(out, diffCalls(before, f.fake.Calls()))
	}
	return out
}

// pause waits a millisecond of real time; false if ctx ended.
func pause(ctx context.Context) bool {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitTimer waits until the manager clock has a pending timer.
func waitTimer(ctx context.Context, tb testing.TB, clk *clock.Fake) {
	tb.Helper()
	for {
		added := clk.TimerAdded()
		if clk.Waiters() > 0 {
			return
		}
		select {
		case <-added:
		case <-ctx.Done():
			tb.Fatal("timed out waiting for a manager timer")
		}
	}
}

// reconciles sums fleetd_reconcile_total over its results.
func reconciles(tb testing.TB, reg *prometheus.Registry) int {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "fleetd_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return int(n)
}

// subscribedPanes counts the per-pane entries of the newest events.subscribe
// request the fake received.
func subscribedPanes(tb testing.TB, fake *herdrsim.Server) int {
	tb.Helper()
	reqs := fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method != "events.subscribe" {
			continue
		}
		var p struct {
			Subscriptions []herdr.Subscription `json:"subscriptions"`
		}
		if err := json.Unmarshal(reqs[i].Params, &p); err != nil {
			tb.Fatal(err)
		}
		n := 0
		for _, s := range p.Subscriptions {
			if s.Type == herdr.SubPaneAgentStatusChanged {
				n++
			}
		}
		return n
	}
	return 0
}

// driftRepair is one drift-repair run: each kill's time until its
// replacement tab.create reached herdr, fleetd's and the baseline's, and
// the baseline's again with fleetd's pauses before each kill (paced).
type driftRepair struct {
	fleetd, base, paced []time.Duration
}

// measureDriftRepair kills every member's pane in turn and measures how
// long until the replacement tab.create reaches herdr; each member is Ready
// again before the next kill. The baseline is a bare client that follows
// pane.exited events and creates a tab for each, on a second fake, run
// twice: killing its next pane as soon as its last repair is answered,
// and after the pause fleetd's run had before the same kill.
func measureDriftRepair(tb testing.TB, n int, lat, poll time.Duration) driftRepair {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	fake := startFake(tb, lat)
	f := startFleet(tb, fake, fleetConfig{members: n, poll: poll})
	if err := f.waitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	var r driftRepair
	// pauses[i] is how long the machine had since the previous repair
	// reached herdr (or since the fleet was Ready) before kill i.
	pauses := make([]time.Duration, 0, n)
	last := time.Now()
	for _, name := range f.names {
		old := f.status(tb, name).PaneID
		creates := fake.Calls()["tab.create"]
		start := time.Now()
		pauses = append(pauses, start.Sub(last))
		if err := fake.KillPane(old); err != nil {
			tb.Fatal(err)
		}
		if err := fake.WaitCalls(ctx, "tab.create", creates+1); err != nil {
			tb.Fatalf("%s: no replacement tab: %v", name, err)
		}
		last = time.Now()
		r.fleetd = append(r.fleetd, last.Sub(start))
		if err := f.waitMember(ctx, name, func(st v1alpha1.MemberStatus) bool {
			return st.Phase == v1alpha1.PhaseReady && st.PaneID != old
		}); err != nil {
			tb.Fatalf("%s not Ready again after its pane was killed: %v", name, err)
		}
	}
	f.stop()
	fake.Close()
	r.base = baselineDriftRepair(ctx, tb, n, lat, nil)
	r.paced = baselineDriftRepair(ctx, tb, n, lat, pauses)
	return r
}

// baselineDriftRepair: n tabs, a bare client following pane.exited that
// creates one tab per exited pane; kill → tab.create at herdr. With
// pauses, kill i comes pauses[i] after the previous repair reached herdr;
// without, as soon as that repair is answered.
func baselineDriftRepair(ctx context.Context, tb testing.TB, n int, lat time.Duration, pauses []time.Duration) []time.Duration {
	tb.Helper()
	fake := startFake(tb, lat)
	defer fake.Close()
	c := herdrClient(fake)
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
	if err != nil {
		tb.Fatal(err)
	}
	create := func(ctx context.Context, i int) (*herdr.TabCreated, error) {
		return c.CreateTab(ctx, herdr.TabCreateParams{
			WorkspaceID: ws.Workspace.WorkspaceID, Label: fmt.Sprintf("%sb%d", controllers.TabLabelPrefix, i), Env: benchEnv,
		})
	}
	var panes []string
	for i := range n {
		tab, err := create(ctx, i)
		if err != nil {
			tb.Fatal(err)
		}
		panes = append(panes, tab.RootPane.PaneID)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := c.Subscribe(sctx, []herdr.Subscription{{Type: herdr.SubPaneExited}})
	if err != nil {
		tb.Fatal(err)
	}
	// The follower answers every repair on done, so that the next kill
	// comes only once the previous replacement exists, as fleetd's loop
	// waits for the member to be Ready again.
	done := make(chan error)
	go func() {
		defer close(done)
		i := n
		for ev := range stream.Events() {
			if ev.Kind != herdr.EventPaneExited {
				continue
			}
			_, err := create(sctx, i)
			i++
			select {
			case done <- err:
			case <-sctx.Done():
				return
			}
		}
	}()
	var out []time.Duration
	last := time.Now()
	for i, p := range panes {
		if i < len(pauses) {
			time.Sleep(time.Until(last.Add(pauses[i])))
		}
		creates := fake.Calls()["tab.create"]
		start := time.Now()
		if err := fake.KillPane(p); err != nil {
			tb.Fatal(err)
		}
		if err := fake.WaitCalls(ctx, "tab.create", creates+1); err != nil {
			tb.Fatal(err)
		}
		last = time.Now()
		out = append(out, last.Sub(start))
		if err := <-done; err != nil {
			tb.Fatalf("baseline repair: %v", err)
		}
	}
	stop()
	stream.Close()
	for range done {
	}
	return out
}

// massRepair is one mass-repair run of fleetd and of the baseline.
type massRepair struct {
	// tabs: from the kills until every replacement tab.create has reached
	// herdr; ready: until every member is Ready again on its new pane.
	tabs, baseTabs, ready, baseReady time.Duration
}

// measureMassRepair converges n members, kills every member's pane at once
// and measures how long until all n replacement tabs have been asked of
// herdr and until every member is Ready again on a new pane. The baseline,
// on a second fake with the same latency, is a bare client that converged
// the same members and follows pane.exited, recreating each member's tab
// and agent ([baseMember]) as soon as its pane exits, all at once.
func measureMassRepair(tb testing.TB, n int, lat, poll time.Duration) massRepair {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var r massRepair

	fake := startFake(tb, lat)
	f := startFleet(tb, fake, fleetConfig{members: n, poll: poll})
	if err := f.waitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	old := make(map[string]string, n)
	var panes []string
	for _, name := range f.names {
		old[name] = f.status(tb, name).PaneID
		panes = append(panes, old[name])
	}
	start := time.Now()
	r.tabs = killAll(ctx, tb, fake, panes)
	if err := f.waitAll(ctx, "Ready on a new pane", func(name string, st v1alpha1.MemberStatus) bool {
		return st.Phase == v1alpha1.PhaseReady && st.PaneID != "" && st.PaneID != old[name]
	}); err != nil {
		tb.Fatalf("after %d panes were killed: %v", n, err)
	}
	r.ready = time.Since(start)
	f.stop()
	fake.Close()

	base := startFake(tb, lat)
	r.baseTabs, r.baseReady = baselineMassRepair(ctx, tb, base, n, poll)
	base.Close()
	return r
}

// baselineMassRepair: n members converged on fake by a bare client, which
// then follows pane.exited and recreates every exited member at once; the
// kills → all replacement tab.create calls at herdr, and → every member's
// agent ready again.
func baselineMassRepair(ctx context.Context, tb testing.TB, fake *herdrsim.Server, n int, poll time.Duration) (tabs, ready time.Duration) {
	tb.Helper()
	c := herdrClient(fake)
	wsID, panes, err := baselineConverge(ctx, c, memberNames(n), 0, poll)
	if err != nil {
		tb.Fatal(err)
	}
	member := make(map[string]string, n) // pane → member, for the panes still to repair
	var killed []string
	for name, p := range panes {
		member[p] = name
		killed = append(killed, p)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := c.Subscribe(sctx, []herdr.Subscription{{Type: herdr.SubPaneExited}})
	if err != nil {
		tb.Fatal(err)
	}
	repaired := make(chan error, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range stream.Events() {
			name, ok := member[ev.PaneID]
			if ev.Kind != herdr.EventPaneExited || !ok {
				continue
			}
			delete(member, ev.PaneID)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := baseMember(sctx, c, wsID, name, poll)
				repaired <- err
			}()
		}
	}()
	start := time.Now()
	tabs = killAll(ctx, tb, fake, killed)
	for range n {
		select {
		case err := <-repaired:
			if err != nil {
				tb.Fatalf("baseline repair: %v", err)
			}
		case <-ctx.Done():
			tb.Fatalf("baseline repair: %v", ctx.Err())
		}
	}
	ready = time.Since(start)
	stop()
	stream.Close()
	wg.Wait()
	return tabs, ready
}

// killAll kills the panes at once and waits until as many tab.create calls
// have reached herdr.
func killAll(ctx context.Context, tb testing.TB, fake *herdrsim.Server, panes []string) time.Duration {
	tb.Helper()
	creates := fake.Calls()["tab.create"]
	start := time.Now()
	for _, p := range panes {
		if err := fake.KillPane(p); err != nil {
			tb.Fatal(err)
		}
	}
	if err := fake.WaitCalls(ctx, "tab.create", creates+len(panes)); err != nil {
		tb.Fatalf("%d panes killed, replacements: %v", len(panes), err)
	}
	return time.Since(start)
}
