package herdrcache

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/herdr"
)

// view is the cache's picture of herdr: workspaces, tabs, panes and agents,
// filled by full listings (resync) and kept current by events and by what
// the cache's writers report they did themselves. Readers read it instead
// of asking herdr, which is what makes a converged fleet cost herdr nothing.
//
// A listing is taken over several calls while events and reconciles keep
// changing the picture, so every local change is stamped with a sequence
// number, and installing a listing keeps the local version of anything
// changed after the listing began. A view that is not synced (herdr down,
// or not listed since it came back) is never evidence that a pane is gone.
type view struct {
	mu     sync.Mutex
	synced bool
	seq    uint64
	// touched: pane, tab or workspace id → seq of its last local change,
	// kept only while a listing is taken (listing; Run's goroutine takes
	// one at a time): install needs only the changes after its listing
	// began, so a change made with no listing under way is never read.
	touched    map[string]uint64
	listing    bool
	workspaces map[string]herdr.WorkspaceInfo
	tabs       map[string]herdr.TabInfo
	panes      map[string]herdr.PaneInfo
	agents     map[string]herdr.AgentInfo // by pane id
	// byTerminal and byTab index panes: the pane id of a terminal id, the
	// pane ids of a tab. Every change of panes goes through putPaneLocked,
	// deletePaneLocked or install, which keep them; a repair looks a gone
	// pane up by terminal id and closes its tab with its last pane, and
	// neither walks every pane.
	byTerminal map[string]string
	byTab      map[string][]string
	// refused: herdr's socket refused a connection since the last listing
	// was installed — its process went away, and every agent in a pane
	// that comes back under a new terminal id is a new one.
	refused bool
}

func newView() *view {
	return &view{
		workspaces: map[string]herdr.WorkspaceInfo{},
		tabs:       map[string]herdr.TabInfo{},
		panes:      map[string]herdr.PaneInfo{},
		agents:     map[string]herdr.AgentInfo{},
		byTerminal: map[string]string{},
		byTab:      map[string][]string{},
	}
}

// listing is one full read of herdr.
type listing struct {
	workspaces []herdr.WorkspaceInfo
	tabs       []herdr.TabInfo
	panes      []herdr.PaneInfo
	agents     []herdr.AgentInfo
}

// begin returns the sequence a listing starts at; local changes are
// stamped from then until the listing is installed.
func (v *view) begin() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.listing = true
	return v.seq
}

// install replaces the view with l, except for ids changed locally after
// start, and marks the view synced. It returns, sorted, the panes whose
// agent herdr relaunched since the view last showed them: panes with a new
// terminal id after herdr's socket refused a connection (herdr's process
// went away: a restart relaunches every agent), or with the evidence of
// relaunched.
func (v *view) install(start uint64, l listing) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	ws := map[string]herdr.WorkspaceInfo{}
	for _, w := range l.workspaces {
		ws[w.WorkspaceID] = w
	}
	tabs := map[string]herdr.TabInfo{}
	for _, t := range l.tabs {
		tabs[t.TabID] = t
	}
	panes := map[string]herdr.PaneInfo{}
	for _, p := range l.panes {
		shareWithinPane(&p)
		panes[p.PaneID] = p
	}
	agents := map[string]herdr.AgentInfo{}
	for _, a := range l.agents {
		if p, ok := panes[a.PaneID]; ok {
			shareWithPane(&a, &p)
		}
		agents[a.PaneID] = a
	}
	for id, s := range v.touched {
		if s <= start {
			continue
		}
		keepLocal(ws, v.workspaces, id)
		keepLocal(tabs, v.tabs, id)
		keepLocal(panes, v.panes, id)
		keepLocal(agents, v.agents, id)
	}
	// No listing is under way now: the stamps go, with the room their map
	// grew to.
	v.touched, v.listing = nil, false
	restarted := v.refused
	v.refused = false
	var again []string
	for id, p := range panes {
		old, ok := v.panes[id]
		prev, had := v.agents[id]
		if !ok || !had || old.TerminalID == p.TerminalID {
			continue
		}
		if a, has := agents[id]; restarted || relaunched(prev, a, has) {
			again = append(again, id)
		}
	}
	slices.Sort(again)
	v.workspaces, v.tabs, v.panes, v.agents = ws, tabs, panes, agents
	v.byTerminal, v.byTab = make(map[string]string, len(panes)), make(map[string][]string, len(tabs))
	for _, p := range panes {
		v.indexLocked(&p)
	}
	v.synced = true
	return again
}

// relaunched reports whether the agent a listing shows in a pane (has: it
// shows one), after herdr gave the pane a new terminal id, is a new process
// rather than prev, the one the view last showed there. A new terminal id
// alone does not say: herdr changes them when it restarts (restoring its
// panes and relaunching their agents, each first launch_pending) and when it
// hands off live to a new binary (everything kept, agents and their
// counters included). A new process shows by what a handoff keeps: the
// pane has no agent yet or its agent is launch_pending where prev was not,
// or herdr's state_change_seq or completion_seq went back (a new agent's
// count from zero; the view's state_change_seq is a lower bound of herdr's,
// see setAgentStatus).
func relaunched(prev, a herdr.AgentInfo, has bool) bool {
	switch {
	case !has:
		return true
	case a.LaunchPending && !prev.LaunchPending:
		return true
	case a.StateChangeSeq < prev.StateChangeSeq:
		return true
	case a.CompletionSeq != nil && prev.CompletionSeq != nil && *a.CompletionSeq < *prev.CompletionSeq:
		return true
	}
	return false
}

func keepLocal[T any](fresh, local map[string]T, id string) {
	if x, ok := local[id]; ok {
		fresh[id] = x
	} else {
		delete(fresh, id)
	}
}

func (v *view) isSynced() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.synced
}

// markRefused records that herdr's socket refused a connection.
func (v *view) markRefused() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refused = true
}

// unsync marks the view unsynced and reports whether it was synced.
func (v *view) unsync() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	was := v.synced
	v.synced = false
	return was
}

// hasPane reports whether the view holds the pane.
func (v *view) hasPane(paneID string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.panes[paneID]
	return ok
}

// touchLocked stamps ids as changed locally, while a listing is under
// way. v.mu must be held.
func (v *view) touchLocked(ids ...string) {
	v.seq++
	if !v.listing {
		return
	}
	if v.touched == nil {
		v.touched = map[string]uint64{}
	}
	for _, id := range ids {
		if id != "" {
			v.touched[id] = v.seq
		}
	}
}

func (v *view) setWorkspace(w herdr.WorkspaceInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(w.WorkspaceID)
	v.workspaces[w.WorkspaceID] = w
}

func (v *view) setTab(t herdr.TabInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(t.TabID)
	v.tabs[t.TabID] = t
}

func (v *view) setPane(p herdr.PaneInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(p.PaneID)
	shareWithinPane(&p)
	v.putPaneLocked(p)
	if a, ok := v.agents[p.PaneID]; ok {
		shareWithPane(&a, &p)
		v.agents[p.PaneID] = a // the same values
	}
}

// putPaneLocked sets a pane and its index entries. v.mu must be held.
func (v *view) putPaneLocked(p herdr.PaneInfo) {
	if old, ok := v.panes[p.PaneID]; ok {
		v.unindexLocked(&old)
	}
	v.panes[p.PaneID] = p
	v.indexLocked(&p)
}

// deletePaneLocked drops a pane and its index entries. v.mu must be held.
func (v *view) deletePaneLocked(paneID string) {
	if old, ok := v.panes[paneID]; ok {
		v.unindexLocked(&old)
		delete(v.panes, paneID)
	}
}

// indexLocked adds p's index entries; unindexLocked removes them. v.mu
// must be held.
func (v *view) indexLocked(p *herdr.PaneInfo) {
	if p.TerminalID != "" {
		v.byTerminal[p.TerminalID] = p.PaneID
	}
	v.byTab[p.TabID] = append(v.byTab[p.TabID], p.PaneID)
}

func (v *view) unindexLocked(p *herdr.PaneInfo) {
	if p.TerminalID != "" && v.byTerminal[p.TerminalID] == p.PaneID {
		delete(v.byTerminal, p.TerminalID)
	}
	ids := slices.DeleteFunc(v.byTab[p.TabID], func(id string) bool { return id == p.PaneID })
	if len(ids) == 0 {
		delete(v.byTab, p.TabID)
	} else {
		v.byTab[p.TabID] = ids
	}
}

func (v *view) setAgent(a herdr.AgentInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(a.PaneID)
	if p, ok := v.panes[a.PaneID]; ok {
		p.AgentStatus = a.AgentStatus
		shareWithPane(&a, &p)
		v.panes[a.PaneID] = p // no indexed field changed
	}
	v.agents[a.PaneID] = a
}

// shareWithPane points each field of a that holds what the same field of
// p holds at p's — the same strings, maps and session record — so that a
// pane and its agent, which herdr reports with the same terminal and ids,
// titles, directories and agent session, are kept once, not decoded twice
// and kept twice. The values do not change. Nothing changes a cached map or
// record in place: the view replaces them, and its readers only read.
func shareWithPane(a *herdr.AgentInfo, p *herdr.PaneInfo) {
	share(&a.TerminalID, p.TerminalID)
	share(&a.AgentStatus, p.AgentStatus)
	share(&a.WorkspaceID, p.WorkspaceID)
	share(&a.TabID, p.TabID)
	share(&a.PaneID, p.PaneID)
	share(&a.Agent, p.Agent)
	share(&a.Title, p.Title)
	share(&a.TerminalTitle, p.TerminalTitle)
	share(&a.TerminalTitleStripped, p.TerminalTitleStripped)
	share(&a.DisplayAgent, p.DisplayAgent)
	share(&a.CWD, p.CWD)
	share(&a.ForegroundCWD, p.ForegroundCWD)
	// Only maps that are both there: nil and empty are equal, not the same.
	if a.StateLabels != nil && p.StateLabels != nil && maps.Equal(a.StateLabels, p.StateLabels) {
		a.StateLabels = p.StateLabels
	}
	if a.Tokens != nil && p.Tokens != nil && maps.Equal(a.Tokens, p.Tokens) {
		a.Tokens = p.Tokens
	}
	if a.AgentSession != nil && p.AgentSession != nil && *a.AgentSession == *p.AgentSession {
		a.AgentSession = p.AgentSession
	}
}

// shareWithinPane points p's foreground directory at its directory and
// its terminal title at its title where they are equal, as they mostly
// are; an agent then shares them with its pane (shareWithPane).
func shareWithinPane(p *herdr.PaneInfo) {
	share(&p.ForegroundCWD, p.CWD)
	share(&p.TerminalTitle, p.Title)
}

// share makes *dst the string src when they are equal.
func share[S ~string](dst *S, src S) {
	if *dst == src {
		*dst = src
	}
}

func (v *view) setAgentStatus(paneID string, s herdr.AgentStatus) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(paneID)
	if p, ok := v.panes[paneID]; ok {
		p.AgentStatus = s
		v.panes[paneID] = p // no indexed field changed
	}
	if a, ok := v.agents[paneID]; ok {
		if a.InteractiveReady && !a.LaunchPending && agentState(string(a.AgentStatus)) != agentState(string(s)) {
			// A ready agent's status changed, so herdr's state_change_seq
			// moved at least once: the view keeps a lower bound of it
			// between listings. (A launching agent's status can change
			// with no state change, at a dialog.)
			a.StateChangeSeq++
		}
		a.AgentStatus = s
		v.agents[paneID] = a
	}
}

func (v *view) removeAgent(paneID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(paneID)
	delete(v.agents, paneID)
}

func (v *view) removePane(paneID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removePaneLocked(paneID)
}

// closePane drops a pane that closed or exited, and its tab with it when
// it was the tab's last pane: herdr closes such a tab without a tab_closed
// event (PROTOCOL.md, "Last pane of a non-last tab: only pane_closed").
func (v *view) closePane(paneID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, known := v.panes[paneID]
	v.removePaneLocked(paneID)
	if !known {
		return
	}
	if _, ok := v.tabs[p.TabID]; ok && len(v.byTab[p.TabID]) == 0 {
		v.touchLocked(p.TabID)
		delete(v.tabs, p.TabID)
	}
}

// removePaneLocked drops a pane and its agent. v.mu must be held.
func (v *view) removePaneLocked(paneID string) {
	v.touchLocked(paneID)
	v.deletePaneLocked(paneID)
	delete(v.agents, paneID)
}

// removeTab drops a tab and its panes (herdr sends no pane_closed for them).
func (v *view) removeTab(tabID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removeTabLocked(tabID)
}

func (v *view) removeTabLocked(tabID string) {
	v.touchLocked(tabID)
	delete(v.tabs, tabID)
	for _, id := range slices.Clone(v.byTab[tabID]) {
		v.removePaneLocked(id)
	}
}

func (v *view) removeWorkspace(wsID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(wsID)
	delete(v.workspaces, wsID)
	for id, t := range v.tabs {
		if t.WorkspaceID == wsID {
			v.removeTabLocked(id)
		}
	}
	for id, p := range v.panes {
		if p.WorkspaceID == wsID {
			v.removePaneLocked(id)
		}
	}
}

// pane finds a pane by terminal id (stable across moves), else by pane id.
func (v *view) pane(terminalID, paneID string) (herdr.PaneInfo, herdr.AgentInfo, bool, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.panes[paneID]
	if !ok || (terminalID != "" && p.TerminalID != terminalID) {
		ok = false
		if id, found := v.byTerminal[terminalID]; found { // "" is never indexed
			p, ok = v.panes[id]
		}
	}
	if !ok {
		return herdr.PaneInfo{}, herdr.AgentInfo{}, false, false
	}
	a, hasAgent := v.agents[p.PaneID]
	return p, a, true, hasAgent
}

func (v *view) workspaceByLabel(label string) (herdr.WorkspaceInfo, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var best herdr.WorkspaceInfo
	found := false
	for _, w := range v.workspaces {
		// Several workspaces may share a label; take the lowest id for a
		// stable choice.
		if w.Label == label && (!found || w.WorkspaceID < best.WorkspaceID) {
			best, found = w, true
		}
	}
	return best, found
}

// tabsWithLabelPrefix returns the tabs whose label starts with prefix.
func (v *view) tab(tabID string) (herdr.TabInfo, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.tabs[tabID]
	return t, ok
}

func (v *view) tabsWithLabelPrefix(prefix string) []herdr.TabInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []herdr.TabInfo
	for _, t := range v.tabs {
		if strings.HasPrefix(t.Label, prefix) {
			out = append(out, t)
		}
	}
	return out
}

// tabPanes returns the panes of a tab.
func (v *view) tabPanes(tabID string) []herdr.PaneInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tabPanesLocked(tabID)
}

// tabPanesLocked is tabPanes with v.mu held.
func (v *view) tabPanesLocked(tabID string) []herdr.PaneInfo {
	var out []herdr.PaneInfo
	for _, id := range v.byTab[tabID] {
		out = append(out, v.panes[id])
	}
	return out
}
