package herdr

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EventKind names a herdr event in snake_case, the form herdr uses for
// lifecycle events ("pane_created"). Per-pane subscription events arrive
// dot-named ("pane.agent_status_changed"); [Event.Kind] normalises them to the
// same snake_case form, so one constant covers both envelope styles.
type EventKind string

// Event kinds fleetd handles. herdr has more (see [Event.Known]); those are
// still delivered, with only Kind, Name and Data set.
const (
	EventWorkspaceCreated       EventKind = "workspace_created"
	EventWorkspaceUpdated       EventKind = "workspace_updated"
	EventWorkspaceRenamed       EventKind = "workspace_renamed"
	EventWorkspaceClosed        EventKind = "workspace_closed"
	EventWorkspaceFocused       EventKind = "workspace_focused"
	EventTabCreated             EventKind = "tab_created"
	EventTabClosed              EventKind = "tab_closed"
	EventTabRenamed             EventKind = "tab_renamed"
	EventTabFocused             EventKind = "tab_focused"
	EventPaneCreated            EventKind = "pane_created"
	EventPaneUpdated            EventKind = "pane_updated"
	EventPaneClosed             EventKind = "pane_closed"
	EventPaneFocused            EventKind = "pane_focused"
	EventPaneMoved              EventKind = "pane_moved"
	EventPaneExited             EventKind = "pane_exited"
	EventPaneOutputChanged      EventKind = "pane_output_changed"
	EventPaneAgentDetected      EventKind = "pane_agent_detected"
	EventPaneAgentStatusChanged EventKind = "pane_agent_status_changed"
	EventPaneOutputMatched      EventKind = "pane_output_matched"
	EventPaneScrollChanged      EventKind = "pane_scroll_changed"
	EventLayoutUpdated          EventKind = "layout_updated"
	// Protocol 22's worktree events (worktree.create, open, remove).
	EventWorktreeCreated EventKind = "worktree_created"
	EventWorktreeOpened  EventKind = "worktree_opened"
	EventWorktreeRemoved EventKind = "worktree_removed"
)

var knownKinds = map[EventKind]bool{
	EventWorkspaceCreated: true, EventWorkspaceUpdated: true, EventWorkspaceRenamed: true,
	EventWorkspaceClosed: true, EventWorkspaceFocused: true,
	EventTabCreated: true, EventTabClosed: true, EventTabRenamed: true, EventTabFocused: true,
	EventPaneCreated: true, EventPaneUpdated: true, EventPaneClosed: true, EventPaneFocused: true,
	EventPaneMoved: true, EventPaneExited: true, EventPaneOutputChanged: true,
	EventPaneAgentDetected: true, EventPaneAgentStatusChanged: true,
	EventPaneOutputMatched: true, EventPaneScrollChanged: true, EventLayoutUpdated: true,
	EventWorktreeCreated: true, EventWorktreeOpened: true, EventWorktreeRemoved: true,
}

// Event is one decoded herdr event, from an events.subscribe stream or an
// events.wait result. herdr's event payloads share field names across kinds,
// so Event is their union: the fields a kind carries are set, the rest are
// zero. Data always holds the payload exactly as received; the json tags
// describe that payload, not the envelope.
type Event struct {
	// Kind is the snake_case kind; Name is the envelope's "event" string as
	// sent ("pane_created" or "pane.agent_status_changed").
	Kind EventKind `json:"-"`
	Name string    `json:"-"`

	PaneID      string         `json:"pane_id"`
	WorkspaceID string         `json:"workspace_id"`
	TabID       string         `json:"tab_id"`
	Pane        *PaneInfo      `json:"pane"`      // pane_created, pane_updated, pane_moved
	Tab         *TabInfo       `json:"tab"`       // tab_created
	Workspace   *WorkspaceInfo `json:"workspace"` // workspace_created/updated, workspace_closed (sometimes)
	Label       string         `json:"label"`     // workspace_renamed, tab_renamed
	Revision    uint64         `json:"revision"`  // pane_output_changed

	// Agent fields: pane_agent_status_changed and pane_agent_detected.
	AgentStatus  AgentStatus       `json:"agent_status"`
	Agent        string            `json:"agent"`
	Title        string            `json:"title"`
	DisplayAgent string            `json:"display_agent"`
	StateLabels  map[string]string `json:"state_labels"`
	Released     bool              `json:"released"`     // pane_agent_detected: the agent let go of the pane
	FinalStatus  AgentStatus       `json:"final_status"` // pane_agent_detected with Released

	// pane_moved.
	PreviousPaneID      string `json:"previous_pane_id"`
	PreviousWorkspaceID string `json:"previous_workspace_id"`
	PreviousTabID       string `json:"previous_tab_id"`

	// worktree_created, worktree_opened, worktree_removed (protocol 22):
	// the worktree; whether the workspace showed it already (opened); whether
	// its removal was forced (removed, which names the workspace by
	// WorkspaceID and carries Workspace only while it still exists).
	Worktree    *WorktreeInfo `json:"worktree"`
	AlreadyOpen bool          `json:"already_open"`
	Forced      bool          `json:"forced"`

	MatchedLine string          `json:"matched_line"` // pane_output_matched
	Read        *PaneReadResult `json:"read"`         // pane_output_matched
	Scroll      *PaneScrollInfo `json:"scroll"`       // pane_scroll_changed

	// Data is the payload exactly as received.
	Data json.RawMessage `json:"-"`
}

// Known reports whether Kind is one of the kinds this package models. Events
// of other kinds are still delivered so that nothing herdr sends is lost.
func (e *Event) Known() bool { return knownKinds[e.Kind] }

// eventPayload decodes an event's data object into Event's tagged fields
// (it is Event without Event's UnmarshalJSON).
type eventPayload Event

// eventKindOf normalises an envelope's event name: "pane.agent_status_changed"
// becomes "pane_agent_status_changed"; snake_case names are unchanged.
func eventKindOf(name string) EventKind {
	return EventKind(strings.Replace(name, ".", "_", 1))
}

// UnmarshalJSON decodes either envelope style: {"event":"pane_created",
// "data":{"type":"pane_created",…}} or {"event":"pane.agent_status_changed",
// "data":{…}} without a type. A kind it does not model decodes with the
// common fields it can find, or with only Kind, Name and Data if even those
// do not fit.
func (e *Event) UnmarshalJSON(b []byte) error {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("decode herdr event: %w", err)
	}
	return e.decode(env, b)
}

// envelope is an event as herdr sends it: its name and its data object.
type envelope struct {
	Event *string         `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// decode decodes the event of env, decoded from b; env.Data, a copy
// json.Unmarshal made, becomes e's.
func (e *Event) decode(env envelope, b []byte) error {
	if env.Event == nil || *env.Event == "" {
		return fmt.Errorf("decode herdr event: no \"event\" name in %.200s", b)
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return fmt.Errorf("decode herdr event %q: no \"data\" object", *env.Event)
	}
	kind := eventKindOf(*env.Event)
	var p eventPayload
	if err := json.Unmarshal(env.Data, &p); err != nil {
		if knownKinds[kind] {
			return fmt.Errorf("decode herdr event %q: %w", *env.Event, err)
		}
		// A kind from a newer herdr may reuse a field name with another
		// type; deliver it raw rather than lose it.
		p = eventPayload{}
	}
	*e = Event(p)
	e.Kind = kind
	e.Name = *env.Event
	e.Data = env.Data
	// Lifecycle payloads name the pane/tab/workspace only inside the object.
	if e.PaneID == "" && e.Pane != nil {
		e.PaneID = e.Pane.PaneID
	}
	if e.TabID == "" && e.Tab != nil {
		e.TabID = e.Tab.TabID
	}
	if e.WorkspaceID == "" {
		switch {
		case e.Pane != nil:
			e.WorkspaceID = e.Pane.WorkspaceID
		case e.Tab != nil:
			e.WorkspaceID = e.Tab.WorkspaceID
		case e.Workspace != nil:
			e.WorkspaceID = e.Workspace.WorkspaceID
		}
	}
	if e.PaneID == "" && e.Read != nil {
		e.PaneID = e.Read.PaneID
	}
	return nil
}

// Subscription is one entry of an events.subscribe request. Global kinds need
// only Type; the per-pane kinds need PaneID (and, for pane.output_matched,
// Source and Match). Use the Sub* constants for Type.
type Subscription struct {
	Type string `json:"type"`

	PaneID      string       `json:"pane_id,omitempty"`
	AgentStatus AgentStatus  `json:"agent_status,omitempty"` // pane.agent_status_changed: only this status
	Source      ReadSource   `json:"source,omitempty"`       // pane.output_matched
	Lines       int          `json:"lines,omitempty"`        // pane.output_matched
	Match       *OutputMatch `json:"match,omitempty"`        // pane.output_matched
	StripANSI   *bool        `json:"strip_ansi,omitempty"`   // pane.output_matched
}

// Subscription types (dot-named, unlike the events they produce). herdr has no
// global agent-status subscription: subscribe SubPaneAgentStatusChanged once
// per pane, or watch SubPaneAgentDetected / SubPaneUpdated.
const (
	SubWorkspaceCreated       = "workspace.created"
	SubWorkspaceUpdated       = "workspace.updated"
	SubWorkspaceRenamed       = "workspace.renamed"
	SubWorkspaceClosed        = "workspace.closed"
	SubWorkspaceFocused       = "workspace.focused"
	SubTabCreated             = "tab.created"
	SubTabClosed              = "tab.closed"
	SubTabFocused             = "tab.focused"
	SubTabRenamed             = "tab.renamed"
	SubPaneCreated            = "pane.created"
	SubPaneClosed             = "pane.closed"
	SubPaneUpdated            = "pane.updated"
	SubPaneFocused            = "pane.focused"
	SubPaneMoved              = "pane.moved"
	SubPaneExited             = "pane.exited"
	SubPaneAgentDetected      = "pane.agent_detected"
	SubLayoutUpdated          = "layout.updated"
	SubPaneAgentStatusChanged = "pane.agent_status_changed"
	SubPaneOutputMatched      = "pane.output_matched"
	SubPaneScrollChanged      = "pane.scroll_changed"
	// Protocol 22 only: herdr 0.8 refuses a subscription that names them.
	SubWorktreeCreated = "worktree.created"
	SubWorktreeOpened  = "worktree.opened"
	SubWorktreeRemoved = "worktree.removed"
)

// OutputMatch is a substring or regex (Rust syntax) matched per line.
type OutputMatch struct {
	Type  string `json:"type"` // "substring" or "regex"
	Value string `json:"value"`
}

// EventMatch selects the event events.wait waits for. herdr 0.8 supports only
// Event = EventPaneAgentStatusChanged with PaneID and AgentStatus (others get
// unsupported_event_wait_match), though its schema admits more kinds.
type EventMatch struct {
	Event       EventKind   `json:"event"`
	PaneID      string      `json:"pane_id,omitempty"`
	WorkspaceID string      `json:"workspace_id,omitempty"`
	TabID       string      `json:"tab_id,omitempty"`
	AgentStatus AgentStatus `json:"agent_status,omitempty"`
	Agent       string      `json:"agent,omitempty"`
	Label       string      `json:"label,omitempty"`
	MinRevision *uint64     `json:"min_revision,omitempty"`
}
