package herdrsim

import (
	"path/filepath"
	"strconv"
	"strings"
)

// The state model. Everything here is guarded by Server.mu; functions whose
// name ends in Locked expect it held.

type workspace struct {
	id       string
	label    string
	tabs     []*tab
	active   *tab
	nextTab  int // last tab number handed out; never reused
	nextPane int // last pane number handed out; never reused
	cwd      string
	primary  *workspace // set on a linked worktree workspace: the workspace of its main checkout
	tree     *checkout  // the git checkout a worktree workspace shows (worktrees.go)
}

type tab struct {
	ws        *workspace
	id        string
	num       int
	label     string
	panes     []*pane
	focused   *pane
	root      *layoutNode
	nextSplit int
}

type pane struct {
	tab        *tab
	id         string
	terminal   string
	cwd        string
	env        map[string]string
	screen     []string // committed lines
	input      string   // the line being typed, shown as the last screen line
	revision   uint64
	foreground string // foreground program; "" = the pane's shell
	agent      *agent
	lastStatus string   // last public status published for this pane
	prompts    []string // prompts the pane's agents received, in order

	shellStarting  bool          // Options.ShellStartDelay has not passed yet
	session        *agentSession // the agent_session herdr knows for the pane; kept across restarts
	restoreError   string        // why the pane's agent failed to come back after a restart (protocol 22)
	historyScrolls int           // reads that scrolled an idle alternate-screen agent's history (protocol 22)
}

// Agent internal states (herdr's Idle/Working/Blocked/Unknown); the public
// status adds done = idle but unseen.
const (
	stateIdle    = "idle"
	stateWorking = "working"
	stateBlocked = "blocked"
	stateUnknown = "unknown"
)

type agent struct {
	pane          *pane
	name          string
	kind          string
	argv          []string
	launchPending bool
	ready         bool // interactive_ready
	state         string
	seen          bool
	seq           uint64   // state_change_seq
	history       []string // every public status published while this agent was on the pane
	behavior      Behavior
	work          int // bumped per picked-up prompt; a stale finish timer is ignored
	released      bool
	finalStatus   string
	gone          bool // pane closed or exited, or agent replaced
	stopLaunch    []func()
	relaunch      bool   // restored by RestartRestored; its command is not typed yet
	dialog        string // text of the dialog a launching agent waits at; "" when none
	worked        bool   // worked since its last completion
	completions   uint64 // completion_seq
}

type layoutNode struct {
	pane   *pane // leaf when non-nil
	id     string
	dir    string
	ratio  float64
	a, b   *layoutNode
	parent *layoutNode
}

// The fake's terminal area for every tab: herdr's headless screen is 40 rows,
// which is every pane's scroll.viewport_rows.
const areaWidth, areaHeight = 200, 40

func (s *Server) findWorkspaceLocked(id string) *workspace {
	for _, ws := range s.workspaces {
		if ws.id == id {
			return ws
		}
	}
	return nil
}

func (s *Server) findTabLocked(id string) *tab {
	for _, ws := range s.workspaces {
		for _, t := range ws.tabs {
			if t.id == id {
				return t
			}
		}
	}
	return nil
}

func (s *Server) findPaneLocked(id string) *pane {
	for _, ws := range s.workspaces {
		for _, t := range ws.tabs {
			for _, p := range t.panes {
				if p.id == id {
					return p
				}
			}
		}
	}
	return nil
}

func (s *Server) allPanesLocked() []*pane {
	var out []*pane
	for _, ws := range s.workspaces {
		for _, t := range ws.tabs {
			out = append(out, t.panes...)
		}
	}
	return out
}

// isForegroundLocked reports whether p is in the active tab of the active
// workspace: there a finished agent stays "idle" rather than "done" (with no
// attached client herdr's outer focus is None, which counts as focused).
func (s *Server) isForegroundLocked(p *pane) bool {
	return p.tab.ws == s.activeWS && p.tab.ws.active == p.tab
}

func (s *Server) newWorkspaceLocked(label, cwd string) *workspace {
	s.nextWorkspace++
	ws := &workspace{id: workspaceID(s.nextWorkspace), label: label, cwd: cwd}
	if ws.label == "" {
		ws.label = defaultLabel(cwd, ws.id)
	}
	s.workspaces = append(s.workspaces, ws)
	return ws
}

func defaultLabel(cwd, fallback string) string {
	if cwd != "" {
		if b := filepath.Base(cwd); b != "/" && b != "." {
			return b
		}
	}
	return fallback
}

func (s *Server) newTabLocked(ws *workspace, label string) *tab {
	ws.nextTab++
	t := &tab{ws: ws, id: tabID(ws.id, ws.nextTab), num: ws.nextTab, label: label}
	if t.label == "" {
		t.label = strconv.Itoa(t.num)
	}
	ws.tabs = append(ws.tabs, t)
	if ws.active == nil {
		ws.active = t
	}
	return t
}

// newPaneLocked creates a pane in t running a shell in cwd with the caller's
// env overlaid by herdr's injected variables.
func (s *Server) newPaneLocked(t *tab, cwd string, env map[string]string) *pane {
	ws := t.ws
	ws.nextPane++
	p := &pane{
		tab:        t,
		id:         paneID(ws.id, ws.nextPane),
		terminal:   s.newTerminalIDLocked(),
		cwd:        cwd,
		lastStatus: stateUnknown,
	}
	p.env = make(map[string]string, len(env)+8)
	for k, v := range env {
		p.env[k] = v
	}
	delete(p.env, "CODEX_THREAD_ID")
	for k, v := range map[string]string{
		"HERDR_ENV":          "1",
		"HERDR_SOCKET_PATH":  s.path,
		"HERDR_BIN_PATH":     s.opts.BinPath,
		"HERDR_WORKSPACE_ID": ws.id,
		"HERDR_TAB_ID":       t.id,
		"HERDR_PANE_ID":      p.id,
		"TERM":               "xterm-256color",
		"COLORTERM":          "truecolor",
	} {
		p.env[k] = v
	}
	t.panes = append(t.panes, p)
	if t.focused == nil {
		t.focused = p
	}
	s.startShellLocked(p)
	return p
}

// startShellLocked starts p's shell, which takes Options.ShellStartDelay.
func (s *Server) startShellLocked(p *pane) {
	if d := s.opts.ShellStartDelay; d > 0 {
		p.shellStarting = true
		s.afterLocked(d, func() { p.shellStarting = false })
	}
}

// splitLocked puts p beside target in target's tab.
func (s *Server) splitLayoutLocked(target, p *pane, dir string, ratio float64) {
	t := target.tab
	leaf := findLeaf(t.root, target)
	t.nextSplit++
	n := &layoutNode{id: t.id + ":s" + strconv.Itoa(t.nextSplit), dir: dir, ratio: ratio, parent: leaf.parent}
	n.a = &layoutNode{pane: target, parent: n}
	n.b = &layoutNode{pane: p, parent: n}
	replaceNode(t, leaf, n)
}

func findLeaf(n *layoutNode, p *pane) *layoutNode {
	if n == nil {
		return nil
	}
	if n.pane != nil {
		if n.pane == p {
			return n
		}
		return nil
	}
	if l := findLeaf(n.a, p); l != nil {
		return l
	}
	return findLeaf(n.b, p)
}

func replaceNode(t *tab, old, n *layoutNode) {
	switch parent := old.parent; {
	case parent == nil:
		t.root = n
	case parent.a == old:
		parent.a = n
	default:
		parent.b = n
	}
	n.parent = old.parent
}

// removePaneLocked takes p out of its tab (and the tab or workspace out of
// the model when it was the last); it reports what vanished. It emits no
// events: callers do, because herdr's rules differ per path.
func (s *Server) removePaneLocked(p *pane) (tabGone, wsGone bool) {
	t := p.tab
	s.dropAgentLocked(p)
	t.panes = remove(t.panes, p)
	if leaf := findLeaf(t.root, p); leaf != nil {
		if parent := leaf.parent; parent == nil {
			t.root = nil
		} else {
			sibling := parent.a
			if sibling == leaf {
				sibling = parent.b
			}
			replaceNode(t, parent, sibling)
		}
	}
	if t.focused == p {
		t.focused = nil
		if len(t.panes) > 0 {
			t.focused = t.panes[len(t.panes)-1]
		}
	}
	if len(t.panes) > 0 {
		return false, false
	}
	return true, s.removeTabLocked(t)
}

// removeTabLocked drops t and its panes; it reports whether the workspace
// went with it.
func (s *Server) removeTabLocked(t *tab) bool {
	for _, p := range t.panes {
		s.dropAgentLocked(p)
	}
	ws := t.ws
	i := index(ws.tabs, t)
	ws.tabs = remove(ws.tabs, t)
	if len(ws.tabs) == 0 {
		s.removeWorkspaceLocked(ws)
		return true
	}
	if ws.active == t {
		ws.active = ws.tabs[min(i, len(ws.tabs)-1)]
	}
	return false
}

func (s *Server) removeWorkspaceLocked(ws *workspace) {
	for _, t := range ws.tabs {
		for _, p := range t.panes {
			s.dropAgentLocked(p)
		}
	}
	i := index(s.workspaces, ws)
	s.workspaces = remove(s.workspaces, ws)
	if s.activeWS == ws {
		s.activeWS = nil
		if len(s.workspaces) > 0 {
			s.activeWS = s.workspaces[min(i, len(s.workspaces)-1)]
		}
	}
}

// dropAgentLocked ends the agent on p because its pane is going away.
func (s *Server) dropAgentLocked(p *pane) {
	if p.agent != nil {
		p.agent.gone = true
		p.agent.endLaunchLocked()
		p.agent = nil
	}
}

// focusTabLocked makes t the active tab of the active workspace; agents there
// become seen (done → idle).
func (s *Server) focusTabLocked(t *tab) {
	s.activeWS = t.ws
	t.ws.active = t
	s.markSeenLocked(t)
}

// settleFocusLocked marks the agents of the now active tab seen after a
// close moved focus; callers run it after emitting the close events.
func (s *Server) settleFocusLocked() {
	if s.activeWS != nil {
		s.markSeenLocked(s.activeWS.active)
	}
}

func (s *Server) markSeenLocked(t *tab) {
	if t == nil || t.ws != s.activeWS || t.ws.active != t {
		return
	}
	for _, p := range t.panes {
		if a := p.agent; a != nil && !a.seen {
			a.seen = true
			s.publishStatusLocked(p)
		}
	}
}

// Public status of a pane (src/app/api_helpers.rs pane_agent_status).
func (p *pane) status() string {
	a := p.agent
	if a != nil && a.dialog != "" {
		return stateBlocked // at a dialog while launching: blocked, not yet interactive-ready
	}
	if a == nil || !a.ready {
		return stateUnknown
	}
	if a.state == stateIdle && !a.seen {
		return "done"
	}
	return a.state
}

// aggregate is herdr's tab/workspace status: blocked > done > working > idle > unknown.
func aggregate(panes []*pane) string {
	rank := map[string]int{"unknown": 0, "idle": 1, "working": 2, "done": 3, "blocked": 4}
	best := stateUnknown
	for _, p := range panes {
		if st := p.status(); rank[st] > rank[best] {
			best = st
		}
	}
	return best
}

func (s *Server) workspaceInfoLocked(ws *workspace) workspaceInfo {
	var panes []*pane
	for _, t := range ws.tabs {
		panes = append(panes, t.panes...)
	}
	info := workspaceInfo{
		WorkspaceID: ws.id,
		Number:      index(s.workspaces, ws) + 1,
		Label:       ws.label,
		Focused:     ws == s.activeWS,
		PaneCount:   len(panes),
		TabCount:    len(ws.tabs),
		AgentStatus: aggregate(panes),
	}
	if ws.active != nil {
		info.ActiveTabID = ws.active.id
	}
	if t := s.checkoutLocked(ws); t != nil {
		info.Worktree = &worktreeInfo{RepoKey: t.repo, RepoName: filepath.Base(t.repo), RepoRoot: t.repo,
			CheckoutPath: t.path, IsLinkedWorktree: t.linked}
	}
	return info
}

// linkedWorkspacesLocked lists the linked worktree workspaces of ws.
func (s *Server) linkedWorkspacesLocked(ws *workspace) []*workspace {
	var out []*workspace
	for _, w := range s.workspaces {
		if w.primary == ws {
			out = append(out, w)
		}
	}
	return out
}

func (s *Server) tabInfoLocked(t *tab) tabInfo {
	return tabInfo{
		TabID:       t.id,
		WorkspaceID: t.ws.id,
		Number:      t.num,
		Label:       t.label,
		Focused:     t.ws == s.activeWS && t.ws.active == t,
		PaneCount:   len(t.panes),
		AgentStatus: aggregate(t.panes),
	}
}

func (s *Server) paneInfoLocked(p *pane) paneInfo {
	info := paneInfo{
		PaneID:        p.id,
		TerminalID:    p.terminal,
		WorkspaceID:   p.tab.ws.id,
		TabID:         p.tab.id,
		Focused:       s.isForegroundLocked(p) && p.tab.focused == p,
		AgentStatus:   p.status(),
		Revision:      p.revision,
		Cwd:           p.cwd,
		ForegroundCwd: p.cwd,
	}
	if a := p.agent; a != nil && (a.ready || a.dialog != "") {
		info.Agent = a.kind
	}
	info.AgentSession = p.session
	info.Scroll = &scrollInfo{ViewportRows: areaHeight, MaxOffsetFromBottom: max(0, p.lineCount()-areaHeight)}
	if s.p22() {
		info.RestoreError = p.restoreError
	}
	return info
}

func (s *Server) agentInfoLocked(a *agent) agentInfo {
	p := a.pane
	info := agentInfo{
		TerminalID:       p.terminal,
		AgentStatus:      p.status(),
		WorkspaceID:      p.tab.ws.id,
		TabID:            p.tab.id,
		PaneID:           p.id,
		Focused:          s.isForegroundLocked(p) && p.tab.focused == p,
		Revision:         p.revision,
		StateChangeSeq:   a.seq,
		Name:             a.name,
		Agent:            a.kind,
		LaunchPending:    a.launchPending,
		InteractiveReady: a.ready,
		Cwd:              p.cwd,
		ForegroundCwd:    p.cwd,
		AgentSession:     p.session,
	}
	if s.p22() {
		seq := a.completions
		info.CompletionSeq = &seq
	}
	return info
}

func (s *Server) layoutLocked(t *tab) layoutSnapshot {
	snap := layoutSnapshot{
		WorkspaceID: t.ws.id,
		TabID:       t.id,
		Area:        layoutRect{Width: areaWidth, Height: areaHeight},
		Panes:       []layoutPane{},
		Splits:      []layoutSplit{},
	}
	if t.focused != nil {
		snap.FocusedPaneID = t.focused.id
	}
	var walk func(n *layoutNode, r layoutRect)
	walk = func(n *layoutNode, r layoutRect) {
		if n == nil {
			return
		}
		if n.pane != nil {
			snap.Panes = append(snap.Panes, layoutPane{PaneID: n.pane.id, Focused: n.pane == t.focused, Rect: r})
			return
		}
		snap.Splits = append(snap.Splits, layoutSplit{ID: n.id, Direction: n.dir, Ratio: n.ratio, Rect: r})
		ra, rb := r, r
		if n.dir == "right" {
			ra.Width = int(float64(r.Width) * n.ratio)
			rb.X, rb.Width = r.X+ra.Width, r.Width-ra.Width
		} else {
			ra.Height = int(float64(r.Height) * n.ratio)
			rb.Y, rb.Height = r.Y+ra.Height, r.Height-ra.Height
		}
		walk(n.a, ra)
		walk(n.b, rb)
	}
	walk(t.root, snap.Area)
	return snap
}

// screenText is what the pane shows: committed lines plus the line being
// typed.
func (p *pane) lines() []string {
	out := append([]string(nil), p.screen...)
	if p.input != "" {
		out = append(out, strings.Split(p.input, "\n")...)
	}
	return out
}

// lineCount is len(p.lines()) without copying the screen: pane info is
// built for every status change, listing and snapshot.
func (p *pane) lineCount() int {
	n := len(p.screen)
	if p.input != "" {
		n += strings.Count(p.input, "\n") + 1
	}
	return n
}

// newTerminalIDLocked mints a terminal id, as herdr does for every new
// terminal (a new pane, or every pane after a restart or handoff).
func (s *Server) newTerminalIDLocked() string {
	s.termCounter++
	return terminalID(s.clock.Now().UnixMicro(), s.termCounter)
}

func (p *pane) writeLocked(text string) {
	if text == "" {
		return
	}
	p.screen = append(p.screen, strings.Split(strings.TrimSuffix(text, "\n"), "\n")...)
	p.revision++
}

func index[T comparable](xs []T, x T) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func remove[T comparable](xs []T, x T) []T {
	if i := index(xs, x); i >= 0 {
		return append(xs[:i:i], xs[i+1:]...)
	}
	return xs
}
