package herdrcache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
)

// checkIndex fails unless the view's pane indexes are what its panes give.
func checkIndex(t *testing.T, v *view, step string) {
	t.Helper()
	terminals, tabs := map[string]string{}, map[string][]string{}
	for id, p := range v.panes {
		if p.TerminalID != "" {
			terminals[p.TerminalID] = id
		}
		tabs[p.TabID] = append(tabs[p.TabID], id)
	}
	got := map[string][]string{}
	for tab, ids := range v.byTab {
		got[tab] = slices.Sorted(slices.Values(ids))
	}
	for tab := range tabs {
		slices.Sort(tabs[tab])
	}
	if diff := cmp.Diff(terminals, v.byTerminal); diff != "" {
		t.Fatalf("after %s: byTerminal (-want +got):\n%s", step, diff)
	}
	if diff := cmp.Diff(tabs, got); diff != "" {
		t.Fatalf("after %s: byTab (-want +got):\n%s", step, diff)
	}
}

// The pane indexes follow every change of the view — listings (with
// panes changed locally meanwhile), panes set again in another tab or
// under a new terminal id, closes of panes, tabs and workspaces — and
// answer what walking every pane answered.
func TestView_PaneIndexesFollowEveryChange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 26))
	// A pane's terminal id changes (a herdr restart or handoff), and no
	// two panes share one, as in herdr.
	pane := func() herdr.PaneInfo {
		n := r.IntN(12)
		return herdr.PaneInfo{PaneID: fmt.Sprintf("p%d", n), TerminalID: fmt.Sprintf("t%d.%d", n, r.IntN(2)),
			WorkspaceID: fmt.Sprintf("w%d", n%3), TabID: fmt.Sprintf("w%d:%d", n%3, r.IntN(3))}
	}
	v := newView()
	for i := range 3000 {
		var step string
		switch op := r.IntN(7); op {
		case 0:
			var l listing
			for range r.IntN(10) {
				p := pane()
				l.panes = append(l.panes, p)
				l.tabs = append(l.tabs, herdr.TabInfo{TabID: p.TabID, WorkspaceID: p.WorkspaceID})
			}
			start := v.begin()
			if r.IntN(2) == 0 { // a local change the listing predates
				v.setPane(pane())
			}
			v.install(start, l)
			step = "install"
		case 1, 2:
			p := pane()
			v.setTab(herdr.TabInfo{TabID: p.TabID, WorkspaceID: p.WorkspaceID})
			v.setPane(p)
			step = "setPane " + p.PaneID
		case 3:
			id := fmt.Sprintf("p%d", r.IntN(12))
			tab := v.panes[id].TabID
			_, hadTab := v.tabs[tab]
			others := len(v.byTab[tab]) - 1
			v.closePane(id)
			if _, hasTab := v.tabs[tab]; hadTab && hasTab != (others > 0) {
				t.Fatalf("close %s: tab %s kept %v with %d other panes", id, tab, hasTab, others)
			}
			step = "closePane " + id
		case 4:
			id := fmt.Sprintf("w%d:%d", r.IntN(3), r.IntN(3))
			v.removeTab(id)
			if len(v.tabPanesLocked(id)) != 0 {
				t.Fatalf("tab %s closed with panes left", id)
			}
			step = "removeTab " + id
		case 5:
			id := fmt.Sprintf("w%d", r.IntN(3))
			v.removeWorkspace(id)
			step = "removeWorkspace " + id
		case 6:
			term := fmt.Sprintf("t%d.%d", r.IntN(12), r.IntN(2))
			want, found := "", false
			for _, id := range slices.Sorted(maps.Keys(v.panes)) {
				if v.panes[id].TerminalID == term {
					want, found = id, true
				}
			}
			p, _, ok, _ := v.pane(term, "gone")
			if ok != found || (ok && v.panes[p.PaneID].TerminalID != term) {
				t.Fatalf("step %d: pane of terminal %s = %s %v; want %s %v", i, term, p.PaneID, ok, want, found)
			}
			step = "pane " + term
		}
		checkIndex(t, v, fmt.Sprintf("step %d (%s)", i, step))
	}
}

// BenchmarkView_PaneGone is what a drift repair asks of the view with
// members panes: the exited pane closed (its tab with it), then looked up
// by its terminal id (not found), then its replacement set.
func BenchmarkView_PaneGone(b *testing.B) {
	for _, members := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			v := newView()
			var l listing
			for i := range members {
				l.tabs = append(l.tabs, herdr.TabInfo{TabID: fmt.Sprintf("w1:%d", i), WorkspaceID: "w1"})
				l.panes = append(l.panes, herdr.PaneInfo{PaneID: fmt.Sprintf("w1:p%d", i), TerminalID: fmt.Sprintf("t%d", i),
					WorkspaceID: "w1", TabID: fmt.Sprintf("w1:%d", i), Label: "fleetd", CWD: "/srv/" + fmt.Sprint(i)})
			}
			v.install(v.begin(), l)
			b.ResetTimer()
			for i := range b.N {
				p := l.panes[i%members]
				v.closePane(p.PaneID)
				if _, _, ok, _ := v.pane(p.TerminalID, p.PaneID); ok {
					b.Fatal("a closed pane was found")
				}
				v.setTab(l.tabs[i%members])
				v.setPane(p)
			}
		})
	}
}

// A pane and its agent read back as they were given, whichever came
// first and however they came (a writer's report, a listing), though the
// view keeps what they have in common once: equal maps stay as distinct
// as nil and empty are.
func TestView_PaneAndAgentReadBackAsGiven(t *testing.T) {
	session := func() *herdr.AgentSessionInfo {
		return &herdr.AgentSessionInfo{Source: "herdr:claude", Agent: "claude", Kind: "id", Value: "3f1c"}
	}
	pane := herdr.PaneInfo{PaneID: "w1:p2", TerminalID: "term_1", WorkspaceID: "w1", TabID: "w1:t2",
		AgentStatus: herdr.StatusIdle, CWD: "/src", ForegroundCWD: "/src", Agent: "claude", Title: "✳ Claude Code", TerminalTitle: "✳ Claude Code",
		StateLabels: map[string]string{"status": "ready"}, Tokens: nil, AgentSession: session()}
	agent := herdr.AgentInfo{PaneID: "w1:p2", TerminalID: "term_1", WorkspaceID: "w1", TabID: "w1:t2",
		AgentStatus: herdr.StatusIdle, CWD: "/src", ForegroundCWD: "/elsewhere", Agent: "claude", Title: "✳ Claude Code",
		Name: "reviewer", StateLabels: map[string]string{"status": "ready"}, Tokens: map[string]string{},
		AgentSession: session(), InteractiveReady: true}
	for _, tc := range []struct {
		name string
		fill func(v *view)
	}{
		{"pane then agent", func(v *view) { v.setPane(pane); v.setAgent(agent) }},
		{"agent then pane", func(v *view) { v.setAgent(agent); v.setPane(pane) }},
		{"listing", func(v *view) {
			v.install(v.begin(), listing{panes: []herdr.PaneInfo{pane}, agents: []herdr.AgentInfo{agent}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			tc.fill(v)
			p, a, ok, hasAgent := v.pane("", pane.PaneID)
			if !ok || !hasAgent {
				t.Fatalf("pane found %v, agent %v", ok, hasAgent)
			}
			if diff := cmp.Diff(pane, p); diff != "" {
				t.Errorf("pane (-given +read):\n%s", diff)
			}
			if diff := cmp.Diff(agent, a); diff != "" {
				t.Errorf("agent (-given +read):\n%s", diff)
			}
			if a.Tokens == nil {
				t.Errorf("the agent's empty tokens read back as none")
			}
		})
	}
}

// A local change outlives only the listings that began before it: the
// view stamps changes while a listing is under way, and a listing that
// failed (begun, never installed) does not make an older change outlive
// the next one.
func TestView_LocalChangeOutlivesOnlyAnOlderListing(t *testing.T) {
	listed := herdr.TabInfo{TabID: "t1", WorkspaceID: "w1", Label: "listed"}
	local := herdr.TabInfo{TabID: "t1", WorkspaceID: "w1", Label: "local"}
	for _, tc := range []struct {
		name string
		run  func(v *view, change func()) // takes the listing, making the change at some point
		want string
	}{
		{"change before the listing", func(v *view, change func()) {
			change()
			v.install(v.begin(), listing{tabs: []herdr.TabInfo{listed}})
		}, "listed"},
		{"change during the listing", func(v *view, change func()) {
			start := v.begin()
			change()
			v.install(start, listing{tabs: []herdr.TabInfo{listed}})
		}, "local"},
		{"change during a failed listing, before the next", func(v *view, change func()) {
			v.begin() // never installed
			change()
			v.install(v.begin(), listing{tabs: []herdr.TabInfo{listed}})
		}, "listed"},
		{"change during the listing after a failed one", func(v *view, change func()) {
			v.begin() // never installed
			start := v.begin()
			change()
			v.install(start, listing{tabs: []herdr.TabInfo{listed}})
		}, "local"},
		{"change between two listings", func(v *view, change func()) {
			v.install(v.begin(), listing{})
			change()
			v.install(v.begin(), listing{tabs: []herdr.TabInfo{listed}})
		}, "listed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			tc.run(v, func() { v.setTab(local) })
			if got, ok := v.tab("t1"); !ok || got.Label != tc.want {
				t.Errorf("tab t1 = %q (%v), want %q", got.Label, ok, tc.want)
			}
		})
	}
}
