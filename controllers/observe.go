package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// The Manager reads herdr through the shared cache (package
// controllers/herdrcache). The handlers below map what the cache observes to
// member keys on the work queue; the orphan sweep runs after every listing.

// ownedPanes are the panes the cache watches for the Manager: every owned
// pane the cache knows, found by terminal id (stable across moves).
func (m *Manager) ownedPanes() []string {
	refs := m.own.panes()
	panes := make([]string, 0, len(refs))
	for _, r := range refs {
		if p, alive := m.cache.Pane(r.terminalID, r.paneID); alive {
			panes = append(panes, p.PaneID)
		}
	}
	return panes
}

// onEvent queues the member an applied herdr event concerns (every member
// when a workspace closed), and asks for a read of the worktree a worktree
// event is about.
func (m *Manager) onEvent(ev herdr.Event) {
	m.worktreeEvent(ev)
	if ev.Kind == herdr.EventWorkspaceClosed {
		m.enqueueAll()
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

// onAgentStatus passes an owned pane's agent status, numbered by the cache
// (idle and done are one state), to Options.OnAgentStatus, and queues a
// Ready member whose status shows another agent status, and a member that
// waits for its agent to be idle (graceful.go). An event queues its
// member anyway (onEvent), but a status that only a read brought — the
// agent listing after a resubscription catches up on changes no stream
// delivered — comes with no event, and the member would show the old status
// until the next resync (herdr 0.9 replays nothing to a new subscription).
// An idle agent's worktree is read again (a turn ended).
//
// Options.OnAgentStatus hears of the status before the member is queued:
// once the member's status shows it, whoever delivers messages knows it
// too (a message sent to a member shown working is queued, not typed
// because the messaging core still thought the agent idle).
func (m *Manager) onAgentStatus(paneID, status string, seq uint64) {
	name, ok := m.own.ownerOf(paneID, "")
	if !ok {
		return
	}
	if m.o.OnAgentStatus != nil {
		m.o.OnAgentStatus(name, status, seq)
	}
	m.noteAgentStatus(name, status)
	if m.showsOtherAgentStatus(name, status) || m.isWaiting(name) {
		m.queue.Add(name)
	}
	m.worktreeIdle(name, status)
}

// onAgentRelaunched: herdr relaunched the agent of a pane (a restart with
// session restore: a new process in the same pane, see
// herdrcache.Handler.OnAgentRelaunched). If the pane is a member's, the
// relaunch is reported and the member queued to adopt the pane.
func (m *Manager) onAgentRelaunched(paneID string) {
	name, ok := m.own.ownerOf(paneID, "")
	if !ok {
		return
	}
	p, _ := m.cache.Pane("", paneID)
	m.relaunched(name, paneID, p.TerminalID)
	m.queue.Add(name)
}

// relaunched reports that herdr relaunched member name's agent in pane
// paneID, now on terminal: what the old process was given is gone with it.
// Options.OnAgentRelaunched hears of it once per pane and terminal.
func (m *Manager) relaunched(name, paneID, terminal string) {
	m.mu.Lock()
	seen := m.relaunches[paneID] == terminal && terminal != ""
	m.relaunches[paneID] = terminal
	m.mu.Unlock()
	if seen {
		return
	}
	m.event(name, v1alpha1.EventNormal, reasonRelaunched,
		fmt.Sprintf("herdr relaunched the agent in pane %s (herdr restarted with session restore); what it was working on is lost", paneID))
	if m.o.OnAgentRelaunched != nil {
		m.o.OnAgentRelaunched(name, paneID)
	}
}

// showsOtherAgentStatus reports whether a Ready member's status, or that of
// a member whose agent's start waits at a dialog, shows an agent status
// other than status. Other starting members are left to their start, which
// reads the agent itself until it is ready; one at a dialog is not read
// again until something about its agent changes (awaitingInput), and an
// answer given before fleetd's subscription named the pane comes in a
// listing, not an event.
func (m *Manager) showsOtherAgentStatus(name, status string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stateLocked(name)
	return s != nil && (s.status.Phase == v1alpha1.PhaseReady || s.awaiting) && s.status.AgentStatus != status
}

// onSynced follows every full listing of herdr: the orphan sweep, and every
// member queued.
func (m *Manager) onSynced() {
	m.setHerdrUp(true)
	m.requestSweep()
	m.enqueueAll()
}

// HerdrSynced reports whether fleetd's view of herdr is in sync: herdr
// answered and the read after it (re)appeared was installed, with its
// relaunched agents reported (Options.OnAgentRelaunched) and its agents'
// statuses passed on (Options.OnAgentStatus). It is false while herdr is
// away, and from Run's start until that first read.
func (m *Manager) HerdrSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.herdrUp
}

// onUnsynced: herdr became unreachable; nothing is recreated until the
// cache lists it again.
func (m *Manager) onUnsynced(err error) {
	if m.setHerdrUp(false) {
		m.log.Warn("herdr unreachable; waiting for it, nothing is recreated meanwhile", "err", err)
		m.enqueueAll()
	}
}

func (m *Manager) requestSweep() {
	select {
	case m.sweep <- struct{}{}:
	default:
	}
}

// sweeper runs the orphan sweep whenever one is requested and the cache is
// synced (a request while herdr is away is answered by the listing that
// follows its return). A sweep that herdr refused is retried with backoff.
func (m *Manager) sweeper(ctx context.Context) {
	delay := m.o.ReconnectBackoff
	var retry clock.Timer
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.sweep:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
			retry, retryC = nil, nil
		}
		if !m.cache.Synced() {
			continue
		}
		err := m.sweepOrphans(ctx)
		if err == nil {
			delay = m.o.ReconnectBackoff
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if herdrcache.Unreachable(err) {
			m.callFailed(err) // the listing after herdr's return sweeps again
			continue
		}
		m.log.Warn("closing orphaned fleetd tabs failed; retrying", "err", err, "in", delay)
		retry = m.o.Clock.NewTimer(delay)
		retryC = retry.C()
		delay = min(delay*2, m.o.MaxReconnect)
	}
}

// sweepOrphans closes tabs labelled as fleetd's that no ownership record
// claims: leftovers of a member deleted while fleetd was down, of a crash
// between tab.create and the ownership write, or of a lost record; the
// credentials fleetd gave their panes are released with them. Tabs without fleetd's
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
	for _, t := range m.cache.TabsWithLabelPrefix(TabLabelPrefix) {
		if claimed[t.TabID] {
			continue
		}
		panes := m.cache.TabPanes(t.TabID)
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		err := m.herdr.CloseTab(cctx, t.TabID)
		cancel()
		if err != nil && !herdr.IsCode(err, "tab_not_found") {
			return fmt.Errorf("close orphaned tab %s (%q): %w", t.TabID, t.Label, err)
		}
		m.cache.TabClosed(t.TabID)
		member := strings.TrimPrefix(t.Label, TabLabelPrefix)
		// The record that named the panes' credentials is lost: release
		// those fleetd gave the member for exactly these panes.
		for _, p := range panes {
			if err := m.launcher.Release(launch.Pane{Member: member, PaneID: p.PaneID, TerminalID: p.TerminalID}); err != nil {
				m.log.Warn("launcher could not release an orphaned pane", "member", member, "pane", p.PaneID, "err", err)
			}
		}
		m.log.Info("closed orphaned fleetd tab", "tab", t.TabID, "label", t.Label, "member", member)
	}
	return nil
}

// setHerdrUp records herdr's reachability and reports whether it changed.
func (m *Manager) setHerdrUp(up bool) bool {
	m.mu.Lock()
	changed := m.herdrUp != up
	m.herdrUp = up
	if changed && !up {
		m.herdrDownAt = m.o.Clock.Now()
		select {
		case m.herdrDown <- struct{}{}:
		default: // one is pending already
		}
	}
	m.mu.Unlock()
	if up {
		m.metrics.herdrUp.Set(1)
	} else {
		m.metrics.herdrUp.Set(0)
	}
	if changed && up {
		m.log.Info("herdr reachable; fleetd's view of it is in sync")
		m.changed.Notify()
	}
	return changed
}
