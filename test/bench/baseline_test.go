package bench

import (
	"context"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// The baselines are what fleetd's figures are divided by, so they are
// tested like product code: a baseline that did less than it claims would
// make every ratio look better than it is.

// TestBaselineConverge_StartsEveryMemberAtOnce: with workers ≤ 0 the
// baseline issues every member's agent.start before any agent is ready. The
// fake herdr runs on a manual clock with a 3 s agent start time and the
// test never moves it until all starts have arrived — a client bounded by
// workers, or one that waits for an agent before starting the next, would
// stop at its concurrency and time out here.
func TestBaselineConverge_StartsEveryMemberAtOnce(t *testing.T) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	fake := startFakeWith(t, &herdrsim.Options{Clock: clk, ReadyDelay: 3 * time.Second}, 0)
	type result struct {
		panes map[string]string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		_, panes, err := baselineConverge(ctx, herdrClient(fake), memberNames(n), 0, 20*time.Millisecond)
		done <- result{panes, err}
	}()
	if err := fake.WaitCalls(ctx, "agent.start", n); err != nil {
		t.Fatalf("not every agent.start reached herdr before the first agent was ready: %v (calls %v)", err, fake.Calls())
	}
	// Step only once herdr has answered every agent.start (each has armed
	// its ready timer): until an agent is listed, wait for another poll.
	for {
		polls := fake.Calls()["agent.get"]
		agents, err := herdrClient(fake).ListAgents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(agents) == n {
			break
		}
		if err := fake.WaitCalls(ctx, "agent.get", polls+1); err != nil {
			t.Fatalf("%d of %d agents started: %v", len(agents), n, err)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("baseline returned before any agent was ready: %v", r.err)
	default:
	}
	clk.Step(3 * time.Second)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkAgentsReady(ctx, t, fake, r.panes)
}

// TestBaselineMassRepair_RecreatesEveryMember: after every pane is killed,
// the baseline has recreated every member's tab and agent, each agent ready
// on a new pane, when it reports.
func TestBaselineMassRepair_RecreatesEveryMember(t *testing.T) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fake := startFake(t, 0)
	tabs, ready := baselineMassRepair(ctx, t, fake, n, time.Millisecond)
	if tabs <= 0 || ready < tabs {
		t.Errorf("all tabs asked after %s, all agents ready after %s: want 0 < tabs ≤ ready", tabs, ready)
	}
	calls := fake.Calls()
	for _, m := range []string{"tab.create", "agent.start"} {
		if calls[m] != 2*n {
			t.Errorf("%s called %d times, want %d (converge, then one repair per member)", m, calls[m], 2*n)
		}
	}
	agents, err := herdrClient(fake).ListAgents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	panes := map[string]string{}
	for _, a := range agents {
		panes[a.Name] = a.PaneID
	}
	checkAgentsReady(ctx, t, fake, panes)
}

// TestMassRepair_FleetdBackOnNewPanes: the fleetd half of BenchmarkMassRepair
// waits until every member is Ready on a new pane, and its baseline's
// figures come from the same run.
func TestMassRepair_FleetdBackOnNewPanes(t *testing.T) {
	r := measureMassRepair(t, 10, 0, time.Millisecond)
	if r.tabs <= 0 || r.ready < r.tabs || r.baseTabs <= 0 || r.baseReady < r.baseTabs {
		t.Errorf("figures %+v: want 0 < tabs ≤ ready for fleetd and the baseline", r)
	}
}

// checkAgentsReady: every member of panes (member → pane) has an
// interactive-ready agent of that name in that pane, and no two share one.
func checkAgentsReady(ctx context.Context, t *testing.T, fake *herdrsim.Server, panes map[string]string) {
	t.Helper()
	c := herdrClient(fake)
	seen := map[string]string{}
	for _, name := range memberNames(len(panes)) {
		pane, ok := panes[name]
		if !ok {
			t.Errorf("member %s: no pane", name)
			continue
		}
		if other, dup := seen[pane]; dup {
			t.Errorf("members %s and %s share pane %s", other, name, pane)
		}
		seen[pane] = name
		a, err := c.GetAgent(ctx, name)
		if err != nil {
			t.Errorf("member %s: %v", name, err)
			continue
		}
		if a.PaneID != pane || !a.InteractiveReady {
			t.Errorf("member %s: agent in %s (ready %v), want ready in %s", name, a.PaneID, a.InteractiveReady, pane)
		}
	}
}
