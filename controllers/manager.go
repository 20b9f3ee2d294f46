package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/controllers/workqueue"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Manager runs the member controller: it watches the store and the herdr
// cache, and drives herdr until every member's pane and agent match its
// spec.
type Manager struct {
	o        Options
	log      *slog.Logger
	store    store.Store
	herdr    herdrWriter
	pinger   pinger // the same client: watchHerdr's ping while herdr is away
	cache    *herdrcache.Cache
	launcher launch.Launcher
	metrics  *Metrics
	queue    *workqueue.Queue
	own      *ownBook
	wt       *worktrees // members' git worktrees (worktree.go)
	memory   *memoryBook
	revs     rollout.Store // profiles' and members' revisions, profiles' halts
	rolls    *rollouts     // the profiles' rollouts (rollout.go)
	digests  digests       // refsHash of the objects a reconcile reads (rollout.go)

	// ownMu keeps the orphan sweep (write lock) from running between a
	// tab.create and the write of its ownership record (read lock, so that
	// members are created concurrently).
	ownMu   sync.RWMutex
	wsMu    sync.Mutex                   // serialises workspace lookup-or-create, and closing
	created map[string]*CreatedWorkspace // by workspace id: the workspaces fleetd created, never changed; wsMu

	mu sync.Mutex
	// states: each member's state and runtime, by name, in a sorted
	// index (8 B a member, where a map of a fleet takes ~53).
	states    sortedindex.Index[memberState]
	lists     statusLists    // the lists of conditions, plans and launch args states share
	transient map[string]int // reconciles in a row herdr did not answer
	// waiting: members waiting for their agent to be idle, and for what
	// (graceful.go); working: since when each member's agent works;
	// forced and restarts: what Expedite and Restart asked, until the
	// member's reconcile takes it; asked: the restarts asked and not yet
	// shown in the member's status (RestartPending), until the reconcile
	// that took one writes it.
	waiting  map[string]string
	working  map[string]time.Time
	forced   map[string]bool
	restarts map[string]bool
	asked    map[string]bool
	// prompted (mu) lists the members with a first prompt for Prompted,
	// which FirstPrompts calls at every change: those of the desired
	// state, for the snapshot promptSnap, and the names of the states
	// whose object has one (a deleted member's included).
	prompted   []*v1alpha1.Member
	promptSnap *store.Snapshot
	promptObjs map[string]bool
	changed    notify.Signal // any member's status or events, or the desired state, changed
	herdrUp    bool
	// herdrDownAt is when herdr was last seen going away (Run's start
	// until its first listing), for watchHerdr's warnings.
	herdrDownAt time.Time
	// herdrDown receives (coalesced) when herdr goes away, so that
	// watchHerdr holds no timer while herdr answers.
	herdrDown chan struct{}
	lastSnap  *store.Snapshot

	// relaunches (mu): per pane id, the terminal id of the last agent
	// relaunch reported for it (Options.OnAgentRelaunched), so that the
	// cache and the adoption do not report the same one twice.
	relaunches map[string]string

	sweep chan struct{} // herdr was listed or the manifests were read: sweep orphans now

	runOnce sync.Once
}

// New builds a Manager and loads the ownership records and the members'
// memory from Options.State; nothing talks to herdr until Run.
func New(opts *Options) (*Manager, error) {
	o := opts.withDefaults()
	m := &Manager{
		herdrDown:  make(chan struct{}, 1),
		o:          o,
		log:        o.Logger,
		launcher:   o.Launcher,
		metrics:    o.Metrics,
		states:     newMemberStates(),
		promptObjs: map[string]bool{},
		relaunches: map[string]string{},
		transient:  map[string]int{},
		waiting:    map[string]string{},
		working:    map[string]time.Time{},
		forced:     map[string]bool{},
		restarts:   map[string]bool{},
		asked:      map[string]bool{},
		sweep:      make(chan struct{}, 1),
	}
	if m.launcher == nil {
		m.launcher = profileLauncher{}
	}
	if m.metrics == nil {
		m.metrics = NewMetrics(o.Registerer)
	}
	own, err := loadOwnership(o.State)
	if err != nil {
		return nil, err
	}
	m.own = own
	m.wt = newWorktrees(own.all())
	if m.memory, err = loadMemory(o.State); err != nil {
		return nil, err
	}
	m.rolls = newRollouts()
	if m.revs = o.Revisions; m.revs == nil {
		if m.revs, err = rollout.OpenDir(nil, nil); err != nil {
			return nil, err
		}
	}
	m.metrics.rollouts.follow(m)
	m.created = map[string]*CreatedWorkspace{}
	for _, r := range own.all() {
		if r.CreatedWorkspace != nil {
			m.created[r.WorkspaceID] = r.CreatedWorkspace
		}
	}
	m.store = o.Store
	if m.store == nil {
		return nil, errors.New("controllers: Options.Store is required")
	}
	client := o.Herdr
	if client == nil {
		client = herdr.New(&herdr.Options{SocketPath: o.HerdrSocket, Observer: m.metrics.HerdrObserver()})
	}
	m.herdr, m.pinger = client, client
	m.cache = herdrcache.New(herdrcache.FromClient(client), &herdrcache.Options{
		Logger: o.Logger, Clock: o.Clock, ResyncPeriod: o.ResyncPeriod, CallTimeout: o.CallTimeout,
		ReconnectBackoff: o.ReconnectBackoff, MaxReconnect: o.MaxReconnect, ResubscribeDelay: o.ResubscribeDelay,
		Metrics: m.metrics.cache,
	})
	m.cache.AddHandler(herdrcache.Handler{
		OnEvent: m.onEvent, OnAgentStatus: m.onAgentStatus, OnAgentRelaunched: m.onAgentRelaunched,
		OnSynced: m.onSynced, OnUnsynced: m.onUnsynced,
	})
	m.cache.Watch(m.ownedPanes)
	m.queue = workqueue.New(&workqueue.Options{
		Name: controllerName, Clock: o.Clock, Metrics: m.metrics.queue,
		BaseDelay: o.QueueBaseDelay, MaxDelay: o.QueueMaxDelay,
	})
	m.lastSnap = m.store.Snapshot()
	m.metrics.manifestErrors.Set(float64(len(m.lastSnap.Errors)))
	return m, nil
}

// Close makes a later Run fail and stops the work queue New started (its
// delay timer runs from New on). Call it instead of Run, or after Run
// returned; it is safe to call more than once. The state directory's lock
// is its caller's, not the Manager's.
func (m *Manager) Close() error {
	m.runOnce.Do(func() {})
	m.queue.ShutDown()
	return nil
}

// Store returns the desired-state store, for writes (Apply, Delete).
func (m *Manager) Store() store.Store { return m.store }

// Cache returns the shared herdr cache the Manager reads (and runs, in
// Run), for other readers such as the primary-pane follower.
func (m *Manager) Cache() *herdrcache.Cache { return m.cache }

// Run reconciles until ctx ends, then stops every goroutine it started
// and waits for its last records to be durable. Agents keep running: the
// next fleetd adopts them. Run may be called once.
func (m *Manager) Run(ctx context.Context) error {
	err := errors.New("controllers: Run called twice")
	m.runOnce.Do(func() { err = m.run(ctx) })
	return err
}

func (m *Manager) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	storeErr := make(chan error, 1)
	if r, ok := m.store.(interface{ Run(context.Context) error }); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				storeErr <- err
				cancel()
			}
		}()
	}
	changes := m.store.Watch(ctx)
	m.mu.Lock()
	m.herdrDownAt = m.o.Clock.Now()
	m.mu.Unlock()
	wg.Add(5)
	go func() {
		defer wg.Done()
		m.watchStore(ctx, changes)
	}()
	go func() {
		defer wg.Done()
		m.refreshWorktrees(ctx)
	}()
	go func() {
		defer wg.Done()
		m.watchHerdr(ctx)
	}()
	go func() {
		defer wg.Done()
		_ = m.cache.Run(ctx) // fails only when called twice, which runOnce prevents
	}()
	go func() {
		defer wg.Done()
		m.sweeper(ctx)
	}()
	if f := m.o.Fence; f != nil {
		wg.Go(func() { m.followFence(ctx, f) })
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.followRollouts(ctx)
	}()
	if a := m.o.Activity; a != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.followActivity(ctx, a)
		}()
	}
	for range m.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.worker(ctx)
		}()
	}
	m.log.Info("member controller started", "workers", m.o.Workers, "resync", m.o.ResyncPeriod)
	<-ctx.Done()
	m.queue.ShutDown()
	wg.Wait()
	// What the controllers dropped without waiting is on disk before Run
	// returns: the next start reads what this one left.
	if err := m.o.State.Sync(); err != nil {
		m.log.Warn("could not write the last changes to the state database", "err", err)
	}
	m.log.Info("member controller stopped; it left the members' panes running")
	select {
	case err := <-storeErr:
		return fmt.Errorf("controllers: %w", err)
	default:
		return nil
	}
}

// watchStore maps desired-state changes to member keys.
func (m *Manager) watchStore(ctx context.Context, changes <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		next := m.store.Snapshot()
		m.mu.Lock()
		prev := m.lastSnap
		m.lastSnap = next
		m.mu.Unlock()
		m.metrics.manifestErrors.Set(float64(len(next.Errors)))
		for _, name := range changedMembers(prev, next) {
			m.queue.Add(name)
		}
		if next.Synced && !prev.Synced {
			// Listings before the manifests were read swept nothing:
			// sweep now rather than at the next resync.
			select {
			case m.sweep <- struct{}{}:
			default:
			}
		}
		m.changed.Notify()
	}
}

// changedMembers lists members whose object, profile, tenant, file errors,
// prune hold or existence differ between two snapshots.
func changedMembers(prev, next *store.Snapshot) []string {
	if prev.Synced != next.Synced || (prev.Unreadable == nil) != (next.Unreadable == nil) || (prev.Stale == nil) != (next.Stale == nil) {
		return unionNames(prev.Members, next.Members)
	}
	var out []string
	for _, name := range unionNames(prev.Members, next.Members) {
		a, b := prev.Members[name], next.Members[name]
		switch {
		case a != b:
			out = append(out, name)
		case b == nil:
		case prev.PruneHeld[name] != next.PruneHeld[name]: // held, or its hold ended
			out = append(out, name)
		case referencesChanged(prev, next, b):
			out = append(out, name)
		default:
			key := store.Key{Kind: v1alpha1.KindMember, Name: name}
			if prev.ErrorsOf(key).Error() != next.ErrorsOf(key).Error() {
				out = append(out, name)
			}
		}
	}
	return out
}

// referencesChanged reports whether an object m references differs between
// two snapshots.
func referencesChanged(prev, next *store.Snapshot, m *v1alpha1.Member) bool {
	for _, ref := range m.References() {
		if prev.Referenced(ref) != next.Referenced(ref) {
			return true
		}
	}
	return false
}

func unionNames(a, b map[string]*v1alpha1.Member) []string {
	seen := map[string]bool{}
	var out []string
	for _, mm := range []map[string]*v1alpha1.Member{a, b} {
		for n := range mm {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (m *Manager) enqueueAll() {
	names := map[string]bool{}
	for n := range m.store.Snapshot().Members {
		names[n] = true
	}
	for _, r := range m.own.all() {
		names[r.Member] = true
	}
	m.mu.Lock()
	for _, s := range m.states.Entries() {
		if s.shown {
			names[s.name] = true
		}
	}
	m.mu.Unlock()
	for n := range names {
		m.queue.Add(n)
	}
}

// worker processes keys until the queue shuts down.
func (m *Manager) worker(ctx context.Context) {
	for {
		name, ok := m.queue.Get(ctx)
		if !ok {
			return
		}
		m.processOne(ctx, name)
		m.queue.Done(name)
	}
}

func (m *Manager) processOne(ctx context.Context, name string) {
	start := m.o.Clock.Now()
	res, err := m.reconcile(ctx, name)
	took := m.o.Clock.Now().Sub(start)
	m.metrics.reconcileTime.WithLabelValues(controllerName).Observe(took.Seconds())
	m.logDecision(ctx, name, res, err, took)
	transient := err != nil && herdrcache.Unreachable(err)
	tries := m.transientTries(name, transient)
	switch {
	case transient:
		// herdr did not answer one call (a refused connect, a dropped
		// connection): retry soon on this member's own backoff. The work
		// queue's rate limit would make a fleet hit by one blip wait in
		// line behind its token bucket.
		m.metrics.reconcileTotal.WithLabelValues(controllerName, resultError).Inc()
		m.metrics.reconcileErrors.WithLabelValues(controllerName).Inc()
		if ctx.Err() == nil {
			delay := backoff(m.o.ReconnectBackoff, tries-1, m.o.MaxReconnect)
			m.log.Warn("herdr did not answer; retrying", "member", name, "err", err, "in", delay)
			m.reconcileFailed(name, err, fmt.Sprintf("retrying in %s", delay))
			m.queue.AddAfter(name, delay)
		}
	case err != nil:
		m.metrics.reconcileTotal.WithLabelValues(controllerName, resultError).Inc()
		m.metrics.reconcileErrors.WithLabelValues(controllerName).Inc()
		if ctx.Err() == nil {
			m.log.Warn("reconcile failed; retrying with backoff", "member", name, "err", err)
			m.reconcileFailed(name, err, "retrying with backoff")
			m.queue.AddRateLimited(name)
		}
	case res.RequeueAfter > 0:
		m.metrics.reconcileTotal.WithLabelValues(controllerName, resultRequeueAfter).Inc()
		m.queue.Forget(name)
		m.queue.AddAfter(name, res.RequeueAfter)
	case res.Requeue:
		// Not rate-limited: the token bucket is for retries, and a mass
		// creation's starts would wait behind it.
		m.metrics.reconcileTotal.WithLabelValues(controllerName, resultRequeue).Inc()
		m.queue.Forget(name)
		m.queue.Add(name)
	default:
		m.metrics.reconcileTotal.WithLabelValues(controllerName, resultSuccess).Inc()
		m.queue.Forget(name)
	}
}

// reconcileFailed shows a reconcile's error in the member's status, not
// only in the log: lastError, the Progressing condition, and Ready unless
// the agent runs. The reason says whose the error is: herdr not answering
// (HerdrUnavailable), herdr refusing (HerdrError), or fleetd's own
// (ReconcileError).
func (m *Manager) reconcileFailed(name string, err error, retry string) {
	mem, ok := m.store.Snapshot().Members[name]
	if !ok {
		return
	}
	var he *herdr.Error
	status, reason := v1alpha1.ConditionFalse, v1alpha1.ReasonReconcileError
	switch {
	case herdrcache.Unreachable(err):
		status, reason = v1alpha1.ConditionUnknown, v1alpha1.ReasonHerdrUnavailable
	case errors.As(err, &he):
		reason = v1alpha1.ReasonHerdrError
	}
	msg := fmt.Sprintf("%v; %s", err, retry)
	b := m.statusOf(mem)
	if b.st.Phase == "" {
		b.st.Phase = v1alpha1.PhasePending
	}
	b.st.LastError = msg
	if b.condition(v1alpha1.ConditionReady).Status != v1alpha1.ConditionTrue {
		b.cond(v1alpha1.ConditionReady, status, reason, msg)
	}
	b.cond(v1alpha1.ConditionProgressing, v1alpha1.ConditionTrue, reason, msg)
	m.writeStatus(name, b)
}

// transientTries counts a member's reconciles in a row that herdr did not
// answer (failed true) and returns the count; any other outcome resets it.
func (m *Manager) transientTries(name string, failed bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !failed {
		delete(m.transient, name)
		return 0
	}
	m.transient[name]++
	return m.transient[name]
}

// Owned returns the ownership records, for the caller that revokes every
// pane credential no record holds before Run (internal/daemon).
func (m *Manager) Owned() []Ownership { return m.own.all() }

// Result tells the worker when to look at a member again, as
// controller-runtime's does: after RequeueAfter; at once, behind the
// members already queued, with Requeue; or (zero) when something changes.
// An error is retried with the work queue's backoff. Requeue is the next
// step of a longer job that need not hold a worker meanwhile: a created
// tab's agent.start comes in the member's next reconcile, so that a mass
// creation or repair asks herdr for every tab before it starts their
// agents (create.go). The first recreation after a failure is taken in the
// same reconcile (see Manager.reconcile).
type Result struct {
	RequeueAfter time.Duration
	Requeue      bool
}

// Members returns every member with its status, sorted by name: those the
// desired state declares, and those deleted from it that the controller is
// not done with yet — Terminating while their tab closes. Only the
// statuses are copied under mu; the members are the store's (or, once
// deleted, the last status write's) objects, which nobody changes, and are
// copied after.
func (m *Manager) Members() []v1alpha1.Member {
	snap := m.store.Snapshot()
	list := make([]listedMember, 0, len(snap.Members))
	m.mu.Lock()
	for _, mem := range snap.Members {
		list = append(list, listedMember{mem, m.statusLocked(mem)})
	}
	for _, s := range m.states.Entries() {
		if _, declared := snap.Members[s.name]; !declared && s.shown && s.object != nil {
			list = append(list, listedMember{s.object, m.statusLocked(s.object)})
		}
	}
	m.mu.Unlock()
	return copyListed(list)
}

// Prompted returns the members whose spec has a first prompt, with their
// status, as Members lists them: what messaging.FirstPrompts reads at every
// change, without a copy of the whole fleet, and without a walk of it but
// when the desired state changed (a walk at every status write was a tenth
// of fleetd's CPU while 1000 members converged).
func (m *Manager) Prompted() []v1alpha1.Member {
	snap := m.store.Snapshot()
	var list []listedMember
	m.mu.Lock()
	if m.promptSnap != snap {
		m.promptSnap, m.prompted = snap, nil
		for _, mem := range snap.Members {
			if mem.Spec.Prompt != "" {
				m.prompted = append(m.prompted, mem)
			}
		}
	}
	for _, mem := range m.prompted {
		list = append(list, listedMember{mem, m.statusLocked(mem)})
	}
	for name := range m.promptObjs {
		if s := m.stateLocked(name); s != nil && s.object != nil && snap.Members[name] == nil {
			list = append(list, listedMember{s.object, m.statusLocked(s.object)})
		}
	}
	m.mu.Unlock()
	return copyListed(list)
}

// listedMember is a member and its status, as a list takes them under mu.
type listedMember struct {
	mem    *v1alpha1.Member
	status v1alpha1.MemberStatus
}

// copyListed sorts list by name and returns copies of its members, each
// with its status.
func copyListed(list []listedMember) []v1alpha1.Member {
	slices.SortFunc(list, func(a, b listedMember) int { return strings.Compare(a.mem.Name, b.mem.Name) })
	out := make([]v1alpha1.Member, len(list))
	for i, l := range list {
		l.mem.DeepCopyInto(&out[i])
		out[i].Status = l.status
	}
	return out
}

// Member returns one member with its status, as Members lists it.
func (m *Manager) Member(name string) (v1alpha1.Member, bool) {
	mem, ok := m.store.Snapshot().Members[name]
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.stateLocked(name); !ok && s != nil && s.object != nil {
		mem, ok = s.object, true
	}
	if !ok {
		return v1alpha1.Member{}, false
	}
	return m.withStatusLocked(mem), true
}

// MemberEvents returns the member's recent events, oldest first.
func (m *Manager) MemberEvents(name string) []v1alpha1.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stateLocked(name)
	if s == nil || len(s.events) == 0 {
		return nil
	}
	out := make([]v1alpha1.Event, len(s.events))
	for i := range s.events {
		out[i] = s.events[i].event()
	}
	return out
}

// ManifestErrors returns the current problems in the manifests.
func (m *Manager) ManifestErrors() decode.ErrorList {
	return m.store.Snapshot().Errors
}

// Ready reports nil once fleetd's view of herdr and of the manifests is in
// sync, for GET /readyz.
func (m *Manager) Ready() error {
	snap := m.store.Snapshot()
	if snap.Unreadable != nil {
		return snap.Unreadable
	}
	if !snap.Synced {
		return errors.New("manifests not read yet")
	}
	if !m.cache.Synced() {
		return errors.New("herdr not reachable or not listed yet")
	}
	return nil
}

func (m *Manager) withStatusLocked(mem *v1alpha1.Member) v1alpha1.Member {
	out := *mem.DeepCopy()
	out.Status = m.statusLocked(mem)
	return out
}

// statusLocked returns a copy of the member's status; mu is held.
func (m *Manager) statusLocked(mem *v1alpha1.Member) v1alpha1.MemberStatus {
	if s := m.stateLocked(mem.Name); s != nil {
		var st v1alpha1.MemberStatus
		s.status.DeepCopyInto(&st)
		return st
	}
	return v1alpha1.MemberStatus{Phase: v1alpha1.PhasePending, SessionID: sessionID(mem.UID)}
}

// Changed returns a channel that is closed at the next change of any
// member's status or of the desired state.
func (m *Manager) Changed() <-chan struct{} { return m.changed.Changed() }

// WaitFor blocks until cond holds for the members (with status) or ctx
// ends. cond is evaluated at once and after every change.
func (m *Manager) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	return notify.Wait(ctx, &m.changed, func() bool { return cond(m.Members()) })
}
