package herdrcache

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unique"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Defaults for Options.
const (
	DefaultResyncPeriod          = 60 * time.Second
	DefaultCallTimeout           = 10 * time.Second
	DefaultReconnectBackoff      = 500 * time.Millisecond
	DefaultMaxReconnect          = 30 * time.Second
	DefaultResubscribeDelay      = 250 * time.Millisecond
	DefaultMissingPaneBackoff    = 100 * time.Millisecond
	DefaultMaxMissingPaneBackoff = 5 * time.Second
)

// Options configure a Cache. nil and zero fields mean the defaults.
type Options struct {
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Clock drives the resync, reconnect, resubscribe and retry timers;
	// default the wall clock.
	Clock clock.Clock
	// ResyncPeriod is how often herdr is listed in full as a safety net.
	ResyncPeriod time.Duration
	// CallTimeout bounds each listing call and a subscription's
	// acknowledgement.
	CallTimeout time.Duration
	// ReconnectBackoff and MaxReconnect bound the wait between attempts to
	// reach an unavailable herdr.
	ReconnectBackoff, MaxReconnect time.Duration
	// ResubscribeDelay is how long after a change of the watched panes the
	// subscription is renewed to cover them (one renewal per burst).
	// Lifecycle events are followed without interruption.
	ResubscribeDelay time.Duration
	// MissingPaneBackoff and MaxMissingPaneBackoff bound the wait between
	// attempts to subscribe to a watched pane that herdr has not shown (a
	// pane that does not exist yet).
	MissingPaneBackoff, MaxMissingPaneBackoff time.Duration
	// Metrics receives fleetd_herdr_info; nil means unexported series.
	Metrics *Metrics
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Clock == nil {
		out.Clock = clock.Real{}
	}
	if out.Metrics == nil {
		out.Metrics = NewMetrics(nil)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&out.ResyncPeriod, DefaultResyncPeriod)
	def(&out.CallTimeout, DefaultCallTimeout)
	def(&out.ReconnectBackoff, DefaultReconnectBackoff)
	def(&out.MaxReconnect, DefaultMaxReconnect)
	def(&out.ResubscribeDelay, DefaultResubscribeDelay)
	def(&out.MissingPaneBackoff, DefaultMissingPaneBackoff)
	def(&out.MaxMissingPaneBackoff, DefaultMaxMissingPaneBackoff)
	return out
}

// Handler receives what the cache observes, informer-style. Every field is
// optional. The funcs are called synchronously, in order, from the
// goroutine that made the change (Run's for everything herdr reports, a
// writer's for what it reported itself); they must not block and must not
// call the cache's write methods (lookups are fine).
type Handler struct {
	// OnEvent is called with every herdr event the cache applied (after
	// applying it): workspace created or closed, tab closed, pane moved,
	// closed or exited, agent detected or released, agent status changed;
	// and with herdr 0.9's worktree created, opened or removed, which
	// change nothing in the cache.
	// Events the cache does not apply (tab or pane created: subscriptions
	// start with replays of past ones) are not passed on.
	OnEvent func(ev herdr.Event)
	// OnAgentStatus is called with every agent status the cache observes
	// for a pane: a pane.agent_status_changed event, the listing after a
	// (re)sync or a (re)subscription (for watched panes), or a writer's
	// report that it started an agent. seq grows with every change of the
	// agent's state, per pane, from 1 (see the package documentation).
	// Empty statuses are not passed on.
	OnAgentStatus func(paneID, status string, seq uint64)
	// OnAgentRelaunched is called with a pane whose agent herdr relaunched
	// — a new process in the same pane, as after herdr restarted with
	// session restore — when the first full listing that shows it is
	// installed, before any status of the new agent is passed on. A live
	// handoff, which changes terminal ids too but keeps the agents running,
	// is not a relaunch. The evidence is what a handoff keeps (see the
	// package documentation).
	OnAgentRelaunched func(paneID string)
	// OnSynced is called after every full listing is installed: when herdr
	// (re)appears and at every resync.
	OnSynced func()
	// OnUnsynced is called when the cache stops being synced (herdr became
	// unreachable), once per loss.
	OnUnsynced func(err error)
}

// Pane is a pane as the cache knows it, with its agent if it has one.
type Pane struct {
	herdr.PaneInfo
	Agent    herdr.AgentInfo
	HasAgent bool
}

// Cache is the shared, read-only cache of herdr's state. Build it with New,
// run it with Run, read it with the lookups and handlers. Its writers (the
// member reconciler) report what they did to herdr themselves through
// WorkspaceCreated, TabCreated, AgentStarted, TabClosed and WorkspaceClosed.
type Cache struct {
	src  Source
	o    Options
	log  *slog.Logger
	view *view

	hmu        sync.Mutex
	handlers   []Handler
	watchers   map[uint64]func() []string
	nextWatch  uint64
	subscribed []string

	// statusMu serialises the numbering of agent statuses and their
	// delivery, so that handlers see every pane's seq grow in order.
	// statuses are the panes' numberings, sorted by pane id: a slice
	// rather than a map, as the view's indexes are (sortedindex.Index), at 32 B
	// a pane where a map of a fleet's panes took 80.
	statusMu sync.Mutex
	statuses []agentSeq

	// confirmed are watched panes herdr accepted in a subscription though
	// no listing has shown them yet. Only Run's goroutine uses it.
	confirmed map[string]bool
	// passed are the watched panes whose status was last passed on, sorted:
	// by a full read, a catch-up listing, or from the view when a pane the
	// stream already covered joined the watched set (passWatched). A
	// slice, not a set: it is kept between reads, and a fleet watches
	// every member's pane; it shares subscribed's where they hold the same
	// panes (setPassed). Only Run's goroutine uses it.
	passed []string
	// noSnapshot: herdr answered session.snapshot as a method it does not
	// know; list instead until herdr is lost. Only Run's goroutine uses it.
	noSnapshot bool
	// noWorktreeEvents: herdr refused the worktree event subscriptions
	// (herdr 0.8 has no worktrees); subscribe without them until herdr
	// is lost. Only Run's goroutine uses it.
	noWorktreeEvents bool

	// pong is herdr's last ping answer (version, protocol), for Herdr.
	pong atomic.Pointer[herdr.Pong]

	rewatch chan struct{} // the watched panes changed: resubscribe
	kick    chan struct{} // a herdr call failed: reconnect
	runOnce sync.Once
}

// agentSeq is a pane's numbering: the pane, the agent state of its last
// status (a handle, half a string's size: it is only compared) and its
// sequence.
type agentSeq struct {
	paneID string
	state  unique.Handle[string]
	seq    uint64
}

// New returns a Cache reading src. Nothing talks to herdr until Run.
func New(src Source, opts *Options) *Cache {
	o := opts.withDefaults()
	return &Cache{
		src:       src,
		o:         o,
		log:       o.Logger,
		view:      newView(),
		watchers:  map[uint64]func() []string{},
		confirmed: map[string]bool{},
		rewatch:   make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
	}
}

// Run fills the cache and keeps it current until ctx ends. It may be
// called once; it returns nil when ctx ends.
func (c *Cache) Run(ctx context.Context) error {
	err := errors.New("herdrcache: Run called twice")
	c.runOnce.Do(func() {
		err = nil
		c.run(ctx)
	})
	return err
}

// AddHandler registers h; it sees everything observed from then on.
func (c *Cache) AddHandler(h Handler) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.handlers = append(slices.Clip(c.handlers), h)
}

func (c *Cache) handlersNow() []Handler {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.handlers
}

// Watch asks the cache to follow the agent status of the panes panes
// returns (pane.agent_status_changed subscriptions, and the statuses of the
// agent listings). panes is called from Run's goroutine whenever the
// subscription is computed; it must not block and may use the lookups.
// Call Rewatch when its answer changes. A watched pane that herdr has not
// shown is retried with a capped backoff until it appears. The returned
// func stops watching.
func (c *Cache) Watch(panes func() []string) (unwatch func()) {
	c.hmu.Lock()
	id := c.nextWatch
	c.nextWatch++
	c.watchers[id] = panes
	c.hmu.Unlock()
	c.Rewatch()
	return func() {
		c.hmu.Lock()
		delete(c.watchers, id)
		c.hmu.Unlock()
		c.Rewatch()
	}
}

// Rewatch tells the cache that the panes a Watch func returns changed; the
// subscription is renewed ResubscribeDelay after the first call of a burst.
func (c *Cache) Rewatch() {
	select {
	case c.rewatch <- struct{}{}:
	default:
	}
}

// watched returns the union of the watched panes.
func (c *Cache) watched() map[string]bool {
	c.hmu.Lock()
	fns := make([]func() []string, 0, len(c.watchers))
	for _, f := range c.watchers {
		fns = append(fns, f)
	}
	c.hmu.Unlock()
	lists, n := make([][]string, len(fns)), 0
	for i, f := range fns {
		lists[i] = f()
		n += len(lists[i])
	}
	out := make(map[string]bool, n) // sized once, not grown pane by pane
	for _, l := range lists {
		for _, p := range l {
			if p != "" {
				out[p] = true
			}
		}
	}
	return out
}

// Herdr returns the version and protocol herdr's last ping answered (what
// fleetd_herdr_info shows); "" and 0 before one did.
func (c *Cache) Herdr() (version string, protocol int) {
	if p := c.pong.Load(); p != nil {
		return p.Version, p.Protocol
	}
	return "", 0
}

// Synced reports whether the cache holds a complete listing of a reachable
// herdr. An unsynced cache is never evidence that a pane is gone.
func (c *Cache) Synced() bool { return c.view.isSynced() }

// Subscribed returns the panes (sorted) whose agent status the live event
// stream covers.
func (c *Cache) Subscribed() []string {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return slices.Clone(c.subscribed)
}

func (c *Cache) setSubscribed(panes []string) {
	c.hmu.Lock()
	c.subscribed = panes
	c.hmu.Unlock()
}

// setPassed makes panes the passed panes, or the subscribed panes where
// they are the same, as they are once a fleet settles: one slice kept
// rather than two alike. Neither is changed in place; both are replaced.
func (c *Cache) setPassed(panes []string) {
	c.hmu.Lock()
	if slices.Equal(panes, c.subscribed) {
		panes = c.subscribed
	}
	c.hmu.Unlock()
	c.passed = panes
}

// Pane finds a pane by terminal id (stable across moves), else by pane id.
func (c *Cache) Pane(terminalID, paneID string) (Pane, bool) {
	p, a, ok, hasAgent := c.view.pane(terminalID, paneID)
	return Pane{PaneInfo: p, Agent: a, HasAgent: hasAgent}, ok
}

// WorkspaceByLabel returns the workspace labelled label (the lowest id if
// several are).
func (c *Cache) WorkspaceByLabel(label string) (herdr.WorkspaceInfo, bool) {
	return c.view.workspaceByLabel(label)
}

// TabsWithLabelPrefix returns the tabs whose label starts with prefix.
func (c *Cache) TabsWithLabelPrefix(prefix string) []herdr.TabInfo {
	return c.view.tabsWithLabelPrefix(prefix)
}

// Tab returns the tab with id tabID.
func (c *Cache) Tab(tabID string) (herdr.TabInfo, bool) { return c.view.tab(tabID) }

// TabPanes returns the panes of a tab.
func (c *Cache) TabPanes(tabID string) []herdr.PaneInfo { return c.view.tabPanes(tabID) }

// The writes below are a writer's report of what it did to herdr itself.
// They are stamped, so that a listing that began before them does not undo
// them, and they call no OnEvent handler: the writer knows.

// WorkspaceCreated records a workspace.create result.
func (c *Cache) WorkspaceCreated(r herdr.WorkspaceCreated) {
	c.view.setWorkspace(r.Workspace)
	c.view.setTab(r.Tab)
	c.view.setPane(r.RootPane)
}

// TabCreated records a tab.create result.
func (c *Cache) TabCreated(r herdr.TabCreated) {
	c.view.setTab(r.Tab)
	c.view.setPane(r.RootPane)
}

// AgentStarted records a started agent (keyed by a.PaneID) and passes its
// status to the OnAgentStatus handlers.
func (c *Cache) AgentStarted(a herdr.AgentInfo) {
	c.view.setAgent(a)
	c.observe(a.PaneID, string(a.AgentStatus))
}

// TabClosed records a closed tab and drops its panes (herdr sends no
// pane_closed for them).
func (c *Cache) TabClosed(tabID string) { c.view.removeTab(tabID) }

// WorkspaceClosed records that a workspace is gone (herdr answered
// workspace_not_found), with its tabs and panes.
func (c *Cache) WorkspaceClosed(workspaceID string) { c.view.removeWorkspace(workspaceID) }

// Invalidate tells the cache that a herdr call failed because herdr is
// unreachable: the cache is unsynced until its next full listing, and it
// reconnects now.
func (c *Cache) Invalidate(err error) { c.lost(err) }

// lost marks herdr unreachable: unsynced until the next full listing, and
// Run reconnects.
func (c *Cache) lost(err error) {
	if refused(err) {
		c.view.markRefused()
	}
	if c.view.unsync() {
		for _, h := range c.handlersNow() {
			if h.OnUnsynced != nil {
				h.OnUnsynced(err)
			}
		}
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// refused reports whether err is herdr's socket refusing a connection
// (missing, or nobody listening): herdr's process is gone. A live handoff
// never refuses one (the new binary takes the listening socket over); a
// full backlog (EAGAIN) is herdr busy, not gone.
func refused(err error) bool {
	te, ok := errors.AsType[*herdr.TransportError](err)
	return ok && te.Reason == herdr.ReasonUnavailable && !errors.Is(te.Err, syscall.EAGAIN)
}

// observe numbers one agent status of a pane and passes it on. The
// sequence grows with every change of the agent's state, the way herdr's
// state_change_seq does (herdr's events carry none, so the cache counts per
// pane itself). idle and done are one state: done only says nobody has
// looked at the pane since the agent finished, and turns to idle when
// someone does. Counting that flip as a change would look like the agent
// reacting to a prompt it has not read.
func (c *Cache) observe(paneID, status string) {
	if status == "" || paneID == "" {
		return
	}
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	i, ok := slices.BinarySearchFunc(c.statuses, paneID, func(s agentSeq, id string) int { return strings.Compare(s.paneID, id) })
	if !ok {
		c.statuses = slices.Insert(c.statuses, i, agentSeq{paneID: paneID})
	}
	s := &c.statuses[i]
	state := unique.Make(agentState(status))
	if s.seq == 0 || s.state != state {
		s.seq++
	}
	s.state = state
	seq := s.seq
	for _, h := range c.handlersNow() {
		if h.OnAgentStatus != nil {
			h.OnAgentStatus(paneID, status, seq)
		}
	}
}

// agentState is herdr's internal agent state behind a public status.
func agentState(status string) string {
	if status == string(herdr.StatusDone) {
		return string(herdr.StatusIdle)
	}
	return status
}

// pruneStatuses forgets the numbering of panes that are neither in the
// view nor watched: a pane id seen again later starts from 1.
func (c *Cache) pruneStatuses(watched map[string]bool) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	c.statuses = slices.DeleteFunc(c.statuses, func(s agentSeq) bool {
		return !watched[s.paneID] && !c.view.hasPane(s.paneID)
	})
}
