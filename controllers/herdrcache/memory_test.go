package herdrcache

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/heaptest"
)

// fleetAnswers are herdr's answers (protocol 22, Claude Code agents) for a
// fleet of n members, each a tab of workspace w1 with one pane and its
// agent, as fleetd's writers and a full read see them: each tab.create and
// agent.start result, a pane.agent_status_changed line per member, and the
// tab, pane and agent listings. A tab.create's root pane is a fresh shell
// (no agent, titles or session yet, an older revision), as herdr answers
// before the agent starts.
type fleetAnswers struct {
	tabCreated, agentStarted, statusChanged [][]byte
	tabList, paneList, agentList            []byte
}

func newFleetAnswers(n int) fleetAnswers {
	var a fleetAnswers
	var tabs, panes, agents []json.RawMessage
	for i := range n {
		tab := fmt.Sprintf(`{"tab_id":"w1:t%d","workspace_id":"w1","number":%d,"label":"fleetd/member-%04d","focused":false,"pane_count":1,"agent_status":"idle"}`, i+2, i+2, i)
		common := fmt.Sprintf(`"terminal_id":"term_18a2b3c4d5%06x","workspace_id":"w1","tab_id":"w1:t%d","pane_id":"w1:p%d"`, i, i+2, i+2)
		cwd := fmt.Sprintf(`"cwd":"/home/dev/fleet/checkouts/member-%04d","foreground_cwd":"/home/dev/fleet/checkouts/member-%04d"`, i, i)
		titles := `"title":"✳ Claude Code","terminal_title":"✳ Claude Code","terminal_title_stripped":"Claude Code","display_agent":"Claude Code"`
		session := fmt.Sprintf(`"agent_session":{"source":"herdr:claude","agent":"claude","kind":"id","value":"3f1c9a52-8d4e-4b7a-9c21-%012x"}`, i)
		pane := `{` + common + `,"focused":false,"agent_status":"idle","revision":42,` + cwd + `,"agent":"claude",` + titles + `,` + session +
			`,"scroll":{"offset_from_bottom":0,"max_offset_from_bottom":120,"viewport_rows":40}}`
		agent := `{` + common + `,"agent_status":"idle","focused":false,"revision":42,"state_change_seq":6,` +
			fmt.Sprintf(`"name":"member-%04d","agent":"claude",`, i) + titles + `,` + session + `,"interactive_ready":true,` + cwd + `,"completion_seq":3}`
		root := `{` + common + `,"focused":false,"agent_status":"unknown","revision":1,` + cwd + `,"title":"zsh","terminal_title":"zsh","terminal_title_stripped":"zsh"` +
			`,"scroll":{"offset_from_bottom":0,"max_offset_from_bottom":0,"viewport_rows":40}}`
		a.tabCreated = append(a.tabCreated, []byte(`{"tab":`+tab+`,"root_pane":`+root+`}`))
		a.agentStarted = append(a.agentStarted, []byte(`{"agent":`+agent+`,"argv":["claude"]}`))
		a.statusChanged = append(a.statusChanged, fmt.Appendf(nil,
			`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p%d","workspace_id":"w1","agent_status":"working","agent":"claude"}}`, i+2))
		tabs, panes, agents = append(tabs, json.RawMessage(tab)), append(panes, json.RawMessage(pane)), append(agents, json.RawMessage(agent))
	}
	a.tabList, _ = json.Marshal(tabs)
	a.paneList, _ = json.Marshal(panes)
	a.agentList, _ = json.Marshal(agents)
	return a
}

func mustDecode[T any](tb testing.TB, b []byte) T {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// write brings c to what it holds while a fleet starts, before its next
// full read: every member's tab and agent reported by the writer, and a
// status event each.
func (a fleetAnswers) write(tb testing.TB, c *Cache) {
	for i := range a.tabCreated {
		c.TabCreated(mustDecode[herdr.TabCreated](tb, a.tabCreated[i]))
		c.AgentStarted(mustDecode[herdr.AgentStarted](tb, a.agentStarted[i]).Agent)
	}
	for _, line := range a.statusChanged {
		c.apply(mustDecode[herdr.Event](tb, line))
	}
}

// read brings c, written, to what it holds for a converged fleet: a full
// read of f, c's source, taken and passed on (resync) and then forgotten by
// f, whose copy is herdr's, not the cache's.
func (a fleetAnswers) read(tb testing.TB, c *Cache, f *fakeHerdr) {
	ws := herdr.WorkspaceInfo{WorkspaceID: "w1", Number: 1, Label: "fleetd", TabCount: len(a.tabCreated) + 1,
		PaneCount: len(a.tabCreated) + 1, ActiveTabID: "w1:t1", AgentStatus: herdr.StatusIdle}
	f.mu.Lock()
	f.workspaces, f.tabs = []herdr.WorkspaceInfo{ws}, mustDecode[[]herdr.TabInfo](tb, a.tabList)
	f.panes, f.agents = mustDecode[[]herdr.PaneInfo](tb, a.paneList), mustDecode[[]herdr.AgentInfo](tb, a.agentList)
	f.mu.Unlock()
	if err := c.resync(context.Background()); err != nil {
		tb.Fatal(err)
	}
	f.mu.Lock()
	f.workspaces, f.tabs, f.panes, f.agents = nil, nil, nil, nil
	f.mu.Unlock()
}

// members returns the pane ids of the members, as fleetd's Watch func
// does from its records.
func (a fleetAnswers) members() []string {
	ids := make([]string, len(a.tabCreated))
	for i := range ids {
		ids[i] = fmt.Sprintf("w1:p%d", i+2)
	}
	return ids
}

// BenchmarkCache_RetainedPerPane reports the heap a cache holding a fleet
// of 1000 members keeps, per member (a tab, its pane and the pane's
// agent, watched as fleetd watches its members' panes): while the fleet
// starts, from what its writer reported (written-B/pane), and once
// converged, after a full read (B/pane).
func BenchmarkCache_RetainedPerPane(b *testing.B) {
	const members = 1000
	a := newFleetAnswers(members)
	var written, read uint64
	for b.Loop() {
		before := heaptest.Live()
		f := newFake()
		c := New(f, nil)
		c.Watch(a.members)
		a.write(b, c)
		mid := heaptest.Live()
		a.read(b, c, f)
		after := heaptest.Live()
		runtime.KeepAlive(c)
		written += mid - before
		read += after - before
	}
	b.ReportMetric(float64(written)/float64(b.N)/members, "written-B/pane")
	b.ReportMetric(float64(read)/float64(b.N)/members, "B/pane")
}
