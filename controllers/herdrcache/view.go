package herdrcache

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
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
	// tabs holds, by id, the tabs the view has and, as their index, the
	// panes of every tab id a pane names (one the view does not have is
	// there for its panes only). panes holds, by pane id, a pane, its
	// agent or both (a listing may show an agent in a pane it does not
	// show); byTerminal indexes the panes by terminal id. Every change of
	// a pane goes through putPaneLocked, removePaneLocked or install,
	// which keep the indexes; a repair looks a gone pane up by terminal id
	// and closes its tab with its last pane, and neither walks every pane.
	tabs       sortedindex.Index[tabEntry]
	panes      sortedindex.Index[paneEntry]
	byTerminal sortedindex.Index[paneEntry]
	// refused: herdr's socket refused a connection since the last listing
	// was installed — its process went away, and every agent in a pane
	// that comes back under a new terminal id is a new one.
	refused bool
	// scroll and completionSeq are the last pane's scroll position and
	// the last agent's completion_seq kept, which the next one shares
	// where it holds the same (internPaneLocked, internAgentLocked).
	scroll        *herdr.PaneScrollInfo
	completionSeq *uint64
}

// tabEntry is a tab id of the view: the tab, if the view has it (known),
// and the panes that name it. It keeps the fields of the tab in its own,
// the id once (112 B, where a herdr.TabInfo beside the id would take 128);
// info gives the tab back.
type tabEntry struct {
	id                 string
	workspaceID, label string
	agentStatus        herdr.AgentStatus
	number, paneCount  int
	panes              []*paneEntry
	focused, known     bool
}

// tabIDOf, paneIDOf and terminalIDOf are the keys of the view's tabs, panes
// and byTerminal.
func tabIDOf(t *tabEntry) string       { return t.id }
func paneIDOf(e *paneEntry) string     { return e.pane.PaneID }
func terminalIDOf(e *paneEntry) string { return e.pane.TerminalID }

// newTab returns an entry with the tab t and no panes.
func newTab(t herdr.TabInfo) *tabEntry {
	e := &tabEntry{id: t.TabID}
	e.setInfo(t)
	return e
}

// setInfo makes t the entry's tab; t.TabID is the entry's id.
func (e *tabEntry) setInfo(t herdr.TabInfo) {
	e.workspaceID, e.label, e.agentStatus = t.WorkspaceID, t.Label, t.AgentStatus
	e.number, e.paneCount, e.focused, e.known = t.Number, t.PaneCount, t.Focused, true
}

// info returns the entry's tab as it was set.
func (e *tabEntry) info() herdr.TabInfo {
	return herdr.TabInfo{TabID: e.id, WorkspaceID: e.workspaceID, Number: e.number, Label: e.label,
		Focused: e.focused, PaneCount: e.paneCount, AgentStatus: e.agentStatus}
}

// paneEntry is a pane id of the view: the pane (hasPane), its agent
// (hasAgent) or both — a listing may show an agent in a pane it does not
// show. A pane and its agent, which herdr reports alike, mostly agree in
// every field they both have, so the entry keeps of the agent its own
// fields and, in unlike, what it holds unlike its pane (nil where it holds
// all the pane does); agent puts the agent back together. An entry with no
// pane holds the zero pane but for the entry's id (newPaneEntry), which its
// agent is unlike in every other field it has set.
type paneEntry struct {
	pane   herdr.PaneInfo
	unlike *agentUnlike
	// The agent's own fields: its pane has none of them. (The flags come
	// last, with hasPane and hasAgent, to keep the entry in a smaller size
	// class.)
	name                                                    string
	stateChangeSeq                                          uint64
	completionSeq                                           *uint64
	launchPending, interactiveReady, screenDetectionSkipped bool
	hasPane, hasAgent                                       bool
}

// newPaneEntry returns an entry for the pane id id, which has neither a
// pane nor an agent yet.
func newPaneEntry(id string) *paneEntry { return &paneEntry{pane: herdr.PaneInfo{PaneID: id}} }

// agentUnlike is what an agent holds unlike its pane, among the fields
// they both have: its strings that differ from the pane's (in strings, in
// the order of sharedStrings, those whose bit is set in differ), and its
// other shared fields, which share the pane's maps and session record
// where they hold the same. Nothing changes one in place: the entry
// replaces it.
type agentUnlike struct {
	revision            uint64
	stateLabels, tokens map[string]string
	session             *herdr.AgentSessionInfo
	strings             []string
	differ              uint16
	focused             bool
}

// sharedStrings points at the string fields an agent and a pane both have,
// in the same order for either (agentStrings, paneStrings).
type sharedStrings [12]*string

func agentStrings(a *herdr.AgentInfo) sharedStrings {
	return [...]*string{&a.TerminalID, (*string)(&a.AgentStatus), &a.WorkspaceID, &a.TabID, &a.PaneID,
		&a.Agent, &a.Title, &a.TerminalTitle, &a.TerminalTitleStripped, &a.DisplayAgent, &a.CWD, &a.ForegroundCWD}
}

func paneStrings(p *herdr.PaneInfo) sharedStrings {
	return [...]*string{&p.TerminalID, (*string)(&p.AgentStatus), &p.WorkspaceID, &p.TabID, &p.PaneID,
		&p.Agent, &p.Title, &p.TerminalTitle, &p.TerminalTitleStripped, &p.DisplayAgent, &p.CWD, &p.ForegroundCWD}
}

// putAgent makes a the entry's agent, keeping of what it shares with the
// entry's pane only what differs.
func (e *paneEntry) putAgent(a herdr.AgentInfo) {
	e.name, e.stateChangeSeq, e.completionSeq = a.Name, a.StateChangeSeq, a.CompletionSeq
	e.launchPending, e.interactiveReady, e.screenDetectionSkipped = a.LaunchPending, a.InteractiveReady, a.ScreenDetectionSkipped
	e.unlike = unlikePane(&a, &e.pane)
	e.hasAgent = true
}

// dropAgent forgets the entry's agent.
func (e *paneEntry) dropAgent() { *e = paneEntry{pane: e.pane, hasPane: e.hasPane} }

// agent returns the entry's agent as it was put (the zero agent if it has
// none).
func (e *paneEntry) agent() herdr.AgentInfo {
	if !e.hasAgent {
		return herdr.AgentInfo{}
	}
	a := herdr.AgentInfo{Name: e.name, StateChangeSeq: e.stateChangeSeq, CompletionSeq: e.completionSeq,
		LaunchPending: e.launchPending, InteractiveReady: e.interactiveReady, ScreenDetectionSkipped: e.screenDetectionSkipped}
	p, u := &e.pane, e.unlike
	as, ps := agentStrings(&a), paneStrings(p)
	if u == nil {
		for i := range as {
			*as[i] = *ps[i]
		}
		a.Revision, a.Focused, a.StateLabels, a.Tokens, a.AgentSession = p.Revision, p.Focused, p.StateLabels, p.Tokens, p.AgentSession
		return a
	}
	rest := u.strings
	for i := range as {
		if u.differ&(1<<i) == 0 {
			*as[i] = *ps[i]
		} else {
			*as[i], rest = rest[0], rest[1:]
		}
	}
	a.Revision, a.Focused, a.StateLabels, a.Tokens, a.AgentSession = u.revision, u.focused, u.stateLabels, u.tokens, u.session
	return a
}

// unlikePane returns what a holds unlike p, nil if nothing. The maps and
// session record a holds alike are p's: the values do not change, and
// nothing changes a cached map or record in place (the view replaces
// them, and its readers only read).
func unlikePane(a *herdr.AgentInfo, p *herdr.PaneInfo) *agentUnlike {
	var differ uint16
	var strs [len(sharedStrings{})]string
	n := 0
	as, ps := agentStrings(a), paneStrings(p)
	for i := range as {
		if *as[i] != *ps[i] {
			differ |= 1 << i
			strs[n] = intern(*as[i]) // only what is kept is interned
			n++
		}
	}
	sameLabels, sameTokens, sameRecord := sameMap(a.StateLabels, p.StateLabels), sameMap(a.Tokens, p.Tokens), sameSession(a.AgentSession, p.AgentSession)
	if differ == 0 && a.Revision == p.Revision && a.Focused == p.Focused && sameLabels && sameTokens && sameRecord {
		return nil
	}
	u := &agentUnlike{revision: a.Revision, focused: a.Focused, stateLabels: a.StateLabels, tokens: a.Tokens, session: a.AgentSession,
		strings: slices.Clone(strs[:n]), differ: differ}
	if sameLabels {
		u.stateLabels = p.StateLabels
	}
	if sameTokens {
		u.tokens = p.Tokens
	}
	if sameRecord {
		u.session = p.AgentSession
	} else {
		u.session = internSession(a.AgentSession)
	}
	return u
}

// sameMap and sameSession report whether a pane's map or session record
// gives back an agent's as it was: equal, and nil only where the other is
// (nil is not the same as empty).
func sameMap(a, b map[string]string) bool {
	return (a == nil) == (b == nil) && maps.Equal(a, b)
}

func sameSession(a, b *herdr.AgentSessionInfo) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func newView() *view {
	return &view{
		workspaces: map[string]herdr.WorkspaceInfo{},
		tabs:       sortedindex.New[tabEntry](tabIDOf, nil),
		panes:      sortedindex.New[paneEntry](paneIDOf, nil),
		byTerminal: sortedindex.New[paneEntry](terminalIDOf, nil),
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
	ws := make(map[string]herdr.WorkspaceInfo, len(l.workspaces))
	for _, w := range l.workspaces {
		ws[w.WorkspaceID] = w
	}
	tabs := make(map[string]*tabEntry, len(l.tabs))
	for _, t := range l.tabs {
		internTab(&t)
		tabs[t.TabID] = newTab(t)
	}
	panes := make(map[string]*paneEntry, len(l.panes))
	for _, p := range l.panes {
		v.internPaneLocked(&p)
		panes[p.PaneID] = &paneEntry{pane: p, hasPane: true}
	}
	for _, a := range l.agents {
		v.internAgentLocked(&a)
		e := panes[a.PaneID]
		if e == nil {
			e = newPaneEntry(a.PaneID)
			panes[a.PaneID] = e
		}
		e.putAgent(a)
	}
	for id, s := range v.touched {
		if s <= start {
			continue
		}
		keepLocal(ws, v.workspaces, id)
		if t := v.tabs.Get(id); t != nil && t.known {
			tabs[id] = newTab(t.info()) // its panes are indexed below
		} else {
			delete(tabs, id)
		}
		if e := v.panes.Get(id); e != nil { // the pane and its agent
			panes[id] = e
		} else {
			delete(panes, id)
		}
	}
	// No listing is under way now: the stamps go, with the room their map
	// grew to.
	v.touched, v.listing = nil, false
	restarted := v.refused
	v.refused = false
	var again []string
	for id, e := range panes {
		old := v.panes.Get(id)
		if !e.hasPane || old == nil || !old.hasPane || !old.hasAgent || old.pane.TerminalID == e.pane.TerminalID {
			continue
		}
		if restarted || relaunched(old.agent(), e.agent(), e.hasAgent) {
			again = append(again, id)
		}
	}
	slices.Sort(again)
	v.workspaces = ws
	v.panes = sortedindex.New(paneIDOf, slices.Collect(maps.Values(panes)))
	v.tabs = sortedindex.New(tabIDOf, slices.Collect(maps.Values(tabs)))
	terminals := make([]*paneEntry, 0, len(panes))
	for _, e := range panes {
		if e.hasPane {
			v.indexTabLocked(e)
			if e.pane.TerminalID != "" {
				terminals = append(terminals, e)
			}
		}
	}
	v.byTerminal = sortedindex.New(terminalIDOf, terminals)
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
	e := v.panes.Get(paneID)
	return e != nil && e.hasPane
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
	internTab(&t)
	e := v.tabs.Get(t.TabID)
	if e == nil {
		e = &tabEntry{id: t.TabID}
		v.tabs.Put(e)
	}
	e.setInfo(t)
}

func (v *view) setPane(p herdr.PaneInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(p.PaneID)
	v.internPaneLocked(&p)
	e := v.panes.Get(p.PaneID)
	if e == nil {
		e = newPaneEntry(p.PaneID)
		v.panes.Put(e)
	}
	v.putPaneLocked(e, p)
}

// putPaneLocked makes p the entry's pane, with its index entries; its
// agent stays as it was. v.mu must be held.
func (v *view) putPaneLocked(e *paneEntry, p herdr.PaneInfo) {
	a := e.agent() // as it was, against the pane it was kept with
	if e.hasPane {
		v.unindexLocked(e)
	}
	e.pane, e.hasPane = p, true
	v.indexLocked(e)
	if e.hasAgent {
		e.putAgent(a) // kept against the new pane
	}
}

// indexLocked adds e's pane's index entries; unindexLocked removes them.
// v.mu must be held.
func (v *view) indexLocked(e *paneEntry) {
	if e.pane.TerminalID != "" {
		v.byTerminal.Put(e)
	}
	v.indexTabLocked(e)
}

// indexTabLocked adds e's pane to its tab's panes. v.mu must be held.
func (v *view) indexTabLocked(e *paneEntry) {
	t := v.tabs.Get(e.pane.TabID)
	if t == nil {
		t = &tabEntry{id: e.pane.TabID}
		v.tabs.Put(t)
	} else {
		share(&e.pane.TabID, t.id) // kept once
	}
	t.panes = append(t.panes, e)
}

func (v *view) unindexLocked(e *paneEntry) {
	v.byTerminal.Remove(e) // if it is the one indexed: "" never is
	t := v.tabs.Get(e.pane.TabID)
	if t == nil {
		return
	}
	t.panes = slices.DeleteFunc(t.panes, func(x *paneEntry) bool { return x == e })
	if len(t.panes) == 0 && !t.known {
		v.tabs.Remove(t)
	}
}

func (v *view) setAgent(a herdr.AgentInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(a.PaneID)
	v.internAgentLocked(&a)
	e := v.panes.Get(a.PaneID)
	if e == nil {
		e = newPaneEntry(a.PaneID)
		v.panes.Put(e)
	}
	if e.hasPane {
		e.pane.AgentStatus = a.AgentStatus // no indexed field changed
	}
	e.putAgent(a)
}

// internPaneLocked points p's foreground directory at its directory where
// they are equal, as they mostly are, and what the panes of a fleet mostly
// hold alike — workspace id, status, agent, titles, the source, agent and
// kind of its session, its scroll position — at one copy of each value
// (intern; the scroll position the last pane's where equal); an agent
// holding the same has them from its pane (putAgent). p's session record is
// replaced, not changed: a writer may still read the one it reported.
// v.mu must be held.
func (v *view) internPaneLocked(p *herdr.PaneInfo) {
	share(&p.ForegroundCWD, p.CWD)
	p.WorkspaceID, p.AgentStatus, p.Agent = intern(p.WorkspaceID), intern(p.AgentStatus), intern(p.Agent)
	p.Title, p.TerminalTitle, p.TerminalTitleStripped = intern(p.Title), intern(p.TerminalTitle), intern(p.TerminalTitleStripped)
	p.DisplayAgent = intern(p.DisplayAgent)
	p.AgentSession = internSession(p.AgentSession)
	shareLast(&p.Scroll, &v.scroll)
}

// internAgentLocked shares an agent's completion_seq with the last
// agent's where equal. Its strings and session record are interned by
// unlikePane, and only those it keeps: the ones its pane holds alike are
// the pane's. v.mu must be held.
func (v *view) internAgentLocked(a *herdr.AgentInfo) {
	shareLast(&a.CompletionSeq, &v.completionSeq)
}

// shareLast points *p at *last where both hold the same value; a value
// of its own becomes the last one. Nothing changes a cached value in
// place: the view replaces them.
func shareLast[T comparable](p, last **T) {
	switch {
	case *p == nil:
	case *last != nil && **p == **last:
		*p = *last
	default:
		*last = *p
	}
}

// internTab interns a tab's workspace id and status.
func internTab(t *herdr.TabInfo) {
	t.WorkspaceID, t.AgentStatus = intern(t.WorkspaceID), intern(t.AgentStatus)
}

// internSession returns a copy of s with its source, agent and kind
// interned.
func internSession(s *herdr.AgentSessionInfo) *herdr.AgentSessionInfo {
	if s == nil {
		return nil
	}
	return &herdr.AgentSessionInfo{Source: intern(s.Source), Agent: intern(s.Agent), Kind: intern(s.Kind), Value: s.Value}
}

// intern returns s as one shared copy of its value ([unique]): the strings
// of a value interned between two garbage collections share one, and one
// interned later may get a new one, which the older ones' holders keep
// only until they are replaced.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
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
	s = intern(s)
	e := v.panes.Get(paneID)
	if e == nil {
		return
	}
	if e.hasPane && e.hasAgent && e.unlike == nil {
		// The agent is its pane's in every field they share, and stays
		// so: only the status (and the sequence below) changes.
		if e.interactiveReady && !e.launchPending && agentState(string(e.pane.AgentStatus)) != agentState(string(s)) {
			e.stateChangeSeq++
		}
		e.pane.AgentStatus = s
		return
	}
	a := e.agent() // as it was, against the pane's status it was kept with
	if e.hasPane {
		e.pane.AgentStatus = s // no indexed field changed
	}
	if !e.hasAgent {
		return
	}
	if a.InteractiveReady && !a.LaunchPending && agentState(string(a.AgentStatus)) != agentState(string(s)) {
		// A ready agent's status changed, so herdr's state_change_seq
		// moved at least once: the view keeps a lower bound of it
		// between listings. (A launching agent's status can change
		// with no state change, at a dialog.)
		a.StateChangeSeq++
	}
	a.AgentStatus = s
	e.putAgent(a)
}

func (v *view) removeAgent(paneID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(paneID)
	if e := v.panes.Get(paneID); e != nil {
		e.dropAgent()
		if !e.hasPane {
			v.panes.Remove(e)
		}
	}
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
	e := v.panes.Get(paneID)
	v.removePaneLocked(paneID)
	if e == nil || !e.hasPane {
		return
	}
	if t := v.tabs.Get(e.pane.TabID); t != nil && t.known && len(t.panes) == 0 {
		v.touchLocked(e.pane.TabID)
		v.tabs.Remove(t)
	}
}

// removePaneLocked drops a pane and its agent. v.mu must be held.
func (v *view) removePaneLocked(paneID string) {
	v.touchLocked(paneID)
	if e := v.panes.Get(paneID); e != nil {
		if e.hasPane {
			v.unindexLocked(e)
		}
		v.panes.Remove(e)
	}
}

// removeTab drops a tab and its panes (herdr sends no pane_closed for them).
func (v *view) removeTab(tabID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.removeTabLocked(tabID)
}

func (v *view) removeTabLocked(tabID string) {
	v.touchLocked(tabID)
	t := v.tabs.Get(tabID)
	if t == nil {
		return
	}
	v.tabs.Remove(t) // so that removing its panes leaves t.panes be
	for _, e := range t.panes {
		v.removePaneLocked(e.pane.PaneID)
	}
}

func (v *view) removeWorkspace(wsID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.touchLocked(wsID)
	delete(v.workspaces, wsID)
	for _, t := range slices.Clone(v.tabs.Entries()) { // removing changes the index
		if t.known && t.workspaceID == wsID {
			v.removeTabLocked(t.id)
		}
	}
	for _, e := range slices.Clone(v.panes.Entries()) { // removing changes the index
		if e.hasPane && e.pane.WorkspaceID == wsID {
			v.removePaneLocked(e.pane.PaneID)
		}
	}
}

// pane finds a pane by terminal id (stable across moves), else by pane id.
func (v *view) pane(terminalID, paneID string) (herdr.PaneInfo, herdr.AgentInfo, bool, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.panes.Get(paneID)
	if e == nil || !e.hasPane || (terminalID != "" && e.pane.TerminalID != terminalID) {
		e = v.byTerminal.Get(terminalID) // "" is never indexed
	}
	if e == nil {
		return herdr.PaneInfo{}, herdr.AgentInfo{}, false, false
	}
	return e.pane, e.agent(), true, e.hasAgent
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

// tab returns the tab with id tabID.
func (v *view) tab(tabID string) (herdr.TabInfo, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t := v.tabs.Get(tabID); t != nil && t.known {
		return t.info(), true
	}
	return herdr.TabInfo{}, false
}

// tabsWithLabelPrefix returns the tabs whose label starts with prefix.
func (v *view) tabsWithLabelPrefix(prefix string) []herdr.TabInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []herdr.TabInfo
	for _, t := range v.tabs.Entries() {
		if t.known && strings.HasPrefix(t.label, prefix) {
			out = append(out, t.info())
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
	if t := v.tabs.Get(tabID); t != nil {
		for _, e := range t.panes {
			out = append(out, e.pane)
		}
	}
	return out
}
