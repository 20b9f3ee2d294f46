package herdrsim

import (
	"context"
	"fmt"
	"maps"
)

// Test-side controls. Each changes the model as the real thing would
// (emitting herdr's events) and wakes waits and streams.

// PaneState is a test's view of one pane.
type PaneState struct {
	ID          string
	TerminalID  string
	WorkspaceID string
	TabID       string
	Cwd         string
	// Env is the environment the pane's process was started with: the
	// caller's env overlaid by herdr's injected variables.
	Env map[string]string
	// Status is the pane's public agent status.
	Status string
	// AgentName and AgentKind describe the agent on the pane, if any.
	AgentName string
	AgentKind string
	// Prompts are the prompts the pane's agents picked up, in order.
	Prompts []string
	// Screen is what pane.read with source "recent" would show.
	Screen string
	// AgentSession is the agent_session herdr knows for the pane, if any.
	AgentSession *AgentSession
	// RestoreError is why the pane's agent did not come back after a
	// restart with session restore ("" when it did or there was none).
	RestoreError string
	// HistoryScrolls counts the reads (protocol 22) that had a side effect:
	// more recent lines than the viewport of an idle alternate-screen agent.
	HistoryScrolls int
}

// AgentSession is the agent's own session record herdr knows for a pane
// (agent_session): Kind is "id" or "path".
type AgentSession struct {
	Source, Agent, Kind, Value string
}

// Pane returns the state of a live pane.
func (s *Server) Pane(paneID string) (PaneState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findPaneLocked(paneID)
	if p == nil {
		return PaneState{}, false
	}
	return s.paneStateLocked(p), true
}

// Panes returns every live pane in workspace, tab and pane order.
func (s *Server) Panes() []PaneState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PaneState
	for _, p := range s.allPanesLocked() {
		out = append(out, s.paneStateLocked(p))
	}
	return out
}

func (s *Server) paneStateLocked(p *pane) PaneState {
	st := PaneState{
		ID: p.id, TerminalID: p.terminal, WorkspaceID: p.tab.ws.id, TabID: p.tab.id, Cwd: p.cwd,
		Env: maps.Clone(p.env), Status: p.status(), Prompts: append([]string(nil), p.prompts...),
	}
	if a := p.agent; a != nil {
		st.AgentName, st.AgentKind = a.name, a.kind
	}
	if ss := p.session; ss != nil {
		st.AgentSession = &AgentSession{Source: ss.Source, Agent: ss.Agent, Kind: ss.Kind, Value: ss.Value}
	}
	st.RestoreError, st.HistoryScrolls = p.restoreError, p.historyScrolls
	lines := 1000
	st.Screen = s.readLocked(p, "recent", &lines, "text").Text
	return st
}

// PaneEnv returns the environment of a live pane's process.
func (s *Server) PaneEnv(paneID string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findPaneLocked(paneID)
	if p == nil {
		return nil, false
	}
	return maps.Clone(p.env), true
}

// Prompts returns the prompts the agents of a live pane picked up.
func (s *Server) Prompts(paneID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.findPaneLocked(paneID); p != nil {
		return append([]string(nil), p.prompts...)
	}
	return nil
}

// WaitPrompts blocks until the agent in paneID has taken at least n prompts
// (herdr presses Enter after answering agent.prompt, so a prompt is taken
// after the call that typed it returns) or ctx ends.
func (s *Server) WaitPrompts(ctx context.Context, paneID string, n int) error {
	return s.waitUntil(ctx, func() bool {
		p := s.findPaneLocked(paneID)
		return p != nil && len(p.prompts) >= n
	})
}

// SetBehavior scripts the agents of a pane: the current one and any
// started there later. It overrides Options.Behavior.
func (s *Server) SetBehavior(paneID string, b Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behaviors[paneID] = b
	if p := s.findPaneLocked(paneID); p != nil && p.agent != nil {
		p.agent.behavior = b
	}
}

// SetDefaultBehavior replaces Options.Behavior for the agents started from
// now on in panes without their own ([Server.SetBehavior]) and returns the
// one it replaced. Agents already started keep theirs. A test that needs a
// pane it does not know yet to launch differently (a member's agent to come
// up blocked at a dialog) sets it before the pane is made.
func (s *Server) SetDefaultBehavior(b Behavior) (previous Behavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	previous, s.opts.Behavior = s.opts.Behavior, b
	return previous
}

// withPane runs f on a live pane with the lock held, then wakes waiters.
func (s *Server) withPane(paneID string, f func(p *pane) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	p := s.findPaneLocked(paneID)
	if p == nil {
		return fmt.Errorf("herdrsim: pane %s not found", paneID)
	}
	return f(p)
}

func (s *Server) withAgent(paneID string, f func(a *agent) error) error {
	return s.withPane(paneID, func(p *pane) error {
		if p.agent == nil {
			return fmt.Errorf("herdrsim: pane %s has no agent", paneID)
		}
		return f(p.agent)
	})
}

// SetAgentStatus makes the agent on a pane report exactly status (idle,
// working, blocked, done or unknown), as if detection saw it; a
// launch-pending agent becomes interactive_ready first. Unlike
// SetAgentState it bypasses herdr's idle/done derivation.
func (s *Server) SetAgentStatus(paneID, status string) error {
	return s.withAgent(paneID, func(a *agent) error {
		state, seen := status, true
		switch status {
		case "done":
			state, seen = stateIdle, false
		case stateIdle, stateWorking, stateBlocked, stateUnknown:
		default:
			return fmt.Errorf("herdrsim: unknown agent status %q", status)
		}
		s.detectLocked(a)
		if a.state != state {
			a.state = state
			a.seq++
			s.countCompletionLocked(a, state)
		}
		a.seen = seen
		s.publishStatusLocked(a.pane)
		return nil
	})
}

// SetAgentState moves the agent on a pane to an internal state (idle,
// working, blocked or unknown) the way a screen change would, applying
// herdr's rule that an agent finishing outside the active tab is "done".
// It is how a test says "the agent finished now".
func (s *Server) SetAgentState(paneID, state string) error {
	return s.withAgent(paneID, func(a *agent) error {
		switch state {
		case stateIdle, stateWorking, stateBlocked, stateUnknown:
		default:
			return fmt.Errorf("herdrsim: unknown agent state %q", state)
		}
		s.detectLocked(a)
		s.setStateLocked(a, state)
		return nil
	})
}

// detectLocked ends a pending launch successfully, without changing state.
// herdr detects an agent only once its program runs, so a restored agent
// whose relaunch is still queued is relaunched first: ending its launch
// cancels the queued relaunch, which would leave the agent detected in a
// pane that runs a bare shell, refusing every prompt.
func (s *Server) detectLocked(a *agent) {
	a.dialog = ""
	if a.relaunch {
		s.typeRelaunchLocked(a)
	}
	if a.launchPending {
		a.launchPending, a.ready = false, true
		a.endLaunchLocked()
		p := a.pane
		s.emitLocked("pane_agent_detected", typed{"pane_id": p.id, "workspace_id": p.tab.ws.id, "agent": a.kind})
	}
}

// ExitAgent makes the agent program on a pane exit back to the shell: the
// agent is released (pane_agent_detected with released and final_status)
// and the pane shows a plain shell again.
func (s *Server) ExitAgent(paneID string) error {
	return s.withAgent(paneID, func(a *agent) error {
		s.releaseLocked(a)
		return nil
	})
}

// KillPane makes a pane's process exit: pane_exited, then the pane is
// removed without pane_closed (and its tab or workspace, if it was the
// last, without tab_closed or workspace_closed).
func (s *Server) KillPane(paneID string) error {
	return s.withPane(paneID, func(p *pane) error {
		s.exitPaneLocked(p)
		return nil
	})
}

// WriteOutput appends text to a pane's screen, as its program printing it.
func (s *Server) WriteOutput(paneID, text string) error {
	return s.withPane(paneID, func(p *pane) error {
		p.writeLocked(text)
		return nil
	})
}

// SetForeground sets the program in a pane's foreground ("" is its shell),
// for example to make agent.start fail with agent_pane_busy or to make an
// agent not the foreground process (agent_not_ready).
func (s *Server) SetForeground(paneID, program string) error {
	return s.withPane(paneID, func(p *pane) error {
		p.foreground = program
		return nil
	})
}

// Event is one lifecycle event as herdr's event hub recorded it, in emission
// order.
type Event struct {
	Seq  uint64
	Kind string // snake_case, e.g. "pane_closed"
	Line []byte // the line a lifecycle subscription would stream
}

// Events returns the events still in the hub's ring, oldest first,
// including pane_agent_status_changed (which only events.wait and per-pane
// subscriptions surface).
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Event, len(s.events))
	for i, ev := range s.events {
		out[i] = Event{Seq: ev.seq, Kind: ev.kind, Line: append([]byte(nil), ev.line...)}
	}
	return out
}

// AddLinkedWorkspace opens a workspace for a linked git worktree of the
// repository whose main checkout is workspace primaryID, as herdr 0.9 does
// for `herdr worktree add`: one tab, one pane in cwd, the usual creation
// events, and worktree info (is_linked_worktree) on both workspaces. While
// it is open, protocol 22's workspace.close of the primary fails with
// workspace_group_close_required unless close_group is set. It returns the
// new workspace's id.
func (s *Server) AddLinkedWorkspace(primaryID, cwd string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	primary := s.findWorkspaceLocked(primaryID)
	if primary == nil {
		return "", fmt.Errorf("herdrsim: workspace %s not found", primaryID)
	}
	if primary.primary != nil {
		return "", fmt.Errorf("herdrsim: workspace %s is itself a linked worktree", primaryID)
	}
	ws := s.newWorkspaceLocked("", cwd)
	ws.primary = primary
	ws.tree = &checkout{repo: primary.cwd, path: cwd, linked: true}
	t := s.newTabLocked(ws, "")
	root := s.newPaneLocked(t, cwd, nil)
	t.root = &layoutNode{pane: root}
	s.emitLocked("workspace_created", typed{"workspace": s.workspaceInfoLocked(ws)})
	s.emitLocked("tab_created", typed{"tab": s.tabInfoLocked(t)})
	s.emitLocked("pane_created", typed{"pane": s.paneInfoLocked(root)})
	s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	return ws.id, nil
}

// AnswerDialog is a person answering the dialog a launching agent waits at
// (Behavior.Launch LaunchBlocked): the dialog goes and the agent becomes
// interactive-ready and idle. It fails when the pane's agent is at no
// dialog.
func (s *Server) AnswerDialog(paneID string) error { return s.answerDialog(paneID, false) }

// AnswerDialogLoading is a person answering the dialog a launching agent
// waits at while the agent then takes its time to load: the dialog goes,
// and the agent stays launch-pending and not interactive-ready (status
// unknown, no longer blocked) until detection sees it ([Server.SetAgentStatus]
// or [Server.SetAgentState] make it ready). It fails when the pane's agent
// is at no dialog.
func (s *Server) AnswerDialogLoading(paneID string) error { return s.answerDialog(paneID, true) }

// answerDialog answers the dialog of the agent on a pane: it is detected
// at once, or (loading) stays launch-pending until detection sees it.
func (s *Server) answerDialog(paneID string, loading bool) error {
	return s.withAgent(paneID, func(a *agent) error {
		if a.dialog == "" {
			return fmt.Errorf("herdrsim: the agent on pane %s is at no dialog", paneID)
		}
		a.behavior.Launch = LaunchReady
		if loading {
			a.dialog = ""
			s.publishStatusLocked(a.pane)
		} else {
			s.launchedLocked(a)
		}
		return nil
	})
}

// SetAgentSession sets the agent_session herdr knows for a pane, as an
// integration's pane.report_agent_session would; it survives restarts.
func (s *Server) SetAgentSession(paneID string, ss AgentSession) error {
	return s.withPane(paneID, func(p *pane) error {
		if ss.Kind != "id" && ss.Kind != "path" {
			return fmt.Errorf("herdrsim: agent_session kind %q, want id or path", ss.Kind)
		}
		p.session = &agentSession{Source: ss.Source, Agent: ss.Agent, Kind: ss.Kind, Value: ss.Value}
		s.emitLocked("pane_updated", typed{"pane": s.paneInfoLocked(p)})
		return nil
	})
}
