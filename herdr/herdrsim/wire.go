package herdrsim

import "encoding/json"

// The fake's own rendering of herdr's wire shapes (src/api/schema/*.rs). It
// deliberately shares nothing with the client package: omitted-when-absent
// fields use omitempty exactly where herdr skips them.

type workspaceInfo struct {
	WorkspaceID string `json:"workspace_id"`
	Number      int    `json:"number"`
	Label       string `json:"label"`
	Focused     bool   `json:"focused"`
	PaneCount   int    `json:"pane_count"`
	TabCount    int    `json:"tab_count"`
	ActiveTabID string `json:"active_tab_id"`
	AgentStatus string `json:"agent_status"`

	Worktree *worktreeInfo `json:"worktree,omitempty"`
}

type worktreeInfo struct {
	RepoKey          string `json:"repo_key"`
	RepoName         string `json:"repo_name"`
	RepoRoot         string `json:"repo_root"`
	CheckoutPath     string `json:"checkout_path"`
	IsLinkedWorktree bool   `json:"is_linked_worktree"`
}

type wireWorktree struct {
	Path             string  `json:"path"`
	Branch           *string `json:"branch"`
	Label            string  `json:"label"`
	IsBare           bool    `json:"is_bare"`
	IsDetached       bool    `json:"is_detached"`
	IsPrunable       bool    `json:"is_prunable"`
	IsLinkedWorktree bool    `json:"is_linked_worktree"`
	OpenWorkspaceID  *string `json:"open_workspace_id"`
}

type wireWorktreeSource struct {
	RepoKey            string  `json:"repo_key"`
	RepoName           string  `json:"repo_name"`
	RepoRoot           string  `json:"repo_root"`
	SourceCheckoutPath string  `json:"source_checkout_path"`
	SourceWorkspaceID  *string `json:"source_workspace_id"`
}

type tabInfo struct {
	TabID       string `json:"tab_id"`
	WorkspaceID string `json:"workspace_id"`
	Number      int    `json:"number"`
	Label       string `json:"label"`
	Focused     bool   `json:"focused"`
	PaneCount   int    `json:"pane_count"`
	AgentStatus string `json:"agent_status"`
}

type paneInfo struct {
	PaneID        string `json:"pane_id"`
	TerminalID    string `json:"terminal_id"`
	WorkspaceID   string `json:"workspace_id"`
	TabID         string `json:"tab_id"`
	Focused       bool   `json:"focused"`
	AgentStatus   string `json:"agent_status"`
	Revision      uint64 `json:"revision"`
	Cwd           string `json:"cwd,omitempty"`
	ForegroundCwd string `json:"foreground_cwd,omitempty"`
	Agent         string `json:"agent,omitempty"`

	AgentSession *agentSession `json:"agent_session,omitempty"`
	Scroll       *scrollInfo   `json:"scroll,omitempty"`
	RestoreError string        `json:"restore_error,omitempty"` // protocol 22
}

type agentSession struct {
	Source string `json:"source"`
	Agent  string `json:"agent"`
	Kind   string `json:"kind"` // "id" or "path"
	Value  string `json:"value"`
}

type scrollInfo struct {
	OffsetFromBottom    int `json:"offset_from_bottom"`
	MaxOffsetFromBottom int `json:"max_offset_from_bottom"`
	ViewportRows        int `json:"viewport_rows"`
}

type agentInfo struct {
	TerminalID       string `json:"terminal_id"`
	AgentStatus      string `json:"agent_status"`
	WorkspaceID      string `json:"workspace_id"`
	TabID            string `json:"tab_id"`
	PaneID           string `json:"pane_id"`
	Focused          bool   `json:"focused"`
	Revision         uint64 `json:"revision"`
	StateChangeSeq   uint64 `json:"state_change_seq"`
	Name             string `json:"name,omitempty"`
	Agent            string `json:"agent,omitempty"`
	LaunchPending    bool   `json:"launch_pending,omitempty"`
	InteractiveReady bool   `json:"interactive_ready,omitempty"`
	Cwd              string `json:"cwd,omitempty"`
	ForegroundCwd    string `json:"foreground_cwd,omitempty"`

	AgentSession  *agentSession `json:"agent_session,omitempty"`
	CompletionSeq *uint64       `json:"completion_seq,omitempty"` // protocol 22
}

type paneRead struct {
	PaneID      string `json:"pane_id"`
	WorkspaceID string `json:"workspace_id"`
	TabID       string `json:"tab_id"`
	Source      string `json:"source"`
	Format      string `json:"format"`
	Text        string `json:"text"`
	Revision    uint64 `json:"revision"`
	Truncated   bool   `json:"truncated"`
}

type layoutRect struct {
	X      int `json:"x"`
	Y      int `json:"y"`
	Width  int `json:"width"`
	Height int `json:"height"`
}

type layoutPane struct {
	PaneID  string     `json:"pane_id"`
	Focused bool       `json:"focused"`
	Rect    layoutRect `json:"rect"`
}

type layoutSplit struct {
	ID        string     `json:"id"`
	Direction string     `json:"direction"`
	Ratio     float64    `json:"ratio"`
	Rect      layoutRect `json:"rect"`
}

type layoutSnapshot struct {
	WorkspaceID   string        `json:"workspace_id"`
	TabID         string        `json:"tab_id"`
	Zoomed        bool          `json:"zoomed"`
	Area          layoutRect    `json:"area"`
	FocusedPaneID string        `json:"focused_pane_id"`
	Panes         []layoutPane  `json:"panes"`
	Splits        []layoutSplit `json:"splits"`
}

// statusEventData is pane_agent_status_changed's payload; the hub form adds
// "type", the per-pane subscription form has none.
type statusEventData struct {
	Type        string `json:"type,omitempty"`
	PaneID      string `json:"pane_id"`
	WorkspaceID string `json:"workspace_id"`
	AgentStatus string `json:"agent_status"`
	Agent       string `json:"agent,omitempty"`
}

type envelope struct {
	Event string `json:"event"`
	Data  any    `json:"data"`
}

type successLine struct {
	ID     string `json:"id"`
	Result any    `json:"result"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type errorLine struct {
	ID    string    `json:"id"`
	Error errorBody `json:"error"`
}

// typed is a result or event payload: a "type" tag plus fields.
type typed map[string]any

func result(tag string, kv ...any) typed {
	m := typed{"type": tag}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("herdrsim: marshal wire value: " + err.Error())
	}
	return b
}
