package herdrcache_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
)

// hookedSource runs before (once) when the cache first subscribes, before
// herdr sees the request: what herdr does then reaches no stream.
type hookedSource struct {
	herdrcache.Source
	once   sync.Once
	before func()
}

func (s *hookedSource) Subscribe(ctx context.Context, subs []herdr.Subscription) (herdrcache.Stream, error) {
	s.once.Do(s.before)
	return s.Source.Subscribe(ctx, subs)
}

type statusLog struct {
	mu  sync.Mutex
	obs []string
	seq []uint64
}

func (l *statusLog) observe(_, status string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.obs = append(l.obs, status)
	l.seq = append(l.seq, seq)
}

func (l *statusLog) get() ([]string, []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.obs...), append([]uint64(nil), l.seq...)
}

// Against the fake herdr speaking live-only subscriptions (no replay, as
// protocol 22 does): a pane that exits while the cache subscribes is not
// cached (the read follows the acknowledgement), and a burst of 500 status
// changes reaches the handlers in full, in order, each numbered.
func TestCache_OnFakeHerdr_LiveOnlyEventsAndBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := herdrsim.Start(&herdrsim.Options{InMemory: true, NoReplay: true, EventRing: 4096,
			Validator: validated.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hc := herdr.New(&herdr.Options{Dial: srv.Dial})
		ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
		if err != nil {
			t.Fatal(err)
		}
		agentPane := ws.RootPane.PaneID
		if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "w", Kind: "claude", PaneID: agentPane}, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		other, err := hc.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: "fleetd/other"})
		if err != nil {
			t.Fatal(err)
		}
		src := &hookedSource{Source: herdrcache.FromClient(hc), before: func() {
			if err := srv.KillPane(other.RootPane.PaneID); err != nil {
				t.Error(err)
			}
		}}
		cache := herdrcache.New(src, &herdrcache.Options{Logger: slog.New(slog.DiscardHandler),
			ResyncPeriod: time.Hour, CallTimeout: 5 * time.Second})
		var log statusLog
		cache.AddHandler(herdrcache.Handler{OnAgentStatus: log.observe})
		cache.Watch(func() []string { return []string{agentPane} })
		runCache(t, ctx, cache)
		synctest.Wait()
		if !cache.Synced() {
			t.Fatal("cache not synced")
		}
		if _, ok := cache.Pane("", other.RootPane.PaneID); ok {
			t.Error("a pane that exited while the cache subscribed is cached")
		}
		if got := cache.Subscribed(); !cmp.Equal(got, []string{agentPane}) {
			t.Fatalf("Subscribed = %v, want [%s]", got, agentPane)
		}

		first, _ := log.get()
		const burst = 500
		var want []string
		for i := range burst {
			st := []string{"working", "idle"}[i%2]
			if err := srv.SetAgentStatus(agentPane, st); err != nil {
				t.Fatal(err)
			}
			want = append(want, st)
		}
		synctest.Wait()
		got, seqs := log.get()
		got, seqs = got[len(first):], seqs[len(first):]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("statuses of the burst (-want +got):\n%s", diff)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Fatalf("seq %d after %d at status %d of the burst", seqs[i], seqs[i-1], i)
			}
		}
	})
}

// herdr closes a tab with its last pane and says only pane_exited (or
// pane_closed), no tab_closed: the cache drops the tab too, and keeps a tab
// that still has a pane.
func TestCache_OnFakeHerdr_TabGoesWithItsLastPane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := herdrsim.Start(&herdrsim.Options{InMemory: true, Validator: validated.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hc := herdr.New(&herdr.Options{Dial: srv.Dial})
		ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
		if err != nil {
			t.Fatal(err)
		}
		alone, err := hc.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: "fleetd/alone"})
		if err != nil {
			t.Fatal(err)
		}
		split, err := hc.CreateTab(ctx, herdr.TabCreateParams{WorkspaceID: ws.Workspace.WorkspaceID, Label: "fleetd/split"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hc.SplitPane(ctx, herdr.PaneSplitParams{TargetPaneID: split.RootPane.PaneID, Direction: herdr.SplitRight}); err != nil {
			t.Fatal(err)
		}
		cache := herdrcache.New(herdrcache.FromClient(hc), &herdrcache.Options{Logger: slog.New(slog.DiscardHandler),
			ResyncPeriod: time.Hour, CallTimeout: 5 * time.Second})
		runCache(t, ctx, cache)
		synctest.Wait()
		labels := func() []string {
			var out []string
			for _, tab := range cache.TabsWithLabelPrefix("fleetd/") {
				out = append(out, tab.Label)
			}
			slices.Sort(out)
			return out
		}
		if diff := cmp.Diff([]string{"fleetd/alone", "fleetd/split"}, labels()); diff != "" {
			t.Fatalf("tabs before (-want +got):\n%s", diff)
		}
		for _, p := range []string{alone.RootPane.PaneID, split.RootPane.PaneID} {
			if err := srv.KillPane(p); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second) // the events' tick
		synctest.Wait()
		if diff := cmp.Diff([]string{"fleetd/split"}, labels()); diff != "" {
			t.Errorf("tabs after each tab lost a pane (-want +got):\n%s", diff)
		}
	})
}

// relaunchLog records, in order, the relaunches and statuses handlers see.
type relaunchLog struct {
	mu  sync.Mutex
	got []string
}

func (l *relaunchLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *relaunchLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// herdr gives every pane a new terminal id when it hands off live and when
// it restarts with session restore; only the restart relaunches the agents.
// The cache reports the relaunched pane — after a restart whose downtime it
// saw (the socket refused it), and after one whose agent was still
// launching — before the new agent's status. In the first the old agent
// never moved, so herdr's counters cannot tell: only the refused socket
// does. It reports nothing after a handoff of an agent that worked.
func TestCache_OnFakeHerdr_RelaunchedAgents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		work    bool // the agent works before: herdr's counters move past a new agent's
		disrupt func(t *testing.T, srv *herdrsim.Server, pane string)
		want    bool
	}{
		{"live handoff", true, func(t *testing.T, srv *herdrsim.Server, _ string) {
			if err := srv.Handoff(); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"restart, seen down", false, func(t *testing.T, srv *herdrsim.Server, _ string) {
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the bubble's clock: the cache pings a stopped herdr
			if err := srv.RestartRestored(nil); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"restart, agent launching", false, func(t *testing.T, srv *herdrsim.Server, pane string) {
			srv.SetBehavior(pane, herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}) // relaunched, it waits at a dialog
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := srv.RestartRestored(nil); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, srv, ws, cache := startAgentW(t, 22)
				pane := ws.RootPane.PaneID
				var log relaunchLog
				cache.AddHandler(herdrcache.Handler{
					OnAgentRelaunched: func(p string) {
						if p == pane {
							log.add("relaunched")
						}
					},
					OnAgentStatus: func(p, status string, _ uint64) { log.add(status) },
				})
				cache.Watch(func() []string { return []string{pane} })
				runCache(t, ctx, cache)
				synctest.Wait()
				// The agent is prompted and works on it, as a worker does.
				moves := []string{"working", "idle", "working"}
				if !tc.work {
					moves = nil
				}
				for _, st := range moves {
					if err := srv.SetAgentStatus(pane, st); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
				}
				log.take()

				tc.disrupt(t, srv, pane)
				time.Sleep(2 * time.Second) // the bubble's clock: the cache reconnects and reads herdr
				synctest.Wait()
				if !cache.Synced() {
					t.Fatal("cache not synced again")
				}
				got := log.take()
				if tc.want && (len(got) == 0 || got[0] != "relaunched") {
					t.Errorf("seen after the restart: %v; want the relaunch first, before any status", got)
				}
				if !tc.want && slices.Contains(got, "relaunched") {
					t.Errorf("seen after the handoff: %v; want no relaunch", got)
				}
			})
		})
	}
}

// A watcher that, like the controllers, watches a pane by the terminal id
// its record names stops watching it when herdr restarts with session
// restore (new terminal ids) until it adopts the pane under its new one.
// The relaunched agent came up before the cache read herdr again, so no
// event will bring its status: once the pane is watched again the cache
// passes the status it read on — whether the record was rekeyed while the
// cache still settled the read (the controllers' OnSynced queues the
// adoption at once) or later — after the relaunch, in both protocols.
// (It did not in the first case: the stream already covered the pane, and
// the read had skipped it as not watched, so the worker's queue waited for
// the next resync.)
func TestCache_OnFakeHerdr_StatusOfAPaneWatchedAgainAfterARestart(t *testing.T) {
	for _, protocol := range []int{herdrsim.DefaultProtocol, herdrsim.Protocol20} {
		for _, later := range []bool{false, true} {
			t.Run(fmt.Sprintf("protocol%d/rekeyed_later=%v", protocol, later), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx, srv, ws, cache := startAgentW(t, protocol)
					pane := ws.RootPane.PaneID
					// record is the terminal id the watcher's record names.
					var mu sync.Mutex
					record := ws.RootPane.TerminalID
					rekey := func() {
						mu.Lock()
						defer mu.Unlock()
						if p, ok := cache.Pane("", pane); ok {
							record = p.TerminalID
						}
					}
					var log relaunchLog
					cache.AddHandler(herdrcache.Handler{
						OnAgentRelaunched: func(string) { log.add("relaunched") },
						OnAgentStatus:     func(_, status string, _ uint64) { log.add(status) },
						OnSynced: func() {
							if !later {
								rekey()
							}
						},
					})
					cache.Watch(func() []string {
						mu.Lock()
						defer mu.Unlock()
						if _, ok := cache.Pane(record, pane); ok {
							return []string{pane}
						}
						return nil
					})
					runCache(t, ctx, cache)
					synctest.Wait()
					if err := srv.SetAgentStatus(pane, "working"); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
					if got := log.take(); !slices.Contains(got, "working") {
						t.Fatalf("before the restart the cache passed on %v; want working", got)
					}

					if err := srv.Stop(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(2 * time.Second) // the bubble's clock: the cache finds herdr gone
					if err := srv.RestartRestored(nil); err != nil {
						t.Fatal(err)
					}
					synctest.Wait() // the relaunched agent is up before the cache reconnects
					if p, ok := srv.Pane(pane); !ok || p.Status != "idle" {
						t.Fatalf("relaunched agent: %+v, %v; want it idle", p, ok)
					}
					time.Sleep(5 * time.Second) // the cache reconnects and reads herdr
					synctest.Wait()
					if !cache.Synced() {
						t.Fatal("cache not synced again")
					}
					if later {
						rekey()
						cache.Rewatch()
						time.Sleep(time.Second) // the resubscribe delay
						synctest.Wait()
					}
					if diff := cmp.Diff([]string{"relaunched", "idle"}, log.take()); diff != "" {
						t.Errorf("passed on after the restart (-want +got):\n%s", diff)
					}
				})
			})
		}
	}
}

// runCache runs cache until the test ends, and fails the test if Run
// returns an error.
func runCache(t *testing.T, ctx context.Context, cache *herdrcache.Cache) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cache.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// startAgentW starts, inside a synctest bubble, a fake herdr speaking
// protocol with the fleetd workspace and agent w in its root pane, and a
// cache on it (not yet run); ctx is bound to the test and lasts a minute.
func startAgentW(t *testing.T, protocol int) (context.Context, *herdrsim.Server, *herdr.WorkspaceCreated, *herdrcache.Cache) {
	t.Helper()
	srv, err := herdrsim.Start(&herdrsim.Options{InMemory: true, NoReplay: true, Protocol: protocol,
		Validator: validated.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	hc := herdr.New(&herdr.Options{Dial: srv.Dial})
	ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleetd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "w", Kind: "claude", PaneID: ws.RootPane.PaneID}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	cache := herdrcache.New(herdrcache.FromClient(hc), &herdrcache.Options{Logger: slog.New(slog.DiscardHandler),
		ResyncPeriod: time.Hour, CallTimeout: 5 * time.Second})
	return ctx, srv, ws, cache
}

// herdr 0.9's worktree events reach the handlers (the cache follows them
// where herdr has them); herdr 0.8 refuses a subscription that names them,
// and the cache follows the other events without them.
func TestCache_OnFakeHerdr_WorktreeEventsWhereHerdrHasThem(t *testing.T) {
	for _, protocol := range []int{herdrsim.DefaultProtocol, herdrsim.Protocol20} {
		t.Run(fmt.Sprint("protocol", protocol), func(t *testing.T) {
			repo := gitrepotest.Repo(t)
			synctest.Test(t, func(t *testing.T) {
				ctx, srv, ws, cache := startAgentW(t, protocol)
				var mu sync.Mutex
				var kinds []herdr.EventKind
				cache.AddHandler(herdrcache.Handler{OnEvent: func(ev herdr.Event) {
					mu.Lock()
					defer mu.Unlock()
					kinds = append(kinds, ev.Kind)
				}})
				runCache(t, ctx, cache)
				synctest.Wait()
				if !cache.Synced() {
					t.Fatal("cache not synced")
				}
				hc := herdr.New(&herdr.Options{Dial: srv.Dial})
				_, err := hc.CreateWorktree(ctx, herdr.WorktreeCreateParams{CWD: repo, Branch: "agents/w"})
				if protocol == herdrsim.Protocol20 {
					if !errors.Is(err, herdr.ErrUnsupported) {
						t.Fatalf("worktree.create on protocol 20: %v, want ErrUnsupported", err)
					}
					if err := hc.CloseTab(ctx, ws.Tab.TabID); err != nil { // an event the stream must still carry
						t.Fatal(err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				want := []herdr.EventKind{herdr.EventWorkspaceCreated, herdr.EventWorktreeCreated}
				if protocol == herdrsim.Protocol20 {
					want = []herdr.EventKind{herdr.EventTabClosed, herdr.EventWorkspaceClosed}
				}
				// Order holds within one subscription entry only.
				slices.Sort(want)
				slices.Sort(kinds)
				if diff := cmp.Diff(want, kinds); diff != "" {
					t.Errorf("events passed on (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// handoffSource hands herdr off live (every connection dropped, new
// terminal ids) inside the cache's second subscription, before herdr sees
// it: the stream that subscription replaces was dropped, and the cache,
// busy opening the new one, has not read its end.
type handoffSource struct {
	herdrcache.Source
	srv  *herdrsim.Server
	mu   sync.Mutex
	subs int
}

func (s *handoffSource) Subscribe(ctx context.Context, subs []herdr.Subscription) (herdrcache.Stream, error) {
	s.mu.Lock()
	s.subs++
	second := s.subs == 2
	s.mu.Unlock()
	if second {
		if err := s.srv.Handoff(); err != nil {
			return nil, err
		}
	}
	return s.Source.Subscribe(ctx, subs)
}

// A live handoff while the cache resubscribes for a newly watched pane
// (the old stream dropped, the new one opened on the new herdr) is seen:
// the cache reads herdr again and shows the pane under its new terminal
// id. (It kept the old one — nothing else would move it, a handoff sends
// no event — and the member controller kept the worker Ready on a
// terminal herdr no longer had.)
func TestCache_OnFakeHerdr_HandoffWhileResubscribingIsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, srv, ws, _ := startAgentW(t, herdrsim.DefaultProtocol)
		pane, old := ws.RootPane.PaneID, ws.RootPane.TerminalID
		src := &handoffSource{Source: herdrcache.FromClient(herdr.New(&herdr.Options{Dial: srv.Dial})), srv: srv}
		cache := herdrcache.New(src, &herdrcache.Options{Logger: slog.New(slog.DiscardHandler), ResyncPeriod: time.Hour, CallTimeout: 5 * time.Second})
		var watching sync.Mutex
		watched := false
		cache.Watch(func() []string {
			watching.Lock()
			defer watching.Unlock()
			if watched {
				return []string{pane}
			}
			return nil
		})
		runCache(t, ctx, cache)
		synctest.Wait()
		if _, ok := cache.Pane(old, pane); !ok {
			t.Fatalf("the cache does not show pane %s under terminal %s before the handoff", pane, old)
		}

		watching.Lock()
		watched = true
		watching.Unlock()
		cache.Rewatch()
		time.Sleep(time.Second) // the resubscribe delay: the second subscription, and the handoff in it
		synctest.Wait()
		p, ok := srv.Pane(pane)
		if !ok || p.TerminalID == old {
			t.Fatalf("herdr after the handoff: pane %+v, %v; want a new terminal id", p, ok)
		}
		if _, ok := cache.Pane(p.TerminalID, pane); !ok {
			got, _ := cache.Pane("", pane)
			t.Errorf("after the handoff the cache shows pane %s under terminal %q; want %q", pane, got.TerminalID, p.TerminalID)
		}
	})
}
