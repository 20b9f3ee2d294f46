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
// watched pane it adds pane.agent_status_changed. Not tab.created and
// pane.created: the cache does not apply them (apply), and they are the
// largest events herdr sends, two for every tab a fleet starts.
var globalSubscriptions = []string{
	herdr.SubWorkspaceCreated, herdr.SubWorkspaceClosed,
	herdr.SubTabClosed,
	herdr.SubPaneClosed, herdr.SubPaneExited, herdr.SubPaneMoved,
	herdr.SubPaneAgentDetected,
}

// worktreeSubscriptions are herdr 0.9's worktree events, followed where
// herdr has them: herdr 0.8 refuses a subscription that names them
// (invalid_request), and the cache then subscribes without them until
// herdr is lost.
var worktreeSubscriptions = []string{herdr.SubWorktreeCreated, herdr.SubWorktreeOpened, herdr.SubWorktreeRemoved}

var errReconnect = errors.New("herdr call failed; reconnecting")

// run keeps the cache current: an events.subscribe stream, and a full read
// of herdr taken after the stream is acknowledged (herdr does not replay
// past events, so a read taken before subscribing would miss what changed
// in between) and every ResyncPeriod. A stream that ends however it ends
// (events_lost, a dropped connection) is followed by a new subscription and
// a new read. While herdr is unreachable it retries with exponential
// backoff and the cache stays unsynced.
func (c *Cache) run(ctx context.Context) {
	delay := c.o.ReconnectBackoff
	for ctx.Err() == nil {
		started := c.o.Clock.Now()
		err := c.checkProtocol(ctx)
		if err == nil {
			err = c.follow(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, herdr.ErrEventsLost) {
			// Not a loss of herdr: the cache stays synced (nothing in it is
			// evidence of anything new being gone) and the read after the
			// new subscription brings it up to date.
			c.log.Info("herdr lost events of fleetd's subscription; resubscribing and reading herdr again", "err", err)
		} else {
			c.log.Debug("herdr event stream ended; subscribing and reading herdr again", "err", err)
		}
		var sf *syncFailed
		if errors.As(err, &sf) || Unreachable(err) || errors.Is(err, errReconnect) {
			c.lost(err)
		}
		// A stream that lived a while resets the backoff; one that keeps
		// dropping at once must not become a tight loop.
		if c.o.Clock.Now().Sub(started) > c.o.MaxReconnect {
			delay = c.o.ReconnectBackoff
			if errors.Is(err, herdr.ErrEventsLost) {
				continue // herdr is there: resubscribe now, the cache is stale meanwhile
			}
		}
		if !clock.Sleep(ctx, c.o.Clock, delay) {
			return
		}
		delay = min(delay*2, c.o.MaxReconnect)
	}
}

// syncFailed is a read of herdr that failed: the cache is not current.
type syncFailed struct{ err error }

func (e *syncFailed) Error() string { return e.err.Error() }
func (e *syncFailed) Unwrap() error { return e.err }

// checkProtocol pings herdr when the cache is not synced (herdr (re)appears),
// records what it is in fleetd_herdr_info and reports a herdr speaking a
// protocol the client refuses instead of misreading it.
func (c *Cache) checkProtocol(ctx context.Context) error {
	if c.view.isSynced() {
		return nil
	}
	c.noSnapshot, c.noWorktreeEvents = false, false // a herdr that came back may be a newer one
	cctx, cancel := context.WithTimeout(ctx, c.o.CallTimeout)
	defer cancel()
	pong, err := c.src.Ping(cctx)
	if pong != nil {
		c.pong.Store(pong)
		c.o.Metrics.setHerdr(pong.Version, pong.Protocol)
	}
	if errors.Is(err, herdr.ErrProtocolMismatch) {
		c.log.Error("herdr speaks another protocol; fleetd will not drive it", "err", err)
	}
	if err == nil && pong.Newer() {
		c.log.Warn(pong.Warning(), "herdr_version", pong.Version, "protocol", pong.Protocol)
	}
	return err
}

// Unreachable reports whether err means herdr did not answer properly (as
// opposed to answering with an error): a failed call for which a writer
// should [Cache.Invalidate] the cache.
func Unreachable(err error) bool {
	return errors.Is(err, herdr.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// follow subscribes, reads herdr once the subscription is acknowledged,
// and then applies events until the stream ends, herdr fails or a periodic
// resync fails.
func (c *Cache) follow(ctx context.Context) error {
	f, err := c.startFollowing(ctx)
	if err != nil {
		return err
	}
	defer f.close()
	resync := c.o.Clock.NewTimer(c.o.ResyncPeriod)
	defer func() { resync.Stop() }()
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-f.stream.Events():
			if !ok {
				if err := f.stream.Err(); err != nil {
					return err
				}
				return fmt.Errorf("%w: stream ended", herdr.ErrStreamDropped)
			}
			f.saw(ev)
			c.apply(ev)
		case <-c.rewatch:
			f.settleLater()
		case <-f.settleC:
			f.settled(ctx)
		case r := <-f.resub.results():
			err = f.resubscribed(ctx, r)
		case l := <-f.listing.results():
			err = f.caughtUp(ctx, l)
		case <-f.probeC:
			err = f.probed(ctx)
		case <-c.kick:
			return errReconnect
		case <-resync.C():
			if err := f.finishListing(ctx); err != nil {
				return err
			}
			if err := c.resync(ctx); err != nil {
				return err
			}
			resync = c.o.Clock.NewTimer(c.o.ResyncPeriod)
		}
		if err != nil {
			return err
		}
	}
}

// follower is one subscription's state while follow applies its events:
// the stream and the panes it covers, the settle timer of a burst of
// watched-set changes, the renewal and the catch-up listing in flight, and
// the probe of watched panes herdr has not shown.
type follower struct {
	c       *Cache
	stream  Stream
	stop    func()
	panes   []string // sorted
	settle  clock.Timer
	settleC <-chan time.Time
	// resub is the renewal of the stream in flight (settled), nil when
	// none is: the current stream is applied until it is acknowledged.
	resub *call[renewal]
	// listing is the catch-up listing in flight after a renewal (swap),
	// nil when none is; seen are the panes whose status the new stream
	// brought since it began, which the listing does not overwrite.
	listing *call[agentListing]
	seen    map[string]bool
	probe   clock.Timer
	probeC  <-chan time.Time
	// probeDelay is the capped backoff of the probe.
	probeDelay time.Duration
}

// call is a herdr call of the follow loop run in a goroutine of its own, so
// that events keep being applied while herdr answers: a renewal of the
// stream or a catch-up listing, which take milliseconds per hundred panes.
// The loop receives its result from results and is its only reader.
type call[T any] struct {
	result chan T
	cancel context.CancelFunc
	done   chan struct{}
}

// goCall runs fn in a goroutine of its own until it returns or ctx ends.
func goCall[T any](ctx context.Context, fn func(context.Context) T) *call[T] {
	cctx, cancel := context.WithCancel(ctx)
	cl := &call[T]{result: make(chan T, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(cl.done)
		cl.result <- fn(cctx)
	}()
	return cl
}

// results is the channel the call's result arrives on; nil (never ready
// in a select) for no call.
func (cl *call[T]) results() <-chan T {
	if cl == nil {
		return nil
	}
	return cl.result
}

// abandon cancels the call and waits for its goroutine; the result, if it
// came, is returned with ok.
func (cl *call[T]) abandon() (r T, ok bool) {
	cl.cancel()
	<-cl.done
	select {
	case r = <-cl.result:
		return r, true
	default:
		return r, false
	}
}

// renewal is a renewed subscription's outcome: the stream covering panes,
// and the watched panes it leaves out (missing).
type renewal struct {
	stream          Stream
	stop            func()
	panes, missing  []string
	noWorktreeEvent bool // herdr refused the worktree events (subscribeWith)
	err             error
}

// agentListing is a catch-up listing's outcome.
type agentListing struct {
	agents []herdr.AgentInfo
	err    error
}

// startFollowing subscribes, reads herdr once the subscription is
// acknowledged and covers the watched panes that read shows. The caller
// closes the follower.
func (c *Cache) startFollowing(ctx context.Context) (*follower, error) {
	stream, stop, panes, err := c.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("subscribe to herdr events: %w", err)
	}
	f := &follower{c: c, stream: stream, stop: stop, panes: panes, probeDelay: c.o.MissingPaneBackoff}
	c.setSubscribed(panes)
	// The read comes after the acknowledgement: whatever changes from now
	// on is on the stream, whose events wait (in order) until the read is
	// installed and are applied after it.
	if err := c.resync(ctx); err != nil {
		f.close()
		return nil, &syncFailed{err}
	}
	// Drain a reconnect request from before this stream: the read above
	// answered it, unless a herdr call failed after it was installed (a
	// start cut by a herdr restart). The cache is then unsynced, every
	// reader waits for a read, and one is due now, not at the next resync.
	select {
	case <-c.kick:
	default:
	}
	if !c.view.isSynced() {
		f.close()
		return nil, errReconnect
	}
	if err := f.coverRead(ctx); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// coverRead covers the watched panes the first read showed that the first
// subscription could not (a first start knows no panes; a pane that closed
// made herdr refuse the whole list): now, not a settle delay later.
func (f *follower) coverRead(ctx context.Context) error {
	c := f.c
	_, npanes, missing := c.subscriptions()
	if !slices.Equal(npanes, f.panes) {
		next, nextStop, err := c.subscribe(ctx, subscriptionsFor(npanes))
		switch {
		case herdr.IsCode(err, "pane_not_found"):
			// One closed since the read; its close event is on this stream.
			c.Rewatch()
		case err != nil:
			return fmt.Errorf("resubscribe to herdr events: %w", err)
		default:
			f.swap(ctx, next, nextStop, npanes)
		}
	} else {
		// A pane may have joined the watched set since the read passed
		// the statuses on (a watcher adopting it at OnSynced).
		c.passWatched(f.panes)
	}
	f.armProbe(missing)
	return nil
}

// close stops the stream and the timers.
func (f *follower) close() {
	if f.resub != nil {
		if r, ok := f.resub.abandon(); ok && r.err == nil {
			r.stop()
		}
	}
	f.dropListing()
	f.stop()
	if f.settle != nil {
		f.settle.Stop()
	}
	if f.probe != nil {
		f.probe.Stop()
	}
}

// settleLater starts the settle delay of a burst of watched-set changes (a
// fleet starting), unless one runs: the resubscription ResubscribeDelay
// after the first change covers the whole burst.
func (f *follower) settleLater() {
	if f.settle == nil {
		f.settle = f.c.o.Clock.NewTimer(f.c.o.ResubscribeDelay)
		f.settleC = f.settle.C()
	}
}

// armProbe tries the watched panes herdr has not shown, missing, after
// the probe's backoff, unless a probe is due already.
func (f *follower) armProbe(missing []string) {
	if len(missing) > 0 && f.probe == nil {
		f.probe = f.c.o.Clock.NewTimer(f.probeDelay)
		f.probeC = f.probe.C()
	}
}

// swap replaces the stream by next, which covers npanes.
func (f *follower) swap(ctx context.Context, next Stream, nextStop func(), npanes []string) {
	f.stop()
	f.stream, f.stop, f.panes = next, nextStop, npanes
	f.c.setSubscribed(npanes)
	// Per-pane status events are not replayed: a status of a pane the
	// old stream did not cover, from before the new stream began, is on
	// no stream. One agent listing after the new stream started catches
	// up on them; the new stream's events are applied while it runs.
	f.dropListing()
	f.seen = map[string]bool{}
	f.listing = goCall(ctx, func(ctx context.Context) agentListing {
		cctx, cancel := context.WithTimeout(ctx, f.c.o.CallTimeout)
		defer cancel()
		agents, err := f.c.src.ListAgents(cctx)
		return agentListing{agents, err}
	})
}

// saw notes a pane whose status the stream brought while a catch-up
// listing runs: the stream is in order, the listing may be older.
func (f *follower) saw(ev herdr.Event) {
	if f.listing != nil && ev.Kind == herdr.EventPaneAgentStatusChanged {
		f.seen[ev.PaneID] = true
	}
}

// dropListing abandons the catch-up listing in flight, if any.
func (f *follower) dropListing() {
	if f.listing != nil {
		f.listing.abandon()
		f.listing, f.seen = nil, nil
	}
}

// finishListing waits for the catch-up listing in flight, if any, and
// applies it: a listing once begun is always taken, so that what a renewal
// costs herdr does not depend on when the next resync falls.
func (f *follower) finishListing(ctx context.Context) error {
	if f.listing == nil {
		return nil
	}
	return f.caughtUp(ctx, <-f.listing.results())
}

// caughtUp applies a catch-up listing (catchUp).
func (f *follower) caughtUp(ctx context.Context, l agentListing) error {
	seen := f.seen
	f.listing, f.seen = nil, nil
	if l.err != nil {
		return fmt.Errorf("list herdr agents after resubscribing: %w", l.err)
	}
	return f.c.catchUp(ctx, l.agents, seen)
}

// settled renews the stream for the watched set as it is once a burst of
// changes settled: the new stream is opened before the old one closes, so
// that no event falls between them, and the old one is applied until the
// new one is acknowledged (resubscribed). One renewal runs at a time; a
// burst that settles meanwhile is looked at a settle delay later.
func (f *follower) settled(ctx context.Context) {
	c := f.c
	f.settle, f.settleC = nil, nil
	if f.resub != nil {
		f.settleLater()
		return
	}
	nsubs, npanes, nmissing := c.subscriptions()
	if slices.Equal(npanes, f.panes) {
		c.passWatched(f.panes)
		f.armProbe(nmissing)
		return
	}
	worktrees := !c.noWorktreeEvents
	f.resub = goCall(ctx, func(ctx context.Context) renewal {
		next, nextStop, refused, err := c.subscribeWith(ctx, nsubs, worktrees)
		return renewal{stream: next, stop: nextStop, panes: npanes, missing: nmissing, noWorktreeEvent: refused, err: err}
	})
}

// resubscribed takes a renewal's outcome (settled).
func (f *follower) resubscribed(ctx context.Context, r renewal) error {
	c := f.c
	f.resub = nil
	if r.noWorktreeEvent {
		c.noWorktreeEvents = true
	}
	if herdr.IsCode(r.err, "pane_not_found") {
		// A pane closed after the cache was read; its close event comes
		// on the current stream, which keeps running. Try again a settle
		// delay later instead of dropping the stream and reconnecting
		// with backoff. Panes only a subscription had confirmed are tried
		// as missing again.
		clear(c.confirmed)
		f.settleLater()
		return nil
	}
	if r.err != nil {
		return fmt.Errorf("resubscribe to herdr events: %w", r.err)
	}
	f.swap(ctx, r.stream, r.stop, r.panes)
	f.armProbe(r.missing)
	return nil
}

// probed tries to subscribe to the watched panes herdr has not shown yet,
// with a capped backoff while herdr does not know them.
func (f *follower) probed(ctx context.Context) error {
	c := f.c
	f.probe, f.probeC = nil, nil
	if f.resub != nil {
		// The renewal in flight covers what it can; probe after it.
		f.probe = c.o.Clock.NewTimer(f.probeDelay)
		f.probeC = f.probe.C()
		return nil
	}
	_, npanes, nmissing := c.subscriptions()
	if len(nmissing) == 0 {
		c.Rewatch() // they appeared in a listing meanwhile
		return nil
	}
	try := append(slices.Clone(npanes), nmissing...)
	slices.Sort(try)
	next, nextStop, err := c.subscribe(ctx, subscriptionsFor(try))
	if herdr.IsCode(err, "pane_not_found") {
		c.log.Debug("watched pane not in herdr yet; retrying", "panes", nmissing, "in", f.probeDelay)
		f.probeDelay = min(2*f.probeDelay, c.o.MaxMissingPaneBackoff)
		f.armProbe(nmissing)
		return nil
	}
	if err != nil {
		return fmt.Errorf("subscribe to watched panes %v: %w", nmissing, err)
	}
	for _, p := range nmissing {
		c.confirmed[p] = true
	}
	f.probeDelay = c.o.MissingPaneBackoff
	f.swap(ctx, next, nextStop, try)
	return nil
}

// open opens the stream a (re)subscription starts with: lifecycle events
// and the status of every watched pane. Which watched panes still exist is
// not known before the read that follows, and herdr refuses a whole list
// for one unknown pane, so a refused list is followed by one with the
// lifecycle events only; the read then shows which panes to add.
func (c *Cache) open(ctx context.Context) (Stream, func(), []string, error) {
	panes := sortedKeys(c.watched())
	stream, stop, err := c.subscribe(ctx, subscriptionsFor(panes))
	if herdr.IsCode(err, "pane_not_found") && len(panes) > 0 {
		panes = nil
		stream, stop, err = c.subscribe(ctx, subscriptionsFor(nil))
	}
	return stream, stop, panes, err
}

// subscribe opens an event stream whose acknowledgement must arrive within
// CallTimeout (a hanging herdr must not stall the cache); the stream then
// lives until stop is called or ctx ends. The deadline is wall-clock time,
// like the context deadlines of the listing calls: it bounds real I/O, and
// on an injected fake clock a test's jump of a resync period would cancel a
// subscription that is merely in flight.
//
// The worktree events are added to subs where herdr has them; a herdr
// that refuses them is subscribed to again without them.
func (c *Cache) subscribe(ctx context.Context, subs []herdr.Subscription) (Stream, func(), error) {
	stream, stop, refused, err := c.subscribeWith(ctx, subs, !c.noWorktreeEvents)
	if refused {
		c.noWorktreeEvents = true
	}
	return stream, stop, err
}

// subscribeWith is subscribe without the cache's own state, for a renewal's
// goroutine (settled): worktrees says whether to ask for the worktree
// events, refused that herdr refused them and the subscription was made
// without them. The worktree events go in subs' spare capacity, which
// subscriptionsFor leaves for them: a list of a thousand panes is ~90 KB,
// which a copy would double while herdr acknowledges; subs itself, the
// list without them, is what a refusal sends.
func (c *Cache) subscribeWith(ctx context.Context, subs []herdr.Subscription, worktrees bool) (_ Stream, _ func(), refused bool, _ error) {
	if worktrees {
		all := subs
		for _, t := range worktreeSubscriptions {
			all = append(all, herdr.Subscription{Type: t})
		}
		stream, stop, err := c.subscribeOnce(ctx, all)
		if !herdr.IsCode(err, "invalid_request") {
			return stream, stop, false, err
		}
		c.log.Info("herdr refuses worktree event subscriptions (herdr 0.8 has no worktrees); following the other events", "err", err)
	}
	stream, stop, err := c.subscribeOnce(ctx, subs)
	return stream, stop, worktrees, err
}

// subscribeOnce is one subscription of subscribe.
func (c *Cache) subscribeOnce(ctx context.Context, subs []herdr.Subscription) (Stream, func(), error) {
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

// subscriptionsFor returns the lifecycle subscriptions and those of the
// status of each of panes, with room to spare for the worktree events
// (subscribeWith).
func subscriptionsFor(panes []string) []herdr.Subscription {
	subs := make([]herdr.Subscription, 0, len(globalSubscriptions)+len(panes)+len(worktreeSubscriptions))
	for _, t := range globalSubscriptions {
		subs = append(subs, herdr.Subscription{Type: t})
	}
	for _, p := range panes {
		subs = append(subs, herdr.Subscription{Type: herdr.SubPaneAgentStatusChanged, PaneID: p})
	}
	return subs
}

// resync reads herdr in full (session.snapshot, or a fixed number of
// listings: workspaces, the tabs of each workspace, panes, agents),
// installs the read, tells the OnAgentRelaunched handlers of the panes whose
// agent herdr relaunched, passes the watched panes' statuses on and tells the
// OnSynced handlers. A failed or partial read changes nothing.
func (c *Cache) resync(ctx context.Context) error {
	start := c.view.begin()
	cctx, cancel := context.WithTimeout(ctx, c.o.CallTimeout)
	defer cancel()
	l, err := c.read(cctx)
	if err != nil {
		return err
	}
	again := c.view.install(start, l)
	clear(c.confirmed) // the read shows what exists
	// Before any status of the relaunched agents is passed on: a status
	// handler must not take the new agent for the one it knew.
	for _, p := range again {
		for _, h := range c.handlersNow() {
			if h.OnAgentRelaunched != nil {
				h.OnAgentRelaunched(p)
			}
		}
	}
	watched := c.watched()
	c.pruneStatuses(watched)
	c.setPassed(sortedKeys(watched))
	for _, p := range c.passed {
		// The agents are read with or after the panes: their status is
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

// read takes one full read of herdr: session.snapshot where the source and
// herdr have it, else the listings.
func (c *Cache) read(ctx context.Context) (listing, error) {
	if s, ok := c.src.(Snapshotter); ok && !c.noSnapshot {
		snap, err := s.Snapshot(ctx)
		if err == nil {
			return listing{workspaces: snap.Workspaces, tabs: snap.Tabs, panes: snap.Panes, agents: snap.Agents}, nil
		}
		if !herdr.IsCode(err, "unknown_method") && !herdr.IsCode(err, "not_implemented") && !herdr.IsCode(err, "invalid_request") {
			return listing{}, fmt.Errorf("read herdr's session snapshot: %w", err)
		}
		// Until herdr goes away (a restarted herdr may be a newer one).
		c.noSnapshot = true
		c.log.Info("herdr has no session.snapshot; listing workspaces, tabs, panes and agents instead", "err", err)
	}
	var l listing
	var err error
	if l.workspaces, err = c.src.ListWorkspaces(ctx); err != nil {
		return l, fmt.Errorf("list herdr workspaces: %w", err)
	}
	for _, w := range l.workspaces {
		tabs, err := c.src.ListTabs(ctx, w.WorkspaceID)
		if herdr.IsCode(err, "workspace_not_found") {
			continue // closed since the workspace list
		}
		if err != nil {
			return l, fmt.Errorf("list herdr tabs of %s: %w", w.WorkspaceID, err)
		}
		l.tabs = append(l.tabs, tabs...)
	}
	if l.panes, err = c.src.ListPanes(ctx, ""); err != nil {
		return l, fmt.Errorf("list herdr panes: %w", err)
	}
	if l.agents, err = c.src.ListAgents(ctx); err != nil {
		return l, fmt.Errorf("list herdr agents: %w", err)
	}
	return l, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// catchUp passes on the status of every watched agent in a catch-up
// listing taken after the stream was renewed (swap), as a read does (the
// sequence moves only on a change), except for the panes in seen: the new
// stream brought a status of theirs meanwhile, which is in order and may
// be newer than the listing. An agent whose pane the view shows under
// another terminal id says herdr handed off or restarted while the stream
// was replaced — the old stream's end, which says so, is not read once it
// is replaced — so herdr is read in full instead.
func (c *Cache) catchUp(ctx context.Context, agents []herdr.AgentInfo, seen map[string]bool) error {
	for _, a := range agents {
		if p, _, ok, _ := c.view.pane("", a.PaneID); ok && a.TerminalID != "" && a.TerminalID != p.TerminalID {
			c.log.Debug("herdr gave a pane a new terminal id while the cache resubscribed; reading herdr again",
				"pane", a.PaneID, "terminal", a.TerminalID, "was", p.TerminalID)
			if err := c.resync(ctx); err != nil {
				return &syncFailed{err}
			}
			return nil
		}
	}
	watched := c.watched()
	for _, a := range agents {
		if !watched[a.PaneID] || a.AgentStatus == "" || seen[a.PaneID] {
			continue
		}
		c.view.setAgentStatus(a.PaneID, a.AgentStatus)
		c.observe(a.PaneID, string(a.AgentStatus))
	}
	c.setPassed(sortedKeys(watched))
	return nil
}

// passWatched passes on, from the view, the agent status of each pane of
// covered (those the current stream covers) that is watched now but was
// not when statuses were last passed on. No event brings the status of
// such a pane: it may not change for a long while (a relaunched agent
// that came up idle before the cache read herdr, in a pane a watcher
// adopts under its new terminal id only after the read), and the stream,
// which already covered the pane, is not replaced, so no catch-up listing
// is taken either. The view is current for a covered pane: the read plus
// the stream's events. A status seen again does not move the numbering.
// covered is sorted, as a follower's panes always are.
func (c *Cache) passWatched(covered []string) {
	watched := c.watched()
	next := make([]string, 0, len(covered))
	for _, p := range covered {
		if !watched[p] {
			continue
		}
		next = append(next, p)
		if _, ok := slices.BinarySearch(c.passed, p); ok {
			continue
		}
		if pn, ok := c.Pane("", p); ok && pn.HasAgent && pn.Agent.AgentStatus != "" {
			c.observe(p, string(pn.Agent.AgentStatus))
		}
	}
	c.setPassed(next) // in covered's order: sorted
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
		// Not applied (and not subscribed to): herdr 0.8's subscriptions
		// start with replays of past events, which would resurrect closed
		// tabs and panes. Writers report what they create themselves;
		// listings bring in the rest.
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
		c.view.closePane(ev.PaneID)
		delete(c.confirmed, ev.PaneID)
	case herdr.EventPaneAgentDetected:
		if ev.Released {
			c.view.removeAgent(ev.PaneID)
		}
	case herdr.EventPaneAgentStatusChanged:
		c.view.setAgentStatus(ev.PaneID, ev.AgentStatus)
		c.observe(ev.PaneID, string(ev.AgentStatus))
	case herdr.EventWorktreeCreated, herdr.EventWorktreeOpened, herdr.EventWorktreeRemoved:
		// Nothing of the view: the workspace events that come with
		// them change it. Passed on for the worktrees' readers.
	default:
		return
	}
	for _, h := range c.handlersNow() {
		if h.OnEvent != nil {
			h.OnEvent(ev)
		}
	}
}
