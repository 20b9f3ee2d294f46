package herdrcache

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
)

// checkIndex fails unless the view's pane indexes are what its panes give,
// point at the view's own entries, and a tab the view does not have is
// there only while panes name it.
func checkIndex(t *testing.T, v *view, step string) {
	t.Helper()
	checkSorted(t, v.panes, "panes", step)
	checkSorted(t, v.byTerminal, "byTerminal", step)
	checkSorted(t, v.tabs, "tabs", step)
	terminals, tabs := map[string]string{}, map[string][]string{}
	for _, e := range v.panes.Entries() {
		id := e.pane.PaneID
		if !e.hasPane && !e.hasAgent {
			t.Fatalf("after %s: pane %s is kept with neither a pane nor an agent", step, id)
		}
		if !e.hasPane {
			continue
		}
		if e.pane.TerminalID != "" {
			terminals[e.pane.TerminalID] = id
		}
		tabs[e.pane.TabID] = append(tabs[e.pane.TabID], id)
	}
	gotTerminals := map[string]string{}
	for _, e := range v.byTerminal.Entries() {
		term := e.pane.TerminalID
		if v.panes.Get(e.pane.PaneID) != e {
			t.Fatalf("after %s: terminal %s indexes a pane %s the view does not hold", step, term, e.pane.PaneID)
		}
		gotTerminals[term] = e.pane.PaneID
	}
	got := map[string][]string{}
	for _, te := range v.tabs.Entries() {
		tab := te.id
		if !te.known && len(te.panes) == 0 {
			t.Fatalf("after %s: tab %s, which the view does not have, is kept with no pane", step, tab)
		}
		for _, e := range te.panes {
			if v.panes.Get(e.pane.PaneID) != e {
				t.Fatalf("after %s: tab %s indexes a pane %s the view does not hold", step, tab, e.pane.PaneID)
			}
			got[tab] = append(got[tab], e.pane.PaneID)
		}
	}
	for tab := range got {
		slices.Sort(got[tab])
	}
	for tab := range tabs {
		slices.Sort(tabs[tab])
	}
	if diff := cmp.Diff(terminals, gotTerminals); diff != "" {
		t.Fatalf("after %s: byTerminal (-want +got):\n%s", step, diff)
	}
	if diff := cmp.Diff(tabs, got); diff != "" {
		t.Fatalf("after %s: tabs' panes (-want +got):\n%s", step, diff)
	}
}

// checkSorted fails unless x's entries are sorted by key, one a key.
func checkSorted[E any](t *testing.T, x sortedindex.Index[E], name, step string) {
	t.Helper()
	for i := 1; i < x.Len(); i++ {
		if prev, k := x.Key(x.Entries()[i-1]), x.Key(x.Entries()[i]); prev >= k {
			t.Fatalf("after %s: %s: %q follows %q", step, name, k, prev)
		}
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
			p, _, _, _ := v.pane("", id)
			tab := p.TabID
			_, hadTab := v.tab(tab)
			others := len(v.tabPanesLocked(tab)) - 1
			v.closePane(id)
			if _, hasTab := v.tab(tab); hadTab && hasTab != (others > 0) {
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
			for _, e := range v.panes.Entries() {
				if e.hasPane && e.pane.TerminalID == term {
					want, found = e.pane.PaneID, true
				}
			}
			p, _, ok, _ := v.pane(term, "gone")
			if ok != found || (ok && v.panes.Get(p.PaneID).pane.TerminalID != term) {
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

// What a reader gets back is, field for field, the pane and agent it was
// given, whichever came first and however they came (a writer's report, a
// listing): a pane with an agent alike, as herdr reports them, or unlike
// it in a few or every field they both have; an agent the view holds
// before its pane; a pane with no agent. The view keeps of an agent only
// what differs from its pane, and equal maps stay as distinct as nil and
// empty are.
func TestView_PaneAndAgentReadBackAsGiven(t *testing.T) {
	session := func(value string) *herdr.AgentSessionInfo {
		return &herdr.AgentSessionInfo{Source: "herdr:claude", Agent: "claude", Kind: "id", Value: value}
	}
	pane := herdr.PaneInfo{PaneID: "w1:p2", TerminalID: "term_1", WorkspaceID: "w1", TabID: "w1:t2", Focused: true,
		AgentStatus: herdr.StatusIdle, Revision: 42, CWD: "/src", ForegroundCWD: "/src", Label: "main", Agent: "claude",
		Title: "✳ Claude Code", TerminalTitle: "✳ Claude Code", TerminalTitleStripped: "Claude Code", DisplayAgent: "Claude Code",
		StateLabels: map[string]string{"status": "ready"}, Tokens: nil, AgentSession: session("3f1c"),
		Scroll: &herdr.PaneScrollInfo{MaxOffsetFromBottom: 120, ViewportRows: 40}, RestoreError: "none"}
	own := func(a herdr.AgentInfo) herdr.AgentInfo {
		a.Name, a.StateChangeSeq, a.CompletionSeq = "reviewer", 6, new(uint64(3))
		a.LaunchPending, a.InteractiveReady, a.ScreenDetectionSkipped = true, true, true
		return a
	}
	alike := own(herdr.AgentInfo{PaneID: pane.PaneID, TerminalID: pane.TerminalID, WorkspaceID: pane.WorkspaceID, TabID: pane.TabID,
		Focused: pane.Focused, AgentStatus: pane.AgentStatus, Revision: pane.Revision, CWD: pane.CWD, ForegroundCWD: pane.ForegroundCWD,
		Agent: pane.Agent, Title: pane.Title, TerminalTitle: pane.TerminalTitle, TerminalTitleStripped: pane.TerminalTitleStripped,
		DisplayAgent: pane.DisplayAgent, StateLabels: map[string]string{"status": "ready"}, AgentSession: session("3f1c")})
	aFew := alike
	aFew.ForegroundCWD, aFew.Tokens = "/elsewhere", map[string]string{}
	// Unlike in every field it shares with the pane but the pane id, which
	// the view holds them by.
	unlike := own(herdr.AgentInfo{PaneID: pane.PaneID, TerminalID: "term_9", WorkspaceID: "w2", TabID: "w2:t5",
		Focused: false, AgentStatus: herdr.StatusWorking, Revision: 7, CWD: "/other", ForegroundCWD: "/other/sub",
		Agent: "codex", Title: "zsh", TerminalTitle: "zsh ~", TerminalTitleStripped: "zsh", DisplayAgent: "Codex",
		StateLabels: map[string]string{}, Tokens: map[string]string{"in": "12"}, AgentSession: session("9e2d")})
	for _, pair := range []struct {
		name  string
		pane  *herdr.PaneInfo
		agent *herdr.AgentInfo
	}{
		{"agent alike", &pane, &alike},
		{"agent unlike in a few fields", &pane, &aFew},
		{"agent unlike in every field", &pane, &unlike},
		{"no agent", &pane, nil},
		{"no pane", nil, &unlike},
	} {
		for _, fill := range []struct {
			name       string
			paneFirst  bool
			fromReport bool
		}{
			{"pane then agent", true, true},
			{"agent then pane", false, true},
			{"listing", false, false},
		} {
			if (pair.pane == nil || pair.agent == nil) && fill.fromReport && !fill.paneFirst {
				continue // one alone comes in no order
			}
			t.Run(pair.name+"/"+fill.name, func(t *testing.T) {
				v := newView()
				var l listing
				wantPane := pair.pane
				putPane := func() {
					if pair.pane == nil {
						return
					}
					if !fill.fromReport {
						l.panes = append(l.panes, *pair.pane)
						return
					}
					v.setPane(*pair.pane)
				}
				putAgent := func() {
					if pair.agent == nil {
						return
					}
					if !fill.fromReport {
						l.agents = append(l.agents, *pair.agent)
						return
					}
					v.setAgent(*pair.agent)
					if pair.pane != nil && fill.paneFirst {
						// A writer's agent brings its pane's status along.
						p := *pair.pane
						p.AgentStatus = pair.agent.AgentStatus
						wantPane = &p
					}
				}
				if fill.paneFirst {
					putPane()
					putAgent()
				} else {
					putAgent()
					putPane()
				}
				if !fill.fromReport {
					v.install(v.begin(), l)
				}
				p, a, ok, hasAgent := v.pane("", "w1:p2")
				if ok != (pair.pane != nil) || hasAgent != (ok && pair.agent != nil) {
					t.Fatalf("pane found %v with agent %v", ok, hasAgent)
				}
				if pair.pane == nil {
					// A reader sees no pane yet; the view keeps the agent
					// whole until one comes.
					if e := v.panes.Get("w1:p2"); e == nil || !e.hasAgent {
						t.Fatal("the agent is not kept")
					} else if diff := cmp.Diff(*pair.agent, e.agent()); diff != "" {
						t.Errorf("agent with no pane (-given +kept):\n%s", diff)
					}
					return
				}
				if diff := cmp.Diff(*wantPane, p); diff != "" {
					t.Errorf("pane (-given +read):\n%s", diff)
				}
				want := herdr.AgentInfo{}
				if pair.agent != nil {
					want = *pair.agent
				}
				if diff := cmp.Diff(want, a); diff != "" {
					t.Errorf("agent (-given +read):\n%s", diff)
				}
			})
		}
	}
}

// A tab reads back, field for field, as it was given, however it came (a
// writer's report, a listing, a local change kept over a listing), and a
// tab the view knows only from the panes that name it is not a tab.
func TestView_TabReadsBackAsGiven(t *testing.T) {
	tab := herdr.TabInfo{TabID: "w1:t2", WorkspaceID: "w1", Number: 2, Label: "fleetd/alpha", Focused: true,
		PaneCount: 3, AgentStatus: herdr.StatusBlocked}
	pane := herdr.PaneInfo{PaneID: "w1:p9", TerminalID: "term_9", WorkspaceID: "w1", TabID: "w1:t7"}
	for _, tc := range []struct {
		name string
		fill func(v *view)
	}{
		{"report", func(v *view) { v.setTab(tab) }},
		{"listing", func(v *view) { v.install(v.begin(), listing{tabs: []herdr.TabInfo{tab}}) }},
		{"kept over a listing", func(v *view) {
			start := v.begin()
			v.setTab(tab)
			v.install(start, listing{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			tc.fill(v)
			v.setPane(pane)
			got, ok := v.tab(tab.TabID)
			if !ok {
				t.Fatal("tab not found")
			}
			if diff := cmp.Diff(tab, got); diff != "" {
				t.Errorf("tab (-given +read):\n%s", diff)
			}
			if diff := cmp.Diff([]herdr.TabInfo{tab}, v.tabsWithLabelPrefix("fleetd/")); diff != "" {
				t.Errorf("tabs with the prefix (-given +read):\n%s", diff)
			}
			if _, ok := v.tab(pane.TabID); ok {
				t.Errorf("tab %s, which only a pane names, found", pane.TabID)
			}
			if got := v.tabPanes(pane.TabID); len(got) != 1 || got[0].PaneID != pane.PaneID {
				t.Errorf("panes of tab %s = %v, want %s", pane.TabID, got, pane.PaneID)
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

// Whatever the order of a writer's reports, events and listings, a pane
// and its agent read back as they were last given — the pane's status
// following its agent's, a ready agent's state_change_seq counting its
// status changes — though the view keeps an agent once with its pane where
// they agree, and apart where they do not. The reference is two maps of
// the records as given.
func TestView_PanesAndAgentsReadBackAsLastGiven(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 26))
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	labels := func() map[string]string {
		return []map[string]string{nil, {}, {"status": "ready"}}[r.IntN(3)]
	}
	session := func() *herdr.AgentSessionInfo {
		if r.IntN(3) == 0 {
			return nil
		}
		return &herdr.AgentSessionInfo{Source: "herdr:claude", Agent: "claude", Kind: "id", Value: pick("a", "b")}
	}
	id := func() string { return fmt.Sprintf("w1:p%d", r.IntN(4)) }
	status := func() herdr.AgentStatus {
		return herdr.AgentStatus(pick("idle", "working", "done", "blocked", ""))
	}
	v := newView()
	panes, agents := map[string]herdr.PaneInfo{}, map[string]herdr.AgentInfo{}
	// A pane or an agent is mostly the other's double, as herdr reports
	// them, with one field of what they share told apart now and then.
	type shared struct {
		term, status, cwd, fgCWD, agent, title, termTitle, stripped, display string
		focused                                                              bool
		revision                                                             uint64
		labels, tokens                                                       map[string]string
		session                                                              *herdr.AgentSessionInfo
	}
	draw := func(id string) shared {
		var s shared
		if p, ok := panes[id]; ok && r.IntN(4) != 0 {
			s = shared{p.TerminalID, string(p.AgentStatus), p.CWD, p.ForegroundCWD, p.Agent, p.Title, p.TerminalTitle,
				p.TerminalTitleStripped, p.DisplayAgent, p.Focused, p.Revision, p.StateLabels, p.Tokens, p.AgentSession}
		} else if a, ok := agents[id]; ok && r.IntN(4) != 0 {
			s = shared{a.TerminalID, string(a.AgentStatus), a.CWD, a.ForegroundCWD, a.Agent, a.Title, a.TerminalTitle,
				a.TerminalTitleStripped, a.DisplayAgent, a.Focused, a.Revision, a.StateLabels, a.Tokens, a.AgentSession}
		} else {
			s = shared{fmt.Sprintf("term_%s.%d", id[4:], r.IntN(2)), string(status()), pick("/src", "/tmp"), pick("/src", "/tmp"), pick("claude", ""),
				pick("✳ Claude Code", "zsh"), pick("✳ Claude Code", "zsh"), pick("Claude Code", ""), pick("Claude Code", ""), r.IntN(4) == 0, uint64(r.IntN(2)), labels(), labels(), session()}
		}
		switch r.IntN(20) {
		case 0:
			s.term += "x"
		case 1:
			s.status = string(status())
		case 2:
			s.cwd += "/x"
		case 3:
			s.title = pick("zsh", "vim")
		case 4:
			s.focused = !s.focused
		case 5:
			s.revision++
		case 6:
			s.labels = labels()
		case 7:
			s.tokens = labels()
		case 8:
			s.session = session()
		case 9:
			s.agent = pick("codex", "")
		case 10:
			s.termTitle = pick("zsh", "vim")
		case 11:
			s.fgCWD += "/x"
		case 12:
			s.stripped = pick("zsh", "")
		case 13:
			s.display = pick("Codex", "")
		}
		return s
	}
	pane := func() herdr.PaneInfo {
		id := id()
		s := draw(id)
		return herdr.PaneInfo{PaneID: id, TerminalID: s.term, WorkspaceID: "w1", TabID: "w1:t" + id[4:], Focused: s.focused,
			AgentStatus: herdr.AgentStatus(s.status), Revision: s.revision, CWD: s.cwd, ForegroundCWD: s.fgCWD,
			Agent: s.agent, Title: s.title, TerminalTitle: s.termTitle, TerminalTitleStripped: s.stripped,
			DisplayAgent: s.display, StateLabels: s.labels, Tokens: s.tokens,
			AgentSession: s.session, RestoreError: pick("", "", "gone"), Scroll: &herdr.PaneScrollInfo{ViewportRows: 40}}
	}
	agent := func() herdr.AgentInfo {
		id := id()
		s := draw(id)
		var completion *uint64
		if r.IntN(2) == 0 {
			completion = new(uint64(r.IntN(3)))
		}
		return herdr.AgentInfo{PaneID: id, TerminalID: s.term, WorkspaceID: "w1", TabID: "w1:t" + id[4:], Focused: s.focused,
			AgentStatus: herdr.AgentStatus(s.status), Revision: s.revision, CWD: s.cwd, ForegroundCWD: s.fgCWD,
			Agent: s.agent, Title: s.title, TerminalTitle: s.termTitle, TerminalTitleStripped: s.stripped,
			DisplayAgent: s.display, StateLabels: s.labels, Tokens: s.tokens,
			AgentSession: s.session, Name: pick("alpha", "beta"), StateChangeSeq: uint64(r.IntN(9)), CompletionSeq: completion,
			LaunchPending: r.IntN(3) == 0, InteractiveReady: r.IntN(3) != 0, ScreenDetectionSkipped: r.IntN(5) == 0}
	}
	for i := range 5000 {
		var step string
		switch op := r.IntN(8); op {
		case 0, 1:
			p := pane()
			v.setPane(p)
			panes[p.PaneID] = p
			step = "setPane " + p.PaneID
		case 2, 3:
			a := agent()
			v.setAgent(a)
			if p, ok := panes[a.PaneID]; ok {
				p.AgentStatus = a.AgentStatus
				panes[a.PaneID] = p
			}
			agents[a.PaneID] = a
			step = "setAgent " + a.PaneID
		case 4:
			id := id()
			s := status()
			v.setAgentStatus(id, s)
			if p, ok := panes[id]; ok {
				p.AgentStatus = s
				panes[id] = p
			}
			if a, ok := agents[id]; ok {
				if a.InteractiveReady && !a.LaunchPending && agentState(string(a.AgentStatus)) != agentState(string(s)) {
					a.StateChangeSeq++
				}
				a.AgentStatus = s
				agents[id] = a
			}
			step = "setAgentStatus " + id
		case 5:
			id := id()
			v.removeAgent(id)
			delete(agents, id)
			step = "removeAgent " + id
		case 6:
			id := id()
			v.removePane(id)
			delete(panes, id)
			delete(agents, id)
			step = "removePane " + id
		case 7:
			var l listing
			for range r.IntN(4) {
				l.panes = append(l.panes, pane())
			}
			for range r.IntN(4) {
				l.agents = append(l.agents, agent())
			}
			clear(panes)
			clear(agents)
			for _, p := range l.panes {
				panes[p.PaneID] = p
			}
			for _, a := range l.agents {
				agents[a.PaneID] = a
			}
			v.install(v.begin(), l)
			step = "install"
		}
		for n := range 4 {
			id := fmt.Sprintf("w1:p%d", n)
			p, a, ok, hasAgent := v.pane("", id)
			wantP, wantOK := panes[id]
			wantA, wantAgent := agents[id]
			if ok != wantOK || (ok && hasAgent != wantAgent) {
				t.Fatalf("step %d (%s): pane %s found %v with agent %v; want %v with agent %v", i, step, id, ok, hasAgent, wantOK, wantAgent)
			}
			if !ok {
				continue
			}
			if diff := cmp.Diff(wantP, p); diff != "" {
				t.Fatalf("step %d (%s): pane %s (-given +read):\n%s", i, step, id, diff)
			}
			if diff := cmp.Diff(wantA, a); diff != "" {
				t.Fatalf("step %d (%s): agent of %s (-given +read):\n%s", i, step, id, diff)
			}
		}
		checkIndex(t, v, fmt.Sprintf("step %d (%s)", i, step))
	}
}

// fillEvery sets every field of the struct v points at to a value of its
// own, made from tag: a field herdr's types gain later is set too.
func fillEvery(t *testing.T, v any, tag string) {
	t.Helper()
	s := reflect.ValueOf(v).Elem()
	for i := range s.NumField() {
		f, name := s.Field(i), tag+s.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString(name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(len(name)))
		case reflect.Uint64:
			f.SetUint(uint64(len(name)))
		case reflect.Map:
			f.Set(reflect.MakeMapWithSize(f.Type(), 1))
			f.SetMapIndex(reflect.ValueOf(name), reflect.ValueOf(tag))
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			if p.Elem().Kind() == reflect.Struct {
				fillEvery(t, p.Interface(), tag)
			} else {
				p.Elem().SetUint(uint64(len(name)))
			}
			f.Set(p)
		default:
			t.Fatalf("%s.%s: fillEvery cannot set a %s", s.Type(), s.Type().Field(i).Name, f.Kind())
		}
	}
}

// Every field of a pane, of its agent and of a tab reads back as given,
// the agent unlike its pane in each: the view's entries keep the fields
// they know one by one, and a field herdr's types gain is filled here and
// must be kept too.
func TestView_EveryFieldReadsBack(t *testing.T) {
	var pane herdr.PaneInfo
	var agent herdr.AgentInfo
	var tab herdr.TabInfo
	fillEvery(t, &pane, "pane.")
	fillEvery(t, &agent, "agent.")
	fillEvery(t, &tab, "tab.")
	agent.PaneID, agent.TabID, agent.WorkspaceID = pane.PaneID, pane.TabID, pane.WorkspaceID
	agent.Focused = false // unlike the pane's, as every field fillEvery sets is
	tab.TabID, tab.WorkspaceID = pane.TabID, pane.WorkspaceID
	for _, listed := range []bool{false, true} {
		v := newView()
		if listed {
			v.install(v.begin(), listing{tabs: []herdr.TabInfo{tab}, panes: []herdr.PaneInfo{pane}, agents: []herdr.AgentInfo{agent}})
		} else {
			v.setTab(tab)
			v.setPane(pane)
			v.setAgent(agent)
		}
		p, a, ok, hasAgent := v.pane("", pane.PaneID)
		if !ok || !hasAgent {
			t.Fatalf("listed %v: pane found %v, agent %v", listed, ok, hasAgent)
		}
		want := pane
		if !listed {
			want.AgentStatus = agent.AgentStatus // a writer's agent brings its status to its pane
		}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("listed %v: pane (-given +read):\n%s", listed, diff)
		}
		if diff := cmp.Diff(agent, a); diff != "" {
			t.Errorf("listed %v: agent (-given +read):\n%s", listed, diff)
		}
		if got, ok := v.tab(tab.TabID); !ok {
			t.Errorf("listed %v: tab not found", listed)
		} else if diff := cmp.Diff(tab, got); diff != "" {
			t.Errorf("listed %v: tab (-given +read):\n%s", listed, diff)
		}
	}
}
