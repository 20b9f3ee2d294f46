package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// staleStore is a store (the directory store of the scenarios) whose
// snapshots say Stale while set, as the etcd store's do while etcd is
// unreachable or without quorum.
type staleStore struct {
	store.Store
	mu     sync.Mutex
	err    error
	nudges map[chan struct{}]struct{}
}

func (s *staleStore) Snapshot() *store.Snapshot {
	snap := s.Store.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return snap
	}
	stale := *snap
	stale.Stale = s.err
	return &stale
}

// set makes the snapshots stale for err (nil: current again) and signals
// the watchers, as a store does when its snapshot changes.
func (s *staleStore) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	for ch := range s.nudges {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *staleStore) Watch(ctx context.Context) <-chan struct{} {
	in := s.Store.Watch(ctx)
	out := make(chan struct{}, 1)
	nudge := make(chan struct{}, 1)
	s.mu.Lock()
	if s.nudges == nil {
		s.nudges = map[chan struct{}]struct{}{}
	}
	s.nudges[nudge] = struct{}{}
	s.mu.Unlock()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
			case <-nudge:
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

func (s *staleStore) Run(ctx context.Context) error {
	return s.Store.(interface{ Run(context.Context) error }).Run(ctx)
}

// While the store cannot confirm the desired state, no pane is created: a
// killed pane is not recreated, a changed spec does not replace the
// running agent, a new member does not start; each says why. Once the
// snapshot is current again all three converge.
func TestManager_StaleSnapshotCreatesNothingUntilCurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile,
			"alpha.yaml": memberYAML("alpha"), "beta.yaml": memberYAML("beta")})
		st := &staleStore{}
		e.tweak = func(o *Options) {
			st.Store = o.Store
			o.Store = st
		}
		e.start()
		before := e.waitFor("alpha and beta Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		e.waitIdle()
		calls := e.fake.Calls()

		st.set(errors.New("etcd unavailable; keeping every object as last seen: etcdserver: no leader"))
		alpha, beta := before["alpha"].Status, before["beta"].Status
		if err := e.fake.KillPane(alpha.PaneID); err != nil {
			t.Fatal(err)
		}
		e.write("beta.yaml", memberYAML("beta", "cwd: /tmp"))
		e.write("gamma.yaml", memberYAML("gamma"))
		held := func(m v1alpha1.Member) bool {
			c := condition(m, v1alpha1.ConditionReady)
			return c.Status == v1alpha1.ConditionUnknown && c.Reason == v1alpha1.ReasonStoreUnavailable
		}
		e.waitFor("alpha, beta and gamma held", func(ms map[string]v1alpha1.Member) bool {
			return held(ms["alpha"]) && held(ms["beta"]) && held(ms["gamma"]) && ms["beta"].Status.ObservedGeneration == 2
		})
		// Past any backoff and resync: still nothing created.
		time.Sleep(time.Minute)
		e.waitIdle()
		ms := e.waitFor("still held", func(map[string]v1alpha1.Member) bool { return true })
		for _, name := range []string{"alpha", "beta", "gamma"} {
			c := condition(ms[name], v1alpha1.ConditionReady)
			if !held(ms[name]) || !strings.Contains(c.Message, "no leader") || !strings.Contains(c.Message, "creating no pane") {
				t.Errorf("%s while stale: Ready %+v", name, c)
			}
		}
		now := e.fake.Calls()
		if now["tab.create"] != calls["tab.create"] || now["agent.start"] != calls["agent.start"] {
			t.Errorf("while stale: tab.create +%d, agent.start +%d; want none",
				now["tab.create"]-calls["tab.create"], now["agent.start"]-calls["agent.start"])
		}
		if !e.paneAlive(beta.PaneID) {
			t.Error("beta's running agent was closed while the store was stale")
		}
		if ms["beta"].Status.PaneID != beta.PaneID {
			t.Errorf("beta's status shows pane %q while stale, want its running %s", ms["beta"].Status.PaneID, beta.PaneID)
		}

		st.set(nil)
		ms = e.waitFor("converged", func(ms map[string]v1alpha1.Member) bool {
			for _, name := range []string{"alpha", "beta", "gamma"} {
				if ms[name].Status.Phase != v1alpha1.PhaseReady || condition(ms[name], v1alpha1.ConditionReady).Status != v1alpha1.ConditionTrue {
					return false
				}
			}
			return ms["beta"].Status.ObservedGeneration == 2
		})
		if a := ms["alpha"].Status; a.TerminalID == alpha.TerminalID || a.Restarts != 1 {
			t.Errorf("alpha after the store returned: terminal %s (was %s), %d restarts; want a new one, 1", a.TerminalID, alpha.TerminalID, a.Restarts)
		}
		if b := ms["beta"].Status; b.TerminalID == beta.TerminalID {
			t.Errorf("beta after the store returned: terminal %s, want its replacement", b.TerminalID)
		}
		e.waitIdle()
		if now := e.fake.Calls(); now["tab.create"] != calls["tab.create"]+3 {
			t.Errorf("after the store returned: tab.create +%d, want +3 (alpha, beta, gamma)", now["tab.create"]-calls["tab.create"])
		}
	})
}

// A store current again without a change the manager saw (its watcher
// read a current snapshot before a reconcile read the stale one) still
// gets a held member created: the hold looks again after staleRecheck,
// long before the next resync.
func TestManager_StaleHoldLooksAgainWithoutAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile})
		st := &staleStore{}
		e.tweak = func(o *Options) {
			st.Store = o.Store
			o.Store = st
		}
		e.start()
		e.waitIdle()
		st.set(errors.New("etcd unavailable; keeping every object as last seen: etcdserver: no leader"))
		e.write("gamma.yaml", memberYAML("gamma"))
		e.waitFor("gamma held", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["gamma"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonStoreUnavailable
		})
		e.waitIdle()
		st.mu.Lock()
		st.err = nil // current again, and nobody told
		st.mu.Unlock()
		time.Sleep(staleRecheck + time.Second)
		e.waitIdle()
		ms := e.waitFor("now", func(map[string]v1alpha1.Member) bool { return true })
		if g := ms["gamma"].Status; g.PaneID == "" {
			t.Errorf("gamma %s after the store was current for %s: no pane; want one (the hold looks again)", g.Phase, staleRecheck+time.Second)
		}
	})
}

// A member in a crash loop whose pane dies while the snapshot is stale is
// held like any other: its status says StoreUnavailable at once, whatever
// its restart count and backoff, and no backoff timer that runs out
// meanwhile creates a pane. (The crash-loop backoff won before: the member
// showed CrashLoop, "recreating in …", until its backoff ran out.)
func TestManager_StaleHoldWinsOverCrashLoopBackoff(t *testing.T) {
	for _, restarts := range []int32{0, 1, 3} {
		t.Run(fmt.Sprintf("%d restarts", restarts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, map[string]string{"profile.yaml": testProfile, "alpha.yaml": memberYAML("alpha")})
				st := &staleStore{}
				e.tweak = func(o *Options) {
					st.Store = o.Store
					o.Store = st
					o.RestartBackoff = 2 * time.Second
				}
				e.start()
				a := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
				for a.Restarts < restarts {
					if err := e.fake.KillPane(a.PaneID); err != nil {
						t.Fatal(err)
					}
					a = e.waitFor("alpha recreated", func(ms map[string]v1alpha1.Member) bool {
						s := ms["alpha"].Status
						return s.Phase != v1alpha1.PhaseStarting && s.PaneID != "" && s.PaneID != a.PaneID
					})["alpha"].Status
				}
				e.waitIdle()
				calls := e.fake.Calls()

				st.set(errors.New("etcd unavailable; keeping every object as last seen: etcdserver: no leader"))
				e.waitIdle()
				if err := e.fake.KillPane(a.PaneID); err != nil {
					t.Fatal(err)
				}
				e.waitForHerdr("the kill seen", func() bool {
					m, _ := e.mgr.Member("alpha")
					return m.Status.PaneID == ""
				})
				e.waitIdle() // no time passes: every backoff is still running
				m, _ := e.mgr.Member("alpha")
				if c := condition(m, v1alpha1.ConditionReady); c.Status != v1alpha1.ConditionUnknown || c.Reason != v1alpha1.ReasonStoreUnavailable {
					t.Errorf("Ready after the pane died while stale (%d restarts before) = %+v; want Unknown, StoreUnavailable", restarts, c)
				}
				if got := m.DisplayPhase(); got != "Unknown (StoreUnavailable)" {
					t.Errorf("get members shows %q; want Unknown (StoreUnavailable)", got)
				}
				time.Sleep(10 * time.Minute) // past every backoff
				e.waitIdle()
				if now := e.fake.Calls(); now["tab.create"] != calls["tab.create"] {
					t.Errorf("tab.create +%d while stale; want none", now["tab.create"]-calls["tab.create"])
				}
				m, _ = e.mgr.Member("alpha")
				if c := condition(m, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonStoreUnavailable {
					t.Errorf("Ready 10 minutes later, still stale = %+v; want StoreUnavailable", c)
				}

				st.set(nil)
				e.waitFor("alpha back", func(ms map[string]v1alpha1.Member) bool {
					s := ms["alpha"].Status
					return s.Phase != v1alpha1.PhaseStarting && s.PaneID != "" && s.Restarts == restarts+1
				})
			})
		})
	}
}

// startLoses makes the first agent.start fail as an unreachable herdr does
// (the start unknown, retried), calling first before it answers.
type startLoses struct {
	Herdr
	once  sync.Once
	first func()
}

func (s *startLoses) LaunchAgent(ctx context.Context, p herdr.AgentStartParams) (*herdr.AgentStarted, error) {
	lost := false
	s.once.Do(func() { s.first(); lost = true })
	if lost {
		return nil, &herdr.TransportError{Method: "agent.start", Reason: herdr.ReasonUnavailable, Err: herdr.ErrUnavailable}
	}
	return s.Herdr.LaunchAgent(ctx, p)
}

// A member whose tab was made but whose agent.start herdr did not answer
// has a pane and no agent: the start is tried again, but not from a
// stale snapshot — the member may be another node's by then. (The start
// was tried again at once before: a second live agent for the member.)
func TestManager_StaleHoldsTheStartOfAnAgentWhosePaneExists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile})
		st := &staleStore{}
		e.tweak = func(o *Options) {
			st.Store = o.Store
			o.Store = st
			o.Herdr = &startLoses{Herdr: o.Herdr, first: func() {
				st.set(errors.New("etcd unavailable; keeping every object as last seen: etcdserver: no leader"))
			}}
		}
		e.start()
		e.waitIdle()
		e.write("alpha.yaml", memberYAML("alpha"))
		e.waitFor("alpha held", func(ms map[string]v1alpha1.Member) bool {
			return condition(ms["alpha"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonStoreUnavailable
		})
		time.Sleep(time.Minute) // past herdr's return and any backoff
		e.waitIdle()
		if n := e.fake.Calls()["agent.start"]; n != 0 {
			t.Errorf("agent.start reached herdr %d times while the snapshot was stale; want none", n)
		}
		st.set(nil)
		e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))
		if n := e.fake.Calls()["tab.create"]; n != 1 {
			t.Errorf("tab.create %d times; want the one pane, started once confirmed", n)
		}
	})
}
