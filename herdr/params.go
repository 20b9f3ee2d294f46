package herdr

// Request parameters of the methods that take more than one or two strings.
// Zero-valued optional fields are omitted from the request, which is what herdr
// does with an absent field (its defaults are noted per field).

// WorkspaceCreateParams are the parameters of workspace.create.
type WorkspaceCreateParams struct {
	CWD   string            `json:"cwd,omitempty"`
	Focus bool              `json:"focus,omitempty"` // default false
	Label string            `json:"label,omitempty"`
	Env   map[string]string `json:"env,omitempty"` // applied before herdr's HERDR_* values, which win
}

// TabCreateParams are the parameters of tab.create.
type TabCreateParams struct {
	WorkspaceID string            `json:"workspace_id,omitempty"` // default: the active workspace
	CWD         string            `json:"cwd,omitempty"`
	Focus       bool              `json:"focus,omitempty"`
	Label       string            `json:"label,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// PaneSplitParams are the parameters of pane.split. With neither TargetPaneID
// nor WorkspaceID herdr splits the focused pane of the active workspace.
type PaneSplitParams struct {
	TargetPaneID string            `json:"target_pane_id,omitempty"`
	WorkspaceID  string            `json:"workspace_id,omitempty"`
	Direction    SplitDirection    `json:"direction"`
	Ratio        *float32          `json:"ratio,omitempty"`
	CWD          string            `json:"cwd,omitempty"`
	Focus        bool              `json:"focus,omitempty"`
	RightClick   string            `json:"right_click,omitempty"` // "herdr" (default) or "pane"
	Env          map[string]string `json:"env,omitempty"`
}

// PaneReadParams are the parameters of pane.read. Lines 0 means herdr's
// default (80 for recent sources, everything for visible/detection; capped at
// 1000). herdr ignores StripANSI for reads: Format decides.
type PaneReadParams struct {
	PaneID    string     `json:"pane_id"`
	Source    ReadSource `json:"source"`
	Lines     int        `json:"lines,omitempty"`
	Format    ReadFormat `json:"format,omitempty"` // default text
	StripANSI *bool      `json:"strip_ansi,omitempty"`
}

// AgentStartParams are the parameters of agent.start. Name must match
// ^[a-z][a-z0-9_-]{0,31}$; PaneID must be a canonical current pane id whose
// pane runs only its shell. TimeoutMS 0 means herdr's default of 30000; herdr
// accepts 3000 < TimeoutMS ≤ 300000.
type AgentStartParams struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	PaneID    string   `json:"pane_id"`
	Args      []string `json:"args,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
}

// AgentPromptParams are the parameters of agent.prompt. Target is a pane id
// hosting an agent or a unique live agent name. Without Wait herdr replies as
// soon as the text is typed (Enter follows 300 ms later).
type AgentPromptParams struct {
	Target string           `json:"target"`
	Text   string           `json:"text"`
	Wait   *AgentPromptWait `json:"wait,omitempty"`
}

// AgentPromptWait makes agent.prompt wait for the agent to start working and
// then reach one of Until (default idle, done, blocked).
type AgentPromptWait struct {
	Until     []AgentStatus `json:"until,omitempty"`
	TimeoutMS int64         `json:"timeout_ms,omitempty"` // 0: no timeout
}

// AgentWaitParams are the parameters of agent.wait. It returns at once if the
// agent already has one of Until. Wait on idle and done together: an agent in
// a background tab finishes as done, one in the active tab as idle.
type AgentWaitParams struct {
	Target    string        `json:"target"`
	Until     []AgentStatus `json:"until,omitempty"`
	TimeoutMS int64         `json:"timeout_ms,omitempty"` // 0: no timeout
}

// AgentReadParams are the parameters of agent.read; see [PaneReadParams].
type AgentReadParams struct {
	Target    string     `json:"target"`
	Source    ReadSource `json:"source"`
	Lines     int        `json:"lines,omitempty"`
	Format    ReadFormat `json:"format,omitempty"`
	StripANSI *bool      `json:"strip_ansi,omitempty"`
}

// EventsWaitParams are the parameters of events.wait.
type EventsWaitParams struct {
	MatchEvent EventMatch `json:"match_event"`
	TimeoutMS  int64      `json:"timeout_ms,omitempty"` // 0: no timeout
}
