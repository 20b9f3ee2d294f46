package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

func TestParseBench_PairsFiguresWithBaselines(t *testing.T) {
	in := `goos: linux
BenchmarkConvergence/members=100-2   1   782569509 ns/op   3.010 base-calls/member   241.3 base-wall-ms   3.070 calls/member   474.2 wall-ms   1.000 calls:tab.create/member
BenchmarkIdleResync-2   1   1270923430 ns/op   4.000 calls/interval   4.000 base-calls/interval
--- FAIL: BenchmarkBroken
PASS
`
	got, err := parseBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{Bench: "Convergence/members=100", Figure: "wall-ms", Value: 474.2, Base: 241.3, HasBase: true},
		{Bench: "Convergence/members=100", Figure: "calls/member", Value: 3.07, Base: 3.01, HasBase: true},
		{Bench: "Convergence/members=100", Figure: "calls:tab.create/member", Value: 1},
		{Bench: "IdleResync", Figure: "calls/interval", Value: 4, Base: 4, HasBase: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestWriteTable_RatioOnlyWithNonZeroBaseline(t *testing.T) {
	var b strings.Builder
	writeTable(&b, []row{
		{Bench: "X", Figure: "wall-ms", Value: 474.2, Base: 241.3, HasBase: true},
		{Bench: "X", Figure: "errors", Value: 0, Base: 0, HasBase: true},
		{Bench: "X", Figure: "goroutines", Value: 12},
	})
	want := `| benchmark | figure | fleetd | baseline | ratio |
|---|---|--:|--:|--:|
| X | wall-ms | 474 | 241 | 1.97× |
| X | errors | 0 | 0 |  |
| X | goroutines | 12.0 |  |  |
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestParseBench_RejectsUnparsableValue(t *testing.T) {
	_, err := parseBench(strings.NewReader("BenchmarkX-2 1 12 ns/op abc wall-ms\n"))
	if err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Fatalf("err = %v, want one naming the bad value", err)
	}
}

func TestProcessRows_ConvergenceAgainstTheBareClient(t *testing.T) {
	full := procFigures{converge: 22 * time.Second, rssKiB: 51 * 1024, peakKiB: 52 * 1024, goroutines: 25, heap: 26 << 20,
		adopt: 1200 * time.Millisecond, adoptPeakKiB: 30 * 1024}
	empty := procFigures{converge: 150 * time.Millisecond, rssKiB: 19 * 1024, peakKiB: 20 * 1024, goroutines: 24, heap: 4 << 20}
	got := processRows(1000, full, empty, 1500*time.Millisecond)
	b, a := "Process/members=1000", "Process/adopt=1000"
	want := []row{
		{Bench: b, Figure: "converge-ms", Value: 22000, Base: 1500, HasBase: true},
		{Bench: b, Figure: "rss-MiB", Value: 51, Base: 19, HasBase: true},
		{Bench: b, Figure: "peak-rss-MiB", Value: 52, Base: 20, HasBase: true},
		{Bench: b, Figure: "peak-rss-KiB/member", Value: 32.768},
		{Bench: b, Figure: "heap-inuse-MiB", Value: 26, Base: 4, HasBase: true},
		{Bench: b, Figure: "goroutines", Value: 25, Base: 24, HasBase: true},
		{Bench: a, Figure: "ready-ms", Value: 1200, Base: 150, HasBase: true},
		{Bench: a, Figure: "peak-rss-MiB", Value: 30, Base: 20, HasBase: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

// TestBareConverge_StartsEveryMemberAtOnce: the bare client's every
// agent.start reaches herdr before any agent is ready (the fake's clock
// stands still until then), and it returns once all are ready.
func TestBareConverge_StartsEveryMemberAtOnce(t *testing.T) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	fake, err := validated.Start(&herdrsim.Options{Clock: clk, ReadyDelay: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	c := herdr.New(&herdr.Options{SocketPath: fake.SocketPath()})
	done := make(chan error, 1)
	go func() { done <- bareConverge(ctx, c, n, 20*time.Millisecond) }()
	if err := fake.WaitCalls(ctx, "agent.start", n); err != nil {
		t.Fatalf("not every agent.start reached herdr before the first agent was ready: %v (calls %v)", err, fake.Calls())
	}
	// Step only once herdr has answered every agent.start (each has armed
	// its ready timer): until an agent is listed, wait for another poll.
	for {
		polls := fake.Calls()["agent.get"]
		agents, err := c.ListAgents(ctx)
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
	clk.Step(3 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	agents, err := c.ListAgents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, a := range agents {
		if a.InteractiveReady {
			ready[a.Name] = true
		}
	}
	for i := range n {
		if !ready[memberName(i)] {
			t.Errorf("member %s: no ready agent", memberName(i))
		}
	}
}
