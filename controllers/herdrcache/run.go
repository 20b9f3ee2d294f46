package herdrcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// globalSubscriptions are the lifecycle events the cache follows. Per
// watched pane it adds pane.agent_status_changed.
var globalSubscriptions = []string{
	herdr.SubWorkspaceCreated, herdr.SubWorkspaceClosed,
	herdr.SubTabCreated, herdr.SubTabClosed,
	herdr.SubPaneCreated, herdr.SubPaneClosed, herdr.SubPaneExited, herdr.SubPaneMoved,
	herdr.SubPaneAgentDetected,
}

var errReconnect = errors.New("herdr call failed; reconnecting")

// run keeps the cache current: a full listing whenever herdr (re)appears
// and every ResyncPeriod, and an events.subscribe stream in between,
// resubscribed when the watched panes change or the stream drops. While
// herdr is unreachable it retries with exponential backoff and the cache
// stays unsynced.
func (c *Cache) run(ctx context.Context) {
	delay := c.o.ReconnectBackoff
	for ctx.Err() == nil {
		err := c.checkProtocol(ctx)
		if err == nil {
			err = c.resync(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.lost(err)
			if !c.sleep(ctx, delay) {
				return
			}
			delay = min(delay*2, c.o.MaxReconnect)
			continue
		}
		started := c.o.Clock.Now()
		err = c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug("herdr event stream ended; listing again", "err", err)
		if Unreachable(err) || errors.Is(err, errReconnect) {
			c.lost(err)
		}
		// A stream that lived a while resets the backoff; one that keeps
		// dropping at once must not become a tight loop.
		if c.o.Clock.Now().Sub(started) > c.o.MaxReconnect {
			delay = c.o.ReconnectBackoff
		}
		if !c.sleep(ctx, delay) {
			return
		}
		delay = min(delay*2, c.o.MaxReconnect)
	}
}

// checkProtocol pings herdr when the cache is not synced, so that a herdr
// speaking another protocol is reported instead of misread.
func (c *Cache) checkProtocol(ctx context.Context) error {
	if c.view.isSynced() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.o.CallTimeout)
	defer cancel()
	pong, err := c.src.Ping(cctx)
	if errors.Is(err, herdr.ErrProtocolMismatch) {
		c.log.Error("herdr speaks another protocol; fleetd will not drive it", "err", err)
	}
	if err == nil && pong.Newer() {
		c.log.Warn(pong.Warning(), "version", pong.Version, "protocol", pong.Protocol)
	}
	return err
}

// sleep waits d on the cache's clock; false if ctx ended first.
func (c *Cache) sleep(ctx context.Context, d time.Duration) bool {
	t := c.o.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// Unreachable reports whether err means herdr did not answer properly (as
// opposed to answering with an error): a failed call for which a writer
// should [Cache.Invalidate] the cache.
func Unreachable(err error) bool {
	return errors.Is(err, herdr.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// follow reads events until the stream ends, herdr fails or a periodic
// resync fails.
func (c *Cache) follow(ctx context.Context) error {
	subs, panes, missing := c.subscriptions()
	stream, stop, err := c.subscribe(ctx, subs)
	if err != nil {
		return fmt.Errorf("subscribe to herdr events: %w", err)
	}
	defer func() { stop() }()
	c.setSubscribed(panes)
	// Per-pane status events are not replayed: a change between the
	// listing that came before and this subscription would be lost (after
	// a restart, the adopted agents' statuses would stay stale until the
	// next resync). One agent listing now that the stream runs catches up.
	if len(panes) > 0 {
		if err := c.catchUp(ctx); err != nil {
			return err
		}
	}
	// Drain a reconnect request from before this stream: the listing
	// before it answered it, unless a herdr call failed after that listing
	// was installed (a start cut by a herdr restart). The cache is then
	// unsynced, every reader waits for a listing, and one is due now, not
	// at the next resync.
	select {
	case <-c.kick:
	default:
	}
	if !c.view.isSynced() {
		return errReconnect
	}
	resync := c.o.Clock.NewTimer(c.o.ResyncPeriod)
	defer func() { resync.Stop() }()
	// Watched-set changes come in bursts (a fleet starting): resubscribe
	// ResubscribeDelay after the first change of a burst, covering it all.
	var settle, probe clock.Timer
	var settleC, probeC <-chan time.Time
	defer func() {
		if settle != nil {
			settle.Stop()
		}
		if probe != nil {
			probe.Stop()
		}
	}()
	// Watched panes herdr has not shown are tried with a capped backoff.
	probeDelay := c.o.MissingPaneBackoff
	armProbe := func(missing []string) {
		if len(missing) > 0 && probe == nil {
			probe = c.o.Clock.NewTimer(probeDelay)
			probeC = probe.C()
		}
	}
	armProbe(missing)
	// swap replaces the stream by next, which covers npanes.
	swap := func(next Stream, nextStop func(), npanes []string) error {
		stop()
		stream, stop, panes = next, nextStop, npanes
		c.setSubscribed(panes)
		// Per-pane status events are not replayed: one the old stream had
		// not delivered yet, or one of a new pane before the new stream
		// covered it, would be lost. One agent listing after the new stream
		// started catches up on them.
		return c.catchUp(ctx)
	}
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
			c.apply(ev)
		case <-c.rewatch:
			if settle == nil {
				settle = c.o.Clock.NewTimer(c.o.ResubscribeDelay)
				settleC = settle.C()
			}
		case <-settleC:
			settle, settleC = nil, nil
			nsubs, npanes, nmissing := c.subscriptions()
			if slices.Equal(npanes, panes) {
				armProbe(nmissing)
				continue
			}
			// Open the new stream before closing the old one so no event
			// falls between them.
			next, nextStop, err := c.subscribe(ctx, nsubs)
			if herdr.IsCode(err, "pane_not_found") {
				// A pane closed after the cache was read; its close event
				// comes on the current stream, which keeps running. Try
				// again a settle delay later instead of dropping the
				// stream and reconnecting with backoff. Panes only a
				// subscription had confirmed are tried as missing again.
				clear(c.confirmed)
				settle = c.o.Clock.NewTimer(c.o.ResubscribeDelay)
				settleC = settle.C()
				continue
			}
			if err != nil {
				return fmt.Errorf("resubscribe to herdr events: %w", err)
			}
			if err := swap(next, nextStop, npanes); err != nil {
				return err
			}
			armProbe(nmissing)
		case <-probeC:
			probe, probeC = nil, nil
			_, npanes, nmissing := c.subscriptions()
			if len(nmissing) == 0 {
				c.Rewatch() // they appeared in a listing meanwhile
				continue
			}
			try := append(slices.Clone(npanes), nmissing...)
			slices.Sort(try)
			next, nextStop, err := c.subscribe(ctx, subscriptionsFor(try))
			if herdr.IsCode(err, "pane_not_found") {
				c.log.Debug("watched pane not in herdr yet; retrying", "panes", nmissing, "in", probeDelay)
				probeDelay = min(2*probeDelay, c.o.MaxMissingPaneBackoff)
				armProbe(nmissing)
				continue
			}
			if err != nil {
				return fmt.Errorf("subscribe to watched panes %v: %w", nmissing, err)
			}
			for _, p := range nmissing {
				c.confirmed[p] = true
			}
			probeDelay = c.o.MissingPaneBackoff
			if err := swap(next, nextStop, try); err != nil {
				return err
			}
		case <-c.kick:
			return errReconnect
		case <-resync.C():
			if err := c.resync(ctx); err != nil {
				return err
			}
			resync = c.o.Clock.NewTimer(c.o.ResyncPeriod)
		}
	}
}

// subscribe opens an event stream whose acknowledgement must arrive within
// CallTimeout (a hanging herdr must not stall the cache); the stream then
// lives until stop is called or ctx ends. The deadline is wall-clock time,
// like the context deadlines of the listing calls: it bounds real I/O, and
// on an injected fake clock a test's jump of a resync period would cancel a
// subscription that is merely in flight.
func (c *Cache) subscribe(ctx context.Context, subs []herdr.Subscription) (Stream, func(), error) {
	sctx, cancel := context.WithCancel(ctx)
	expired := time.AfterFunc(c.o.CallTimeout, cancel)
	stream, err := c.src.Subscribe(sctx, subs)
	if !expired.Stop() && err != nil {
		err = fmt.Errorf("%w (no acknowledgement within %s)", context.DeadlineExceeded, c.o.CallTimeout)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return stream, func() { stream.Close(); cancel() }, nil
}

// subscriptions returns the subscription list, the sorted watched panes it
// covers (those herdr has shown) and the sorted watched panes it leaves
// out (herdr has not shown them). It prunes the status numbering of panes
// nobody watches any more.
func (c *Cache) subscriptions() (subs []herdr.Subscription, panes, missing []string) {
	watched := c.watched()
	for p := range watched {
		if c.view.hasPane(p) || c.confirmed[p] {
			panes = append(panes, p)
		} else {
			missing = append(missing, p)
		}
	}
	slices.Sort(panes)
	slices.Sort(missing)
	c.pruneStatuses(watched)
	return subscriptionsFor(panes), panes, missing
}

func subscriptionsFor(panes []string) []herdr.Subscription {
	subs := make([]herdr.Subscription, 0, len(globalSubscriptions)+len(panes))
	for _, t := range globalSubscriptions {
		subs = append(subs, herdr.Subscription{Type: t})
	}
	for _, p := range panes {
		subs = append(subs, herdr.Subscription{Type: herdr.SubPaneAgentStatusChanged, PaneID: p})
	}
	return subs
}

// resync lists herdr in full (a fixed number of calls: workspaces, the tabs
// of each workspace, panes, agents), installs the listing, passes the
// watched panes' statuses on and tells the OnSynced handlers. A failed or
// partial listing changes nothing.
func (c *Cache) resync(ctx context.Context) error {
	start := c.view.begin()
	cctx, cancel := context.WithTimeout(ctx, c.o.CallTimeout)
	defer cancel()
	var l listing
	var err error
	if l.workspaces, err = c.src.ListWorkspaces(cctx); err != nil {
		return fmt.Errorf("list herdr workspaces: %w", err)
	}
	for _, w := range l.workspaces {
		tabs, err := c.src.ListTabs(cctx, w.WorkspaceID)
		if herdr.IsCode(err, "workspace_not_found") {
			continue // closed since the workspace list
		}
		if err != nil {
			return fmt.Errorf("list herdr tabs of %s: %w", w.WorkspaceID, err)
		}
		l.tabs = append(l.tabs, tabs...)
	}
	if l.panes, err = c.src.ListPanes(cctx, ""); err != nil {
		return fmt.Errorf("list herdr panes: %w", err)
	}
	if l.agents, err = c.src.ListAgents(cctx); err != nil {
		return fmt.Errorf("list herdr agents: %w", err)
	}
	c.view.install(start, l)
	clear(c.confirmed) // the listing shows what exists
	watched := c.watched()
	c.pruneStatuses(watched)
	for _, p := range sortedKeys(watched) {
		// The agent listing came after the pane listing: its status is
		// the fresher one.
		if pn, ok := c.Pane("", p); ok && pn.HasAgent && pn.Agent.AgentStatus != "" {
			c.view.setAgentStatus(pn.PaneID, pn.Agent.AgentStatus)
			c.observe(pn.PaneID, string(pn.Agent.AgentStatus))
		}
	}
	for _, h := range c.handlersNow() {
		if h.OnSynced != nil {
			h.OnSynced()
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// catchUp lists herdr's agents once and passes every watched agent's
// status on, as a listing does (the sequence moves only on a change).
func (c *Cache) catchUp(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.o.CallTimeout)
	defer cancel()
	agents, err := c.src.ListAgents(cctx)
	if err != nil {
		return fmt.Errorf("list herdr agents after resubscribing: %w", err)
	}
	watched := c.watched()
	for _, a := range agents {
		if !watched[a.PaneID] || a.AgentStatus == "" {
			continue
		}
		c.view.setAgentStatus(a.PaneID, a.AgentStatus)
		c.observe(a.PaneID, string(a.AgentStatus))
	}
	return nil
}

// apply applies one herdr event to the cache and passes it on.
func (c *Cache) apply(ev herdr.Event) {
	switch ev.Kind {
	case herdr.EventWorkspaceCreated:
		if ev.Workspace != nil {
			c.view.setWorkspace(*ev.Workspace)
		}
	case herdr.EventWorkspaceClosed:
		c.view.removeWorkspace(ev.WorkspaceID)
	case herdr.EventTabCreated, herdr.EventPaneCreated:
		// Not applied: subscriptions start with replays of past events,
		// which would resurrect closed tabs and panes. Writers report
		// what they create themselves; listings bring in the rest.
		return
	case herdr.EventTabClosed:
		c.view.removeTab(ev.TabID)
	case herdr.EventPaneMoved:
		if ev.PreviousPaneID != "" {
			c.view.removePane(ev.PreviousPaneID)
			delete(c.confirmed, ev.PreviousPaneID)
		}
		if ev.Pane != nil {
			c.view.setPane(*ev.Pane)
		}
	case herdr.EventPaneClosed, herdr.EventPaneExited:
		c.view.removePane(ev.PaneID)
		delete(c.confirmed, ev.PaneID)
	case herdr.EventPaneAgentDetected:
		if ev.Released {
			c.view.removeAgent(ev.PaneID)
		}
	case herdr.EventPaneAgentStatusChanged:
		c.view.setAgentStatus(ev.PaneID, ev.AgentStatus)
		c.observe(ev.PaneID, string(ev.AgentStatus))
	default:
		return
	}
	for _, h := range c.handlersNow() {
		if h.OnEvent != nil {
			h.OnEvent(ev)
		}
	}
}
