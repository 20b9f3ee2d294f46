package herdrsim

import (
	"errors"
	"time"
)

// RelaunchInterval is how far apart herdr relaunches restored agents after
// a restart with session restore.
const RelaunchInterval = 100 * time.Millisecond

// RestoreOptions shape a restart with session restore.
type RestoreOptions struct {
	// RestoreErrors makes the agents of these panes (pane id → herdr's
	// message) fail to come back: the pane returns with its shell and
	// restore_error (protocol 22) instead of its agent.
	RestoreErrors map[string]string
}

// RestartRestored is [Server.Restart] after herdr itself restarted with
// session restore (herdr's default): the same workspace, tab and pane ids
// and labels come back, every pane with a NEW terminal id, an empty screen
// and its shell, and its agent_session kept. Agents started with
// agent.start come back under their names: at once launch_pending, then
// relaunched one every [RelaunchInterval] on the clock (with their native
// resume command when herdr knows their session: claude --resume <id>,
// codex resume <id>), ready after Options.ReadyDelay as their Behavior
// says. A status a test sets (SetAgentStatus, SetAgentState) on an agent
// still waiting for its relaunch relaunches it at once. Other agents do not
// come back. The event history starts empty (a new process); no creation
// events are emitted. Call it after [Server.Stop].
func (s *Server) RestartRestored(o *RestoreOptions) error {
	if o == nil {
		o = &RestoreOptions{}
	}
	s.mu.Lock()
	running, closed := s.serving, s.closed
	if closed || running {
		s.mu.Unlock()
		if closed {
			return errors.New("herdrsim: restart after Close")
		}
		return errors.New("herdrsim: restart while serving")
	}
	s.events = nil
	var relaunch []*agent
	for _, p := range s.allPanesLocked() {
		old := p.agent
		s.dropAgentLocked(p)
		p.terminal = s.newTerminalIDLocked()
		p.screen, p.input, p.foreground, p.restoreError = nil, "", "", ""
		p.lastStatus = stateUnknown
		p.revision++
		s.startShellLocked(p)
		if old == nil || old.name == "" || old.released {
			continue
		}
		if msg, failed := o.RestoreErrors[p.id]; failed {
			p.restoreError = msg
			continue
		}
		a := &agent{pane: p, name: old.name, kind: old.kind, argv: resumeArgv(old, p.session),
			launchPending: true, state: stateUnknown, seen: true, behavior: s.behaviorLocked(p), relaunch: true}
		p.agent = a
		relaunch = append(relaunch, a)
	}
	for i, a := range relaunch {
		a.stopLaunch = append(a.stopLaunch, s.afterLocked(time.Duration(i)*RelaunchInterval, func() { s.relaunchLocked(a) }))
	}
	s.notifyLocked()
	s.mu.Unlock()
	return s.listen()
}

// relaunchLocked types a restored agent's command into its pane and runs
// its launch as agent.start would, with the default startup deadline.
func (s *Server) relaunchLocked(a *agent) {
	if a.gone || a.pane.agent != a {
		return
	}
	s.typeRelaunchLocked(a)
	s.armLaunchLocked(a, 30*time.Second)
}

// typeRelaunchLocked types a restored agent's command into its pane: from
// now on its program is the pane's foreground.
func (s *Server) typeRelaunchLocked(a *agent) {
	a.relaunch = false
	s.typeCommandLocked(a.pane, a.argv)
	a.pane.foreground = a.argv[0]
}

// resumeArgv is the command herdr relaunches a restored agent with: its
// harness's native resume command when the pane's agent_session is an id
// herdr can resume, else the agent's own argv.
func resumeArgv(a *agent, ss *agentSession) []string {
	if ss != nil && ss.Kind == "id" && ss.Value != "" {
		switch a.kind {
		case "claude":
			return []string{executable(a.kind), "--resume", ss.Value}
		case "codex":
			return []string{executable(a.kind), "resume", ss.Value}
		}
	}
	return append([]string(nil), a.argv...)
}

// Handoff is herdr handing off live to a new binary (herdr 0.9,
// capabilities.live_handoff): every open connection, streams and waits
// included, drops without a response, every pane gets a NEW terminal id and
// the event history starts empty; everything else — ids, labels, screens,
// agents and their state — is kept, and the fake goes on serving on the
// same path.
func (s *Server) Handoff() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.serving {
		return errors.New("herdrsim: handoff while stopped")
	}
	for c := range s.conns {
		c.Close()
	}
	for _, p := range s.allPanesLocked() {
		p.terminal = s.newTerminalIDLocked()
	}
	s.events = nil
	s.notifyLocked()
	return nil
}
