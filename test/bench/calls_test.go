package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFleetHerdrCalls asserts, as counts, the two figures of the benchmarks
// that are not times: what converging a fleet costs herdr per member, by
// method, and that an idle fleet's resync costs the same whatever its size.
// (controllers' scenario tests check the 200-member resync on its own; this
// compares sizes and pins every method of convergence.)
func TestFleetHerdrCalls(t *testing.T) {
	sizes := []int{20, 80}
	perMember := map[string]bool{"tab.create": true, "agent.start": true, "agent.get": true}
	var fixed, resyncs []map[string]int
	for _, n := range sizes {
		f := startIdleFleet(t, n, 0)
		// Per member: one tab, one agent.start and one agent.get that
		// confirms readiness (the fake's agents are ready as soon as
		// agent.start is answered; the pane's terminal_id is pinned from
		// tab.create's answer).
		// Everything else — the protocol check, listings, the workspace,
		// subscriptions — must not depend on n.
		rest := map[string]int{}
		for m, c := range f.converge {
			if !perMember[m] {
				rest[m] = c
			}
		}
		for m := range perMember {
			if f.converge[m] != n {
				t.Errorf("%d members: %s called %d times to converge, want %d", n, m, f.converge[m], n)
			}
		}
		if rest["workspace.create"] != 1 || rest["ping"] != 1 {
			t.Errorf("%d members: workspace.create %d, ping %d; want 1 each", n, rest["workspace.create"], rest["ping"])
		}
		fixed = append(fixed, rest)
		got := f.resyncIntervals(t, 2)
		for i, d := range got {
			if diff := cmp.Diff(got[0], d); diff != "" {
				t.Errorf("%d members: resync %d differs from the first (-first +this):\n%s", n, i+1, diff)
			}
		}
		resyncs = append(resyncs, got[0])
		f.stop()
	}
	if diff := cmp.Diff(fixed[0], fixed[1]); diff != "" {
		t.Errorf("herdr calls to converge beyond the per-member ones grow with the fleet (-%d members +%d members):\n%s", sizes[0], sizes[1], diff)
	}
	// A resync reads herdr in one call, session.snapshot, at any fleet
	// size.
	want := map[string]int{"session.snapshot": 1}
	for i, n := range sizes {
		if diff := cmp.Diff(want, resyncs[i]); diff != "" {
			t.Errorf("%d members: herdr calls per idle resync interval (-want +got):\n%s", n, diff)
		}
	}
}
