package herdr

import (
	"encoding/json"
	"fmt"
)

// This file holds herdr's info objects and enums (protocols 20 and 22), field
// for field as herdr serialises them (src/api/schema/*.rs). Optional fields that herdr omits
// when absent carry omitempty, so a value marshals the way herdr would send it;
// a missing bool decodes as false and a missing or null string as "".

// The herdr socket protocols this package speaks: protocol 20 (herdr 0.8.x)
// through protocol 22 (herdr 0.9.x). [Client.Ping] refuses anything older
// than MinProtocol and drives anything newer than LatestProtocol with a
// warning ([Pong.Warning]).
const (
	MinProtocol    = 20
	LatestProtocol = 22
)

// AgentStatus is herdr's public agent status of a pane, agent, tab or workspace.
type AgentStatus string

// herdr's agent statuses. StatusDone is an idle agent whose completion nobody has
// looked at yet; StatusUnknown is a plain shell or an undetected program, not a
// finished agent.
const (
	StatusIdle    AgentStatus = "idle"
	StatusWorking AgentStatus = "working"
	StatusBlocked AgentStatus = "blocked"
	StatusDone    AgentStatus = "done"
	StatusUnknown AgentStatus = "unknown"
)

// ReadSource selects which part of a pane's terminal a read returns.
type ReadSource string

// Read sources.
const (
	SourceVisible         ReadSource = "visible"
	SourceRecent          ReadSource = "recent"
	SourceRecentUnwrapped ReadSource = "recent_unwrapped"
	SourceDetection       ReadSource = "detection"
)

// ReadFormat selects plain text or text with ANSI escapes.
type ReadFormat string

// Read formats.
const (
	FormatText ReadFormat = "text"
	FormatANSI ReadFormat = "ansi"
)

// SplitDirection is where pane.split places the new pane.
type SplitDirection string

// Split directions.
const (
	SplitRight SplitDirection = "right"
	SplitDown  SplitDirection = "down"
)

// PaneInfo describes one pane. TerminalID is the stable key: a pane moved to
// another workspace gets a new PaneID but keeps its TerminalID.
type PaneInfo struct {
	PaneID      string      `json:"pane_id"`
	TerminalID  string      `json:"terminal_id"`
	WorkspaceID string      `json:"workspace_id"`
	TabID       string      `json:"tab_id"`
	Focused     bool        `json:"focused"`
	AgentStatus AgentStatus `json:"agent_status"`
	Revision    uint64      `json:"revision"`

	CWD                   string            `json:"cwd,omitempty"`
	ForegroundCWD         string            `json:"foreground_cwd,omitempty"`
	Label                 string            `json:"label,omitempty"`
	Agent                 string            `json:"agent,omitempty"`
	Title                 string            `json:"title,omitempty"`
	TerminalTitle         string            `json:"terminal_title,omitempty"`
	TerminalTitleStripped string            `json:"terminal_title_stripped,omitempty"`
	DisplayAgent          string            `json:"display_agent,omitempty"`
	StateLabels           map[string]string `json:"state_labels,omitempty"`
	Tokens                map[string]string `json:"tokens,omitempty"`
	AgentSession          *AgentSessionInfo `json:"agent_session,omitempty"`
	Scroll                *PaneScrollInfo   `json:"scroll,omitempty"`
	// RestoreError (protocol 22) says why a saved pane or agent failed to
	// come back after a herdr restart.
	RestoreError string `json:"restore_error,omitempty"`
}

// AgentInfo describes an agent: a pane whose foreground program herdr
// recognises or that was started with agent.start. A missing LaunchPending or
// InteractiveReady means false.
type AgentInfo struct {
	TerminalID     string      `json:"terminal_id"`
	AgentStatus    AgentStatus `json:"agent_status"`
	WorkspaceID    string      `json:"workspace_id"`
	TabID          string      `json:"tab_id"`
	PaneID         string      `json:"pane_id"`
	Focused        bool        `json:"focused"`
	Revision       uint64      `json:"revision"`
	StateChangeSeq uint64      `json:"state_change_seq"`

	Name                   string            `json:"name,omitempty"`
	Agent                  string            `json:"agent,omitempty"`
	Title                  string            `json:"title,omitempty"`
	TerminalTitle          string            `json:"terminal_title,omitempty"`
	TerminalTitleStripped  string            `json:"terminal_title_stripped,omitempty"`
	DisplayAgent           string            `json:"display_agent,omitempty"`
	ScreenDetectionSkipped bool              `json:"screen_detection_skipped,omitempty"`
	StateLabels            map[string]string `json:"state_labels,omitempty"`
	Tokens                 map[string]string `json:"tokens,omitempty"`
	AgentSession           *AgentSessionInfo `json:"agent_session,omitempty"`
	LaunchPending          bool              `json:"launch_pending,omitempty"`
	InteractiveReady       bool              `json:"interactive_ready,omitempty"`
	CWD                    string            `json:"cwd,omitempty"`
	ForegroundCWD          string            `json:"foreground_cwd,omitempty"`
	// CompletionSeq (protocol 22; nil from protocol 20) advances when an
	// idle transition completed work, whether or not anyone looked at the
	// pane: the evidence that a turn finished rather than never started.
	CompletionSeq *uint64 `json:"completion_seq,omitempty"`
}

// WorkspaceInfo describes a workspace. Number is its 1-based position, which
// changes when workspaces are reordered; WorkspaceID does not.
type WorkspaceInfo struct {
	WorkspaceID string      `json:"workspace_id"`
	Number      int         `json:"number"`
	Label       string      `json:"label"`
	Focused     bool        `json:"focused"`
	PaneCount   int         `json:"pane_count"`
	TabCount    int         `json:"tab_count"`
	ActiveTabID string      `json:"active_tab_id"`
	AgentStatus AgentStatus `json:"agent_status"`

	Tokens   map[string]string      `json:"tokens,omitempty"`
	Worktree *WorkspaceWorktreeInfo `json:"worktree,omitempty"`
}

// TabInfo describes a tab. Number is the tab's public number, not its position.
// AgentStatus aggregates the tab's panes: blocked > done > working > idle > unknown.
type TabInfo struct {
	TabID       string      `json:"tab_id"`
	WorkspaceID string      `json:"workspace_id"`
	Number      int         `json:"number"`
	Label       string      `json:"label"`
	Focused     bool        `json:"focused"`
	PaneCount   int         `json:"pane_count"`
	AgentStatus AgentStatus `json:"agent_status"`
}

// PaneReadResult is the text of a pane.read or agent.read. Revision is always 0
// from those two methods.
type PaneReadResult struct {
	PaneID      string     `json:"pane_id"`
	WorkspaceID string     `json:"workspace_id"`
	TabID       string     `json:"tab_id"`
	Source      ReadSource `json:"source"`
	Format      ReadFormat `json:"format"`
	Text        string     `json:"text"`
	Revision    uint64     `json:"revision"`
	Truncated   bool       `json:"truncated"`
}

// AgentSessionInfo points at an agent's own session record (a session id or a
// transcript path) as reported by a herdr integration.
type AgentSessionInfo struct {
	Source string `json:"source"`
	Agent  string `json:"agent"`
	Kind   string `json:"kind"` // "id" or "path"
	Value  string `json:"value"`
}

// PaneScrollInfo is a pane's scrollback position.
type PaneScrollInfo struct {
	OffsetFromBottom    uint64 `json:"offset_from_bottom"`
	MaxOffsetFromBottom uint64 `json:"max_offset_from_bottom"`
	ViewportRows        uint64 `json:"viewport_rows"`
}

// WorkspaceWorktreeInfo is the git worktree a workspace was opened for.
type WorkspaceWorktreeInfo struct {
	RepoKey          string `json:"repo_key"`
	RepoName         string `json:"repo_name"`
	RepoRoot         string `json:"repo_root"`
	CheckoutPath     string `json:"checkout_path"`
	IsLinkedWorktree bool   `json:"is_linked_worktree"`
}

// Pong is herdr's answer to ping.
type Pong struct {
	Version      string        `json:"version"`
	Protocol     int           `json:"protocol"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// Newer reports whether herdr speaks a protocol newer than [LatestProtocol]:
// fleetd drives it, but has not been checked against it.
func (p *Pong) Newer() bool { return p.Protocol > LatestProtocol }

// Warning is the message to log when [Pong.Newer] is true, naming herdr's
// version and protocol; "" otherwise.
func (p *Pong) Warning() string {
	if !p.Newer() {
		return ""
	}
	return fmt.Sprintf("herdr %s speaks protocol %d, newer than the %d fleetd was built for; driving it anyway (unknown fields are ignored, unsupported methods fail normally)",
		p.Version, p.Protocol, LatestProtocol)
}

// Capabilities are the optional server features announced in a Pong.
type Capabilities struct {
	LiveHandoff          bool `json:"live_handoff"`
	DetachedServerDaemon bool `json:"detached_server_daemon,omitempty"`
	// The rest are protocol 22's; absent (false, nil) from protocol 20.
	EndpointProtocolGeneration *uint32 `json:"endpoint_protocol_generation,omitempty"`
	SurfaceInterest            bool    `json:"surface_interest,omitempty"`
	HealthCheck                bool    `json:"health_check,omitempty"`
	SSHAgentRegistration       bool    `json:"ssh_agent_registration,omitempty"`
}

// WorkspaceCreated is the result of workspace.create.
type WorkspaceCreated struct {
	Workspace WorkspaceInfo `json:"workspace"`
	Tab       TabInfo       `json:"tab"`
	RootPane  PaneInfo      `json:"root_pane"`
}

// TabCreated is the result of tab.create.
type TabCreated struct {
	Tab      TabInfo  `json:"tab"`
	RootPane PaneInfo `json:"root_pane"`
}

// AgentStarted is the result of agent.start: the agent (normally still
// LaunchPending) and the argv herdr typed into the pane.
type AgentStarted struct {
	Agent AgentInfo `json:"agent"`
	Argv  []string  `json:"argv"`
}

// SessionSnapshot is the result of session.snapshot: every workspace, tab,
// pane and agent, the layouts (kept raw) and what is focused.
type SessionSnapshot struct {
	Version    string            `json:"version"`
	Protocol   int               `json:"protocol"`
	Workspaces []WorkspaceInfo   `json:"workspaces"`
	Tabs       []TabInfo         `json:"tabs"`
	Panes      []PaneInfo        `json:"panes"`
	Layouts    []json.RawMessage `json:"layouts"`
	Agents     []AgentInfo       `json:"agents"`

	FocusedWorkspaceID string `json:"focused_workspace_id,omitempty"`
	FocusedTabID       string `json:"focused_tab_id,omitempty"`
	FocusedPaneID      string `json:"focused_pane_id,omitempty"`
}
