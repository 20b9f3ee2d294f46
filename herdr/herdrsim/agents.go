package herdrsim

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Launch is how an agent's start-up ends.
type Launch int

const (
	// LaunchReady: detection sees the agent idle after Options.ReadyDelay;
	// it becomes interactive_ready.
	LaunchReady Launch = iota
	// LaunchBlocked: the agent comes up waiting at a dialog (a first-run
	// trust prompt, a login) after ReadyDelay: it stays launch_pending,
	// not interactive_ready, with agent_status "blocked", the dialog's text
	// (Behavior.Dialog) on the pane's screen and no startup deadline, until
	// a person answers it ([Server.AnswerDialog]); then it is ready and
	// idle. herdr 0.8.2 and 0.9 both behave so (PROTOCOL-22.md §4).
	LaunchBlocked
	// LaunchNever: detection never sees the agent; at the agent.start
	// deadline (timeout_ms, default 30 s) the name is cleared and the
	// process keeps running.
	LaunchNever
	// LaunchExit: the agent program exits back to the shell after
	// ReadyDelay; the name is cleared.
	LaunchExit
)

// Outcome is what an agent does once it has worked on a prompt.
type Outcome int

const (
	// Finish: back to idle (done when its tab is not in front), writing
	// Behavior.Reply to the pane.
	Finish Outcome = iota
	// StayWorking: keeps working until a test changes its status.
	StayWorking
	// Block: stops at an approval dialog (blocked).
	Block
	// Crash: the pane's process exits (pane_exited; the pane is removed).
	Crash
	// Exit: the agent program exits back to the pane's shell (the agent is
	// released).
	Exit
)

// Behavior scripts a fake agent. The zero value launches, picks up every
// prompt (working) and finishes at once.
type Behavior struct {
	Launch Launch
	// IgnorePrompts records prompts but never reacts: the status and
	// state_change_seq stay put, so agent.prompt with wait stalls.
	IgnorePrompts bool
	// WorkFor is how long the agent works on a prompt before Then, on the
	// server clock; 0 applies Then at once.
	WorkFor time.Duration
	Then    Outcome
	// Reply is written to the pane when the agent finishes.
	Reply string
	// Dialog is the text a LaunchBlocked agent shows; "" is a trust prompt.
	Dialog string
	// ReportSession makes an agent started with agent.start report an
	// agent_session (kind "id") once it is ready, as herdr's integrations
	// for Claude Code or Codex do: a new one, or the one its harness's
	// resume command (the end of its argv) reopened;
	// [Server.SetAgentSession] sets one explicitly.
	ReportSession bool
	// OnPrompt, when set, replaces the scripted reaction above: the fake
	// records the prompt and calls OnPrompt in its own goroutine, and the
	// test drives the agent through the Server's controls.
	OnPrompt func(paneID, prompt string)
}

func executable(kind string) string {
	if exe, ok := executables[kind]; ok {
		return exe
	}
	return kind
}

func (s *Server) behaviorLocked(p *pane) Behavior {
	if b, ok := s.behaviors[p.id]; ok {
		return b
	}
	return s.opts.Behavior
}

// setStateLocked moves a ready agent to an internal state with herdr's seen
// rule: a completion (working/blocked → idle) away from the active tab
// leaves the agent unseen ("done"); any other state marks it seen.
func (s *Server) setStateLocked(a *agent, state string) {
	if a.state == state {
		return
	}
	old := a.state
	a.state = state
	a.seq++
	s.countCompletionLocked(a, state)
	if state != stateIdle {
		a.seen = true
	} else if old == stateWorking || old == stateBlocked {
		a.seen = s.isForegroundLocked(a.pane)
	}
	s.publishStatusLocked(a.pane)
}

// countCompletionLocked keeps completion_seq: it advances when an agent
// that worked since its last completion becomes idle, whether or not anyone
// looks at the pane.
func (s *Server) countCompletionLocked(a *agent, state string) {
	switch state {
	case stateWorking:
		a.worked = true
	case stateIdle:
		if a.worked {
			a.worked = false
			a.completions++
		}
	}
}

type agentStartParams struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	PaneID    string   `json:"pane_id"`
	Args      []string `json:"args"`
	TimeoutMS *uint64  `json:"timeout_ms"`
}

// agentStart validates in herdr's order (PROTOCOL §3), types the command
// into the pane and returns at once with launch_pending.
func (s *Server) agentStart(raw json.RawMessage) (typed, *apiError) {
	var p agentStartParams
	if err := decode(raw, &p); err != nil {
		return nil, err
	}
	if !agentNamePattern.MatchString(p.Name) {
		return nil, errorf("invalid_agent_name", "invalid agent name %q: must match ^[a-z][a-z0-9_-]{0,31}$", p.Name)
	}
	kind, ok := s.agentKind(p.Kind)
	if !ok {
		return nil, errorf("unsupported_agent_kind", "unsupported agent kind %q", p.Kind)
	}
	for _, arg := range p.Args {
		if strings.ContainsFunc(arg, isControl) {
			return nil, errorf("invalid_agent_argument", "agent argument %q contains a control character", arg)
		}
	}
	if holder := s.agentByNameLocked(p.Name); holder != nil {
		return nil, errorf("agent_name_taken", "agent name %q is already used by the %s agent in pane %s (terminal %s)",
			p.Name, holder.kind, holder.pane.id, holder.pane.terminal)
	}
	pn := s.findPaneLocked(p.PaneID)
	if pn == nil {
		return nil, errorf("agent_pane_not_found", "pane %s not found", p.PaneID)
	}
	if pn.shellStarting {
		return nil, errorf("agent_pane_busy", "pane %s is busy: its shell is still starting", pn.id)
	}
	if pn.foreground != "" || (pn.agent != nil && (pn.agent.ready || pn.agent.launchPending)) {
		return nil, errorf("agent_pane_busy", "pane %s is busy: it already runs %s", pn.id, cmp(pn.foreground, "an agent"))
	}
	timeout := uint64(30000)
	if p.TimeoutMS != nil {
		timeout = *p.TimeoutMS
	}
	if timeout <= 3000 || timeout > 300000 {
		return nil, errorf("invalid_agent_timeout", "timeout_ms %d must be greater than 3000 and at most 300000", timeout)
	}

	argv := append([]string{executable(kind)}, p.Args...)
	s.typeCommandLocked(pn, argv)
	a := &agent{pane: pn, name: p.Name, kind: kind, argv: argv, launchPending: true, state: stateUnknown, seen: true,
		behavior: s.behaviorLocked(pn)}
	if pn.agent != nil {
		pn.agent.gone = true // a record left by a failed launch
	}
	pn.agent = a
	pn.foreground = argv[0]
	snap := s.agentInfoLocked(a)

	s.armLaunchLocked(a, time.Duration(timeout)*time.Millisecond)
	return result("agent_started", "agent", snap, "argv", argv), nil
}

// armLaunchLocked starts a's launch: the startup deadline, and the end of
// the launch its Behavior scripts after Options.ReadyDelay.
func (s *Server) armLaunchLocked(a *agent, deadline time.Duration) {
	stopDeadline := s.afterLocked(deadline, func() {
		if a.launchPending && !a.gone {
			s.launchFailedLocked(a)
		}
	})
	a.stopLaunch = append(a.stopLaunch, stopDeadline)
	switch a.behavior.Launch {
	case LaunchReady, LaunchBlocked:
		if s.opts.ReadyDelay < deadline {
			a.stopLaunch = append(a.stopLaunch, s.afterLocked(s.opts.ReadyDelay, func() { s.launchedLocked(a) }))
		}
	case LaunchExit:
		a.stopLaunch = append(a.stopLaunch, s.afterLocked(s.opts.ReadyDelay, func() {
			if a.launchPending && !a.gone {
				a.pane.foreground = ""
				s.launchFailedLocked(a)
			}
		}))
	}
}

// typeCommandLocked types argv into p's shell, quoted, and presses Enter.
func (s *Server) typeCommandLocked(p *pane, argv []string) {
	quoted := make([]string, len(argv))
	for i, w := range argv {
		quoted[i] = shellQuote(w)
	}
	s.typeLocked(p, strings.Join(quoted, " ")+"\r")
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// launchedLocked: detection saw the expected agent; it becomes active.
func (s *Server) launchedLocked(a *agent) {
	if !a.launchPending || a.gone {
		return
	}
	if a.behavior.Launch == LaunchBlocked && a.dialog == "" {
		// At a dialog: no startup deadline while a person is needed.
		a.endLaunchLocked()
		a.dialog = cmp(a.behavior.Dialog, defaultDialog)
		a.pane.writeLocked(a.dialog)
		s.publishStatusLocked(a.pane)
		return
	}
	a.dialog = ""
	s.detectLocked(a)
	a.state = stateUnknown
	s.setStateLocked(a, stateIdle)
	if a.behavior.ReportSession && a.pane.session == nil {
		// An agent started with its harness's resume command reopened
		// that session, and reports it, as the real integrations do.
		id := resumedID(a.kind, a.argv)
		if id == "" {
			id = a.kind + "-" + a.pane.terminal
		}
		a.pane.session = &agentSession{Source: "herdr:" + a.kind, Agent: a.kind, Kind: "id", Value: id}
		s.emitLocked("pane_updated", typed{"pane": s.paneInfoLocked(a.pane)})
	}
}

// resumedID is the session id argv's resume command reopens ("" for
// none): what resumeArgv writes for the harnesses herdr resumes, at the
// end of the command line — Claude Code `--resume ID`, Codex `resume ID`.
func resumedID(kind string, argv []string) string {
	n := len(argv)
	if n < 3 {
		return ""
	}
	switch {
	case kind == "claude" && argv[n-2] == "--resume", kind == "codex" && argv[n-2] == "resume":
		return argv[n-1]
	}
	return ""
}

// defaultDialog is what a LaunchBlocked agent shows without Behavior.Dialog.
const defaultDialog = "Do you trust the files in this folder?\n> 1. Yes, proceed\n  2. No, exit\nEnter to confirm · Esc to exit"

// launchFailedLocked: deadline or exit; the name is cleared and the agent
// resolves only by pane id.
func (s *Server) launchFailedLocked(a *agent) {
	a.launchPending = false
	a.endLaunchLocked()
	a.name = ""
	s.notifyLocked()
}

// endLaunchLocked cancels the launch timers that are still armed.
func (a *agent) endLaunchLocked() {
	for _, stop := range a.stopLaunch {
		stop()
	}
	a.stopLaunch = nil
}

func (s *Server) agentByNameLocked(name string) *agent {
	for _, p := range s.allPanesLocked() {
		if a := p.agent; a != nil && a.name == name {
			return a
		}
	}
	return nil
}

// resolveAgentLocked resolves an agent target: the canonical id of a pane
// hosting an agent, or a unique live agent name; never a terminal id.
func (s *Server) resolveAgentLocked(target string) (*agent, *apiError) {
	if p := s.findPaneLocked(target); p != nil && p.agent != nil {
		return p.agent, nil
	}
	if a := s.agentByNameLocked(target); a != nil {
		return a, nil
	}
	return nil, errorf("agent_not_found", "agent %q not found", target)
}

// agentTarget is embedded in the params of every method that names an agent
// by target.
type agentTarget struct {
	Target string `json:"target"`
}

func (t *agentTarget) target() string { return t.Target }

// decodeAgentLocked decodes params into p and resolves the agent it names.
func (s *Server) decodeAgentLocked(raw json.RawMessage, p interface{ target() string }) (*agent, *apiError) {
	if err := decode(raw, p); err != nil {
		return nil, err
	}
	return s.resolveAgentLocked(p.target())
}

func (s *Server) agentGet(raw json.RawMessage) (typed, *apiError) {
	a, aerr := s.decodeAgentLocked(raw, &agentTarget{})
	if aerr != nil {
		return nil, aerr
	}
	return result("agent_info", "agent", s.agentInfoLocked(a)), nil
}

func (s *Server) agentList(json.RawMessage) (typed, *apiError) {
	out := []agentInfo{}
	for _, p := range s.allPanesLocked() {
		if p.agent != nil {
			out = append(out, s.agentInfoLocked(p.agent))
		}
	}
	return result("agent_list", "agents", out), nil
}

func (s *Server) agentRead(raw json.RawMessage) (typed, *apiError) {
	var p readParams
	a, aerr := s.decodeAgentLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	s.scrollHistoryLocked(a.pane, p.Source, p.Lines)
	return result("pane_read", "read", s.readLocked(a.pane, p.Source, p.Lines, p.Format)), nil
}

// alternateScreen are the kinds whose agents draw on the terminal's
// alternate screen (herdr 0.9's docs name Claude Code and OpenCode).
var alternateScreen = map[string]bool{"claude": true, "opencode": true}

// scrollHistoryLocked models protocol 22's side effect of a read: reading
// more recent lines than the viewport of an idle alternate-screen agent
// scrolls the agent's own history with mouse input and back, which the pane
// sees (its revision moves; PaneState.HistoryScrolls counts it). A read
// within scroll.viewport_rows, or of "visible", has no effect.
func (s *Server) scrollHistoryLocked(p *pane, source string, lines *int) {
	a := p.agent
	if !s.p22() || a == nil || !a.ready || !alternateScreen[a.kind] || p.status() == stateWorking {
		return
	}
	if source != "recent" && source != "recent_unwrapped" {
		return
	}
	n := 80
	if lines != nil {
		n = *lines
	}
	if n > areaHeight {
		p.historyScrolls++
		p.revision += 2
	}
}

// interactiveLocked is agent.prompt's and agent.send_keys's readiness rule:
// not launch-pending, and the agent's program is the pane's foreground.
func interactiveLocked(a *agent) *apiError {
	if !a.ready || a.launchPending || a.pane.foreground != a.argv[0] {
		return errorf("agent_not_ready", "agent in pane %s is not ready for input", a.pane.id)
	}
	return nil
}

func (s *Server) agentSendKeys(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		agentTarget
		Keys []string `json:"keys"`
	}
	a, aerr := s.decodeAgentLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := interactiveLocked(a); aerr != nil {
		return nil, aerr
	}
	if aerr := s.sendKeysLocked(a.pane, p.Keys); aerr != nil {
		return nil, aerr
	}
	return result("ok"), nil
}

func (s *Server) agentRename(raw json.RawMessage) (typed, *apiError) {
	var p struct {
		agentTarget
		Name *string `json:"name"`
	}
	a, aerr := s.decodeAgentLocked(raw, &p)
	if aerr != nil {
		return nil, aerr
	}
	name := deref(p.Name)
	if name != "" {
		if !agentNamePattern.MatchString(name) {
			return nil, errorf("invalid_agent_name", "invalid agent name %q: must match ^[a-z][a-z0-9_-]{0,31}$", name)
		}
		if holder := s.agentByNameLocked(name); holder != nil && holder != a {
			return nil, errorf("agent_name_taken", "agent name %q is already used by the agent in pane %s", name, holder.pane.id)
		}
	}
	a.name = name
	return result("agent_info", "agent", s.agentInfoLocked(a)), nil
}

// deliverLocked hands a submitted line to whatever runs in the pane. Only a
// ready agent in the foreground that is not at a dialog takes it as a
// prompt; a shell just shows it.
func (s *Server) deliverLocked(p *pane, line string) {
	a := p.agent
	if a == nil || !a.ready || p.foreground != a.argv[0] || a.state == stateBlocked || line == "" {
		return
	}
	p.prompts = append(p.prompts, line)
	s.notifyLocked()
	b := a.behavior
	if b.OnPrompt != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			b.OnPrompt(p.id, line)
		}()
		return
	}
	if b.IgnorePrompts {
		return
	}
	s.setStateLocked(a, stateWorking)
	a.work++
	work := a.work
	s.afterLocked(b.WorkFor, func() {
		if a.gone || a.released || a.work != work || a.state != stateWorking {
			return
		}
		switch b.Then {
		case Finish:
			p.writeLocked(b.Reply)
			s.setStateLocked(a, stateIdle)
		case Block:
			s.setStateLocked(a, stateBlocked)
		case Crash:
			s.exitPaneLocked(p)
		case Exit:
			s.releaseLocked(a)
		}
	})
}

// exitPaneLocked: the pane's process exited. herdr emits pane_exited and
// removes the pane silently (no pane_closed, tab_closed or
// workspace_closed), then layout_updated when the tab survives.
func (s *Server) exitPaneLocked(p *pane) {
	t, ws := p.tab, p.tab.ws
	s.emitLocked("pane_exited", typed{"pane_id": p.id, "workspace_id": ws.id})
	tabGone, _ := s.removePaneLocked(p)
	if !tabGone {
		s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	}
	s.settleFocusLocked()
}

// releaseLocked: the agent program exited back to the shell; herdr
// announces the release with its final status.
func (s *Server) releaseLocked(a *agent) {
	p := a.pane
	final := p.status()
	a.released, a.finalStatus = true, final
	p.agent = nil
	p.foreground = ""
	s.emitLocked("pane_agent_detected", typed{"pane_id": p.id, "workspace_id": p.tab.ws.id, "released": true, "final_status": final})
	s.publishStatusLocked(p)
}

// untilMatches reports whether status is one of until.
func untilMatches(until []string, status string) bool { return slices.Contains(until, status) }
