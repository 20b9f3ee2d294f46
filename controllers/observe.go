package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// globalSubscriptions are the lifecycle events fleetd follows. Per owned
// pane it adds pane.agent_status_changed.
var globalSubscriptions = []string{
	herdr.SubWorkspaceCreated, herdr.SubWorkspaceClosed,
	herdr.SubTabCreated, herdr.SubTabClosed,
	herdr.SubPaneCreated, herdr.SubPaneClosed, herdr.SubPaneExited, herdr.SubPaneMoved,
	herdr.SubPaneAgentDetected,
}

var errReconnect = errors.New("herdr call failed; reconnecting")

// observe keeps the view of herdr current: a full listing whenever herdr
// (re)appears and every ResyncPeriod, and an events.subscribe stream in
// between, resubscribed when the owned panes change or the stream drops.
// While herdr is unreachable it retries with exponential backoff and the
// view stays unsynced, so nothing is recreated meanwhile.
func (m *Manager) observe(ctx context.Context) {
	delay := m.o.ReconnectBackoff
	for ctx.Err() == nil {
		err := m.checkProtocol(ctx)
		if err == nil {
			err = m.resync(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.herdrLost(err)
			if !m.sleep(ctx, delay) {
				return
			}
			delay = min(delay*2, m.o.MaxReconnect)
			continue
		}
		started := m.o.Clock.Now()
		err = m.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("herdr event stream ended; listing again", "err", err)
		if unreachable(err) || errors.Is(err, errReconnect) {
			m.herdrLost(err)
		}
		// A stream that lived a while resets the backoff; one that keeps
		// dropping at once must not become a tight loop.
		if m.o.Clock.Now().Sub(started) > m.o.MaxReconnect {
			delay = m.o.ReconnectBackoff
		}
		if !m.sleep(ctx, delay) {
			return
		}
		delay = min(delay*2, m.o.MaxReconnect)
	}
}

// checkProtocol pings herdr when it was not known to be up, so that a herdr
// speaking another protocol is reported instead of misread.
func (m *Manager) checkProtocol(ctx context.Context) error {
	m.mu.Lock()
	up := m.herdrUp
	m.mu.Unlock()
	if up {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	_, err := m.herdr.Ping(cctx)
	if errors.Is(err, herdr.ErrProtocolMismatch) {
		m.log.Error("herdr speaks another protocol; fleetd will not drive it", "err", err)
	}
	return err
}

// sleep waits d on the manager's clock; false if ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	t := m.o.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// follow reads events until the stream ends, herdr fails or a periodic
// resync fails.
func (m *Manager) follow(ctx context.Context) error {
	subs, panes := m.subscriptions()
	stream, stop, err := m.subscribe(ctx, subs)
	if err != nil {
		return fmt.Errorf("subscribe to herdr events: %w", err)
	}
	defer func() { stop() }()
	m.setStreamPanes(panes)
	// Per-pane status events are not replayed: a change between the
	// listing that came before and this subscription would be lost (after
	// a restart, the adopted agents' statuses would stay stale until the
	// next resync). One agent listing now that the stream runs catches up.
	if len(panes) > 0 {
		if err := m.catchUpStatuses(ctx); err != nil {
			return err
		}
	}
	// Drain a reconnect request from before this stream: the listing
	// before it answered it, unless a herdr call failed after that listing
	// was installed (a start cut by a herdr restart). The view is then
	// unsynced, every reconcile waits for a listing, and one is due now,
	// not at the next resync.
	select {
	case <-m.kick:
	default:
	}
	if !m.view.isSynced() {
		return errReconnect
	}
	resync := m.o.Clock.NewTimer(m.o.ResyncPeriod)
	defer func() { resync.Stop() }()
	// Owned-set changes come in bursts (a fleet starting): resubscribe
	// ResubscribeDelay after the first change of a burst, covering it all.
	var settle clock.Timer
	var settleC <-chan time.Time
	defer func() {
		if settle != nil {
			settle.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-stream.Events():
			if !ok {
				if err := stream.Err(); err != nil {
					return err
				}
				return fmt.Errorf("%w: stream ended", herdr.ErrStreamDropped)
			}
			m.handleEvent(ev)
		case <-m.ownedChanged:
			if settle == nil {
				settle = m.o.Clock.NewTimer(m.o.ResubscribeDelay)
				settleC = settle.C()
			}
		case <-settleC:
			settle, settleC = nil, nil
			nsubs, npanes := m.subscriptions()
			if slices.Equal(npanes, panes) {
				continue
			}
			// Open the new stream before closing the old one so no event
			// falls between them.
			next, nextStop, err := m.subscribe(ctx, nsubs)
			if herdr.IsCode(err, "pane_not_found") {
				// A pane closed after the view was read; its close event
				// comes on the current stream, which keeps running. Try
				// again a settle delay later instead of dropping the
				// stream and reconnecting with backoff.
				settle = m.o.Clock.NewTimer(m.o.ResubscribeDelay)
				settleC = settle.C()
				continue
			}
			if err != nil {
				return fmt.Errorf("resubscribe to herdr events: %w", err)
			}
			stop()
			stream, stop, panes = next, nextStop, npanes
			m.setStreamPanes(panes)
			// Per-pane status events are not replayed: one the old stream
			// had not delivered yet, or one of a new pane before the new
			// stream covered it, would be lost. One agent listing after the
			// new stream started catches up on them.
			if err := m.catchUpStatuses(ctx); err != nil {
				return err
			}
		case <-m.kick:
			return errReconnect
		case <-m.sweep:
			if err := m.sweepOrphans(ctx); err != nil {
				return err
			}
		case <-resync.C():
			if err := m.resync(ctx); err != nil {
				return err
			}
			resync = m.o.Clock.NewTimer(m.o.ResyncPeriod)
		}
	}
}

// setStreamPanes records which panes the live event stream covers.
func (m *Manager) setStreamPanes(panes []string) {
	m.mu.Lock()
	m.streamPanes = panes
	m.mu.Unlock()
}

// subscribe opens an event stream whose acknowledgement must arrive within
// CallTimeout (a hanging herdr must not stall the observer); the stream then
// lives until stop is called or ctx ends.
func (m *Manager) subscribe(ctx context.Context, subs []herdr.Subscription) (*herdr.Stream, func(), error) {
	sctx, cancel := context.WithCancel(ctx)
	expired := time.AfterFunc(m.o.CallTimeout, cancel)
	stream, err := m.herdr.Subscribe(sctx, subs)
	if !expired.Stop() && err != nil {
		err = fmt.Errorf("%w (no acknowledgement within %s)", context.DeadlineExceeded, m.o.CallTimeout)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return stream, func() { stream.Close(); cancel() }, nil
}

// unreachable reports whether err means herdr did not answer properly
// (as opposed to answering with an error).
func unreachable(err error) bool {
	return errors.Is(err, herdr.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// subscriptions returns the subscription list and the sorted owned panes
// it covers.
func (m *Manager) subscriptions() ([]herdr.Subscription, []string) {
	subs := make([]herdr.Subscription, 0, len(globalSubscriptions))
	for _, t := range globalSubscriptions {
		subs = append(subs, herdr.Subscription{Type: t})
	}
	var panes []string
	for _, r := range m.own.all() {
		if p, _, alive, _ := m.view.pane(r.TerminalID, r.PaneID); alive {
			panes = append(panes, p.PaneID)
		}
	}
	slices.Sort(panes)
	for _, p := range panes {
		subs = append(subs, herdr.Subscription{Type: herdr.SubPaneAgentStatusChanged, PaneID: p})
	}
	return subs, panes
}

// resync lists herdr in full (a fixed number of calls: workspaces, the tabs
// of each workspace, panes, agents), installs the listing, closes orphaned
// fleetd tabs and queues every member. A failed or partial listing changes
// nothing.
func (m *Manager) resync(ctx context.Context) error {
	start := m.view.begin()
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	var l listing
	var err error
	if l.workspaces, err = m.herdr.ListWorkspaces(cctx); err != nil {
		return fmt.Errorf("list herdr workspaces: %w", err)
	}
	for _, w := range l.workspaces {
		tabs, err := m.herdr.ListTabs(cctx, w.WorkspaceID)
		if herdr.IsCode(err, "workspace_not_found") {
			continue // closed since the workspace list
		}
		if err != nil {
			return fmt.Errorf("list herdr tabs of %s: %w", w.WorkspaceID, err)
		}
		l.tabs = append(l.tabs, tabs...)
	}
	if l.panes, err = m.herdr.ListPanes(cctx, ""); err != nil {
		return fmt.Errorf("list herdr panes: %w", err)
	}
	if l.agents, err = m.herdr.ListAgents(cctx); err != nil {
		return fmt.Errorf("list herdr agents: %w", err)
	}
	m.view.install(start, l)
	m.setHerdrUp(true)
	for _, r := range m.own.all() {
		// The agent listing came after the pane listing: its status is
		// the fresher one.
		if p, a, alive, hasAgent := m.view.pane(r.TerminalID, r.PaneID); alive && hasAgent && a.AgentStatus != "" {
			m.view.setAgentStatus(p.PaneID, a.AgentStatus)
			m.observeAgentStatus(p.PaneID, string(a.AgentStatus))
		}
	}
	if err := m.sweepOrphans(ctx); err != nil {
		return err
	}
	m.enqueueAll()
	return nil
}

// catchUpStatuses lists herdr's agents once and passes every owned agent's
// status on, as a listing does (the sequence moves only on a change).
func (m *Manager) catchUpStatuses(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	defer cancel()
	agents, err := m.herdr.ListAgents(cctx)
	if err != nil {
		return fmt.Errorf("list herdr agents after resubscribing: %w", err)
	}
	for _, a := range agents {
		if _, owned := m.own.ownerOf(a.PaneID, ""); !owned || a.AgentStatus == "" {
			continue
		}
		m.view.setAgentStatus(a.PaneID, a.AgentStatus)
		m.observeAgentStatus(a.PaneID, string(a.AgentStatus))
	}
	return nil
}

// sweepOrphans closes tabs labelled as fleetd's that no ownership record
// claims: leftovers of a member deleted while fleetd was down, or of a
// crash between tab.create and the ownership write. Tabs without fleetd's
// label are never touched. Nothing is swept before the manifests are read.
func (m *Manager) sweepOrphans(ctx context.Context) error {
	if !m.store.Snapshot().Synced {
		return nil
	}
	m.ownMu.Lock()
	defer m.ownMu.Unlock()
	claimed := map[string]bool{}
	for _, r := range m.own.all() {
		claimed[r.TabID] = true
	}
	for _, t := range m.view.fleetdTabs() {
		if claimed[t.TabID] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		err := m.herdr.CloseTab(cctx, t.TabID)
		cancel()
		if err != nil && !herdr.IsCode(err, "tab_not_found") {
			return fmt.Errorf("close orphaned tab %s (%q): %w", t.TabID, t.Label, err)
		}
		m.view.removeTab(t.TabID)
		m.log.Info("closed orphaned fleetd tab", "tab", t.TabID, "label", t.Label,
			"member", strings.TrimPrefix(t.Label, TabLabelPrefix))
	}
	return nil
}

// handleEvent applies one herdr event to the view and queues the member it
// concerns.
func (m *Manager) handleEvent(ev herdr.Event) {
	switch ev.Kind {
	case herdr.EventWorkspaceCreated:
		if ev.Workspace != nil {
			m.view.setWorkspace(*ev.Workspace)
		}
	case herdr.EventWorkspaceClosed:
		m.view.removeWorkspace(ev.WorkspaceID)
		m.enqueueAll()
		return
	case herdr.EventTabCreated, herdr.EventPaneCreated:
		// Not applied: subscriptions start with replays of past events,
		// which would resurrect closed tabs and panes. fleetd inserts what
		// it creates itself; listings bring in the rest.
		return
	case herdr.EventTabClosed:
		m.view.removeTab(ev.TabID)
	case herdr.EventPaneMoved:
		if ev.PreviousPaneID != "" {
			m.view.removePane(ev.PreviousPaneID)
		}
		if ev.Pane != nil {
			m.view.setPane(*ev.Pane)
		}
	case herdr.EventPaneClosed, herdr.EventPaneExited:
		m.view.removePane(ev.PaneID)
	case herdr.EventPaneAgentDetected:
		if ev.Released {
			m.view.removeAgent(ev.PaneID)
		}
	case herdr.EventPaneAgentStatusChanged:
		m.view.setAgentStatus(ev.PaneID, ev.AgentStatus)
		m.observeAgentStatus(ev.PaneID, string(ev.AgentStatus))
	default:
		return
	}
	if name, ok := m.own.ownerOf(ev.PaneID, ev.TabID); ok {
		m.queue.Add(name)
	} else if ev.PreviousPaneID != "" {
		if name, ok := m.own.ownerOf(ev.PreviousPaneID, ""); ok {
			m.queue.Add(name)
		}
	}
}

// observeAgentStatus passes an owned pane's agent status to
// Options.OnAgentStatus with a sequence number that grows with every change
// of the agent's state, the way herdr's state_change_seq does (herdr's
// events carry none, so fleetd counts per pane itself). idle and done are
// one state: done only says nobody has looked at the pane since the agent
// finished, and turns to idle when someone does. Counting that flip as a
// change would look like the agent reacting to a prompt it has not read.
func (m *Manager) observeAgentStatus(paneID, status string) {
	if m.o.OnAgentStatus == nil || status == "" {
		return
	}
	name, ok := m.own.ownerOf(paneID, "")
	if !ok {
		return
	}
	m.mu.Lock()
	s := m.agentSeq[paneID]
	if s.seq == 0 || agentState(s.status) != agentState(status) {
		s.seq++
	}
	s.status = status
	m.agentSeq[paneID] = s
	m.mu.Unlock()
	m.o.OnAgentStatus(name, status, s.seq)
}

// agentState is herdr's internal agent state behind a public status.
func agentState(status string) string {
	if status == string(herdr.StatusDone) {
		return string(herdr.StatusIdle)
	}
	return status
}

func (m *Manager) forgetAgentSeq(paneID string) {
	m.mu.Lock()
	delete(m.agentSeq, paneID)
	m.mu.Unlock()
}

// herdrLost marks herdr unreachable: the view is unsynced until the next
// full listing, and the observer reconnects.
func (m *Manager) herdrLost(err error) {
	m.view.unsync()
	if m.setHerdrUp(false) {
		m.log.Warn("herdr unreachable; waiting for it, nothing is recreated meanwhile", "err", err)
		m.enqueueAll()
	}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// setHerdrUp records herdr's reachability and reports whether it changed.
func (m *Manager) setHerdrUp(up bool) bool {
	m.mu.Lock()
	changed := m.herdrUp != up
	m.herdrUp = up
	m.mu.Unlock()
	if up {
		m.metrics.herdrUp.Set(1)
	} else {
		m.metrics.herdrUp.Set(0)
	}
	if changed && up {
		m.log.Info("herdr reachable; fleetd's view of it is in sync")
		m.broadcast()
	}
	return changed
}
