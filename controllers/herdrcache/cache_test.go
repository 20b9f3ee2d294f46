package herdrcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
)

type observation struct {
	Pane, Status string
	Seq          uint64
}

// recorder is a Handler that writes down what it is told.
type recorder struct {
	mu       sync.Mutex
	events   []herdr.EventKind
	statuses []observation
	synced   int
	unsynced int
}

func (r *recorder) handler() Handler {
	return Handler{
		OnEvent: func(ev herdr.Event) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, ev.Kind)
		},
		OnAgentStatus: func(pane, status string, seq uint64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.statuses = append(r.statuses, observation{pane, status, seq})
		},
		OnSynced: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.synced++
		},
		OnUnsynced: func(error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.unsynced++
		},
	}
}

func (r *recorder) counts() (synced, unsynced int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced, r.unsynced
}

func (r *recorder) observed() []observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observation(nil), r.statuses...)
}

func (r *recorder) eventKinds() []herdr.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]herdr.EventKind(nil), r.events...)
}

// fixture is a herdr with one workspace, one fleetd tab and one pane with
// an idle agent.
func fixture() *fakeHerdr {
	f := newFake()
	f.workspaces = []herdr.WorkspaceInfo{{WorkspaceID: "w1", Label: "fleetd"}}
	f.tabs = []herdr.TabInfo{{TabID: "t1", WorkspaceID: "w1", Label: "fleetd/alpha"}}
	f.addPane(herdr.PaneInfo{PaneID: "p1", TerminalID: "T1", TabID: "t1", WorkspaceID: "w1"}, herdr.StatusIdle)
	return f
}

var testOpts = Options{
	Logger: slog.New(slog.DiscardHandler), ResyncPeriod: time.Minute, CallTimeout: time.Second,
	ReconnectBackoff: 100 * time.Millisecond, MaxReconnect: time.Second, ResubscribeDelay: 50 * time.Millisecond,
	MissingPaneBackoff: 100 * time.Millisecond, MaxMissingPaneBackoff: 400 * time.Millisecond,
}

// start runs a cache on f, with r's handler and the given watched panes,
// until the test's bubble ends. Call it inside synctest.Test.
func start(t *testing.T, f *fakeHerdr, r *recorder, watch func() []string) *Cache {
	t.Helper()
	c := New(f, &testOpts)
	c.AddHandler(r.handler())
	if watch != nil {
		c.Watch(watch)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	synctest.Wait()
	return c
}

func panes(ids ...string) func() []string { return func() []string { return ids } }

// startWatching is start with the watched panes the test sets: panes at
// first, then those of each call of watch.
func startWatching(t *testing.T, f *fakeHerdr, r *recorder, panes ...string) (c *Cache, watch func(panes ...string)) {
	t.Helper()
	var mu sync.Mutex
	watched := panes
	c = start(t, f, r, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return watched
	})
	return c, func(panes ...string) {
		mu.Lock()
		watched = panes
		mu.Unlock()
	}
}

func TestCache_ListingInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		c := start(t, f, r, panes("p1"))
		if !c.Synced() {
			t.Fatal("not synced after a complete listing")
		}
		p, ok := c.Pane("T1", "")
		if !ok || p.PaneID != "p1" || !p.HasAgent || p.Agent.AgentStatus != herdr.StatusIdle {
			t.Errorf("Pane(T1) = %+v, %v; want p1 with its idle agent", p, ok)
		}
		if w, ok := c.WorkspaceByLabel("fleetd"); !ok || w.WorkspaceID != "w1" {
			t.Errorf("WorkspaceByLabel(fleetd) = %+v, %v", w, ok)
		}
		if tabs := c.TabsWithLabelPrefix("fleetd/"); len(tabs) != 1 || tabs[0].TabID != "t1" {
			t.Errorf("TabsWithLabelPrefix = %+v, want t1", tabs)
		}
		// The listing comes after the subscription: no catch-up needed.
		want := map[string]int{"ping": 1, "workspace.list": 1, "tab.list": 1, "pane.list": 1,
			"agent.list": 1, "events.subscribe": 1}
		if diff := cmp.Diff(want, f.callCounts()); diff != "" {
			t.Errorf("herdr calls (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([][]string{{"p1"}}, f.subscriptions()); diff != "" {
			t.Errorf("subscriptions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]observation{{"p1", "idle", 1}}, r.observed()); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		if s, u := r.counts(); s != 1 || u != 0 {
			t.Errorf("OnSynced %d, OnUnsynced %d; want 1 and 0", s, u)
		}

		// A converged, idle cache costs herdr one listing per resync.
		before := f.callCounts()
		time.Sleep(testOpts.ResyncPeriod)
		synctest.Wait()
		after := f.callCounts()
		delta := map[string]int{}
		for m, n := range after {
			if d := n - before[m]; d != 0 {
				delta[m] = d
			}
		}
		if diff := cmp.Diff(map[string]int{"workspace.list": 1, "tab.list": 1, "pane.list": 1, "agent.list": 1}, delta); diff != "" {
			t.Errorf("herdr calls of one resync (-want +got):\n%s", diff)
		}
	})
}

func TestCache_PaneClosedEventRemovesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		c := start(t, f, r, nil)
		f.send(herdr.Event{Kind: herdr.EventPaneCreated, PaneID: "p9"}) // a replay: not applied
		f.send(herdr.Event{Kind: herdr.EventPaneClosed, PaneID: "p1"})
		synctest.Wait()
		if _, ok := c.Pane("T1", "p1"); ok {
			t.Error("pane p1 still cached after pane_closed")
		}
		if _, ok := c.Pane("", "p9"); ok {
			t.Error("a pane_created replay was applied")
		}
		if diff := cmp.Diff([]herdr.EventKind{herdr.EventPaneClosed}, r.eventKinds()); diff != "" {
			t.Errorf("OnEvent (-want +got):\n%s", diff)
		}
		f.send(herdr.Event{Kind: herdr.EventTabClosed, TabID: "t1"})
		synctest.Wait()
		if tabs := c.TabsWithLabelPrefix(""); len(tabs) != 0 {
			t.Errorf("tabs after tab_closed: %+v", tabs)
		}
	})
}

// A writer's report made while a listing was under way survives that
// listing, which began before herdr had the change.
func TestCache_LocalWriteNewerThanListingSurvives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		c := start(t, f, r, nil)
		created := herdr.TabCreated{
			Tab:      herdr.TabInfo{TabID: "t2", WorkspaceID: "w1", Label: "fleetd/beta"},
			RootPane: herdr.PaneInfo{PaneID: "p2", TerminalID: "T2", TabID: "t2", WorkspaceID: "w1"},
		}
		f.mu.Lock()
		f.duringList = func() {
			c.TabCreated(created) // herdr's pane.list answer predates it
			c.TabClosed("t1")     // and still shows this tab and its pane
		}
		f.mu.Unlock()
		time.Sleep(testOpts.ResyncPeriod)
		synctest.Wait()
		if n := f.callCounts()["pane.list"]; n != 2 {
			t.Fatalf("pane.list called %d times, want the resync's", n)
		}
		if _, ok := c.Pane("T2", "p2"); !ok {
			t.Error("the tab created during the listing was undone by it")
		}
		if _, ok := c.Pane("T1", "p1"); ok {
			t.Error("the tab closed during the listing was resurrected by it")
		}
		// A listing that began after the writes is believed again.
		f.mu.Lock()
		f.duringList = nil
		f.mu.Unlock()
		time.Sleep(testOpts.ResyncPeriod)
		synctest.Wait()
		if _, ok := c.Pane("T2", "p2"); ok {
			t.Error("a pane herdr does not list outlived a later listing")
		}
		if _, ok := c.Pane("T1", "p1"); !ok {
			t.Error("a pane herdr lists is missing after a later listing")
		}
	})
}

// A stream that ends, however it ends, is followed by a new listing and a
// new subscription; nothing it covered counts as gone meanwhile.
func TestCache_DroppedStreamResubscribesAndRelists(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		unsynced int // OnUnsynced calls: only a herdr that went away unsyncs the cache
	}{
		{"events lost", fmt.Errorf("%w: %w", herdr.ErrStreamDropped, &herdr.Error{Method: "events.subscribe", Code: "events_lost"}), 0},
		{"connection broke", &herdr.TransportError{Method: "events.subscribe", Reason: herdr.ReasonClosed, Err: herdr.ErrStreamDropped}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, r := fixture(), &recorder{}
				c := start(t, f, r, panes("p1"))
				before := f.callCounts()
				f.drop(tc.err)
				synctest.Wait()
				if _, ok := c.Pane("T1", ""); !ok {
					t.Error("the pane counted as gone after its stream ended")
				}
				if s, u := r.counts(); s != 1 || u != tc.unsynced {
					t.Errorf("OnSynced %d, OnUnsynced %d right after the drop; want 1 and %d", s, u, tc.unsynced)
				}
				time.Sleep(testOpts.ReconnectBackoff)
				synctest.Wait()
				after := f.callCounts()
				for _, m := range []string{"workspace.list", "pane.list", "events.subscribe"} {
					if after[m] != before[m]+1 {
						t.Errorf("%s called %d times after the drop, want 1", m, after[m]-before[m])
					}
				}
				if !c.Synced() {
					t.Error("not synced after the relisting")
				}
				if diff := cmp.Diff([][]string{{"p1"}, {"p1"}}, f.subscriptions()); diff != "" {
					t.Errorf("subscriptions (-want +got):\n%s", diff)
				}
				if got := r.eventKinds(); len(got) != 0 {
					t.Errorf("events passed on: %v, want none", got)
				}
				// The status the new stream reports is numbered on.
				f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p1", AgentStatus: herdr.StatusWorking})
				synctest.Wait()
				obs := r.observed()
				if last := obs[len(obs)-1]; last != (observation{"p1", "working", 2}) {
					t.Errorf("last status %+v, want working with seq 2 (all: %+v)", last, obs)
				}
			})
		})
	}
}

func TestCache_ResubscribesWhenWatchedPanesChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.addPane(herdr.PaneInfo{PaneID: "p2", TerminalID: "T2", TabID: "t1", WorkspaceID: "w1"}, herdr.StatusBlocked)
		c, watch := startWatching(t, f, r, "p1")
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p1"}) {
			t.Fatalf("Subscribed = %v, want [p1]", got)
		}
		watch("p2", "p1")
		agentLists := f.callCounts()["agent.list"]
		for range 3 { // a burst: one renewal
			c.Rewatch()
			time.Sleep(testOpts.ResubscribeDelay / 4)
		}
		synctest.Wait()
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p1"}) {
			t.Errorf("resubscribed before the burst settled: %v", got)
		}
		time.Sleep(testOpts.ResubscribeDelay)
		synctest.Wait()
		if diff := cmp.Diff([][]string{{"p1"}, {"p1", "p2"}}, f.subscriptions()); diff != "" {
			t.Errorf("subscriptions (-want +got):\n%s", diff)
		}
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p1", "p2"}) {
			t.Errorf("Subscribed = %v, want [p1 p2]", got)
		}
		if n := f.callCounts()["agent.list"] - agentLists; n != 1 {
			t.Errorf("agent.list called %d times after resubscribing, want 1 (the catch-up)", n)
		}
		if obs := r.observed(); obs[len(obs)-1] != (observation{"p2", "blocked", 1}) {
			t.Errorf("statuses %+v; want the new pane's caught up", obs)
		}
		// The same set again costs nothing.
		c.Rewatch()
		time.Sleep(2 * testOpts.ResubscribeDelay)
		synctest.Wait()
		if n := len(f.subscriptions()); n != 2 {
			t.Errorf("%d subscriptions after an unchanged rewatch, want 2", n)
		}
	})
}

// A renewal of the stream and its catch-up listing take herdr a while with
// many panes. Neither holds up the events meanwhile, and the listing, which
// may be older, does not overwrite a status the new stream brought.
func TestCache_RenewalHoldsNoEventUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.addPane(herdr.PaneInfo{PaneID: "p2", TerminalID: "T2", TabID: "t1", WorkspaceID: "w1"}, herdr.StatusBlocked)
		c, watch := startWatching(t, f, r, "p1")
		subscribing, listing := make(chan struct{}), make(chan struct{})
		f.mu.Lock()
		f.beforeSubscribe = func() { <-subscribing }
		f.duringAgentList = func() { <-listing }
		f.mu.Unlock()
		watch("p1", "p2")
		c.Rewatch()
		time.Sleep(testOpts.ResubscribeDelay)
		synctest.Wait() // the renewal waits for herdr's acknowledgement

		f.setStatus("p1", herdr.StatusWorking)
		f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p1", AgentStatus: herdr.StatusWorking})
		synctest.Wait()
		if obs := r.observed(); obs[len(obs)-1] != (observation{"p1", "working", 2}) {
			t.Fatalf("statuses %+v while the renewal waits; want p1's working passed on", obs)
		}

		close(subscribing)
		synctest.Wait() // the new stream runs; its catch-up listing is on its way
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p1", "p2"}) {
			t.Fatalf("Subscribed = %v, want [p1 p2]", got)
		}
		f.setStatus("p2", herdr.StatusWorking)
		f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p2", AgentStatus: herdr.StatusWorking})
		synctest.Wait()
		if obs := r.observed(); obs[len(obs)-1] != (observation{"p2", "working", 1}) {
			t.Fatalf("statuses %+v while the listing runs; want p2's working passed on", obs)
		}

		close(listing) // the listing, read before p2 began working, shows it blocked
		synctest.Wait()
		var p2 observation
		for _, o := range r.observed() {
			if o.Pane == "p2" {
				p2 = o
			}
		}
		if p2 != (observation{"p2", "working", 1}) {
			t.Errorf("statuses %+v; the older listing overwrote p2's status from the stream", r.observed())
		}
		if p, _ := c.Pane("", "p2"); p.Agent.AgentStatus != herdr.StatusWorking {
			t.Errorf("p2's agent in the cache: %q, want working", p.Agent.AgentStatus)
		}
	})
}

func TestCache_HerdrDownIsUnsynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.setDown(true)
		c := start(t, f, r, panes("p1"))
		time.Sleep(3 * testOpts.MaxReconnect)
		synctest.Wait()
		if c.Synced() {
			t.Fatal("synced while herdr is down")
		}
		if _, ok := c.Pane("T1", "p1"); ok {
			t.Error("a pane cached from no listing")
		}
		calls := f.callCounts()
		if calls["ping"] < 3 || calls["workspace.list"] != 0 {
			t.Errorf("calls while down %v; want pings retried and nothing listed", calls)
		}
		if s, u := r.counts(); s != 0 || u != 0 {
			t.Errorf("OnSynced %d, OnUnsynced %d before herdr was ever up", s, u)
		}
		f.setDown(false)
		time.Sleep(testOpts.MaxReconnect)
		synctest.Wait()
		if !c.Synced() {
			t.Fatal("not synced after herdr came back")
		}
		// herdr goes away: unsynced once, the cached panes are kept (an
		// unsynced cache is no evidence of anything), and it reconnects
		// with a protocol check.
		pings := f.callCounts()["ping"]
		f.setDown(true)
		synctest.Wait()
		if c.Synced() {
			t.Error("synced after the stream broke")
		}
		if _, ok := c.Pane("T1", "p1"); !ok {
			t.Error("losing herdr dropped a cached pane")
		}
		c.Invalidate(errors.New("a reconciler's call failed too"))
		synctest.Wait()
		if s, u := r.counts(); s != 1 || u != 1 {
			t.Errorf("OnSynced %d, OnUnsynced %d; want 1 and 1 (once per loss)", s, u)
		}
		f.setDown(false)
		time.Sleep(testOpts.MaxReconnect)
		synctest.Wait()
		if !c.Synced() || f.callCounts()["ping"] == pings {
			t.Errorf("synced %v, pings %d→%d; want a protocol check and a new listing", c.Synced(), pings, f.callCounts()["ping"])
		}
	})
}

func TestCache_AgentStatusNumbering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.setStatus("p1", herdr.StatusWorking)
		start(t, f, r, panes("p1"))
		for _, s := range []herdr.AgentStatus{"blocked", "idle", "done", "idle", "", "working",
			"unknown", "compacting", "compacting", "thinking", "working", "thinking", "done"} {
			f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p1", AgentStatus: s})
		}
		synctest.Wait()
		want := []observation{
			{"p1", "working", 1}, // the listing
			{"p1", "blocked", 2}, {"p1", "idle", 3},
			{"p1", "done", 3}, {"p1", "idle", 3}, // idle and done are one state
			{"p1", "working", 4}, // an empty status is not passed on
			{"p1", "unknown", 5},
			// Statuses the protocol does not name (a newer herdr's) are
			// states of their own, as any other.
			{"p1", "compacting", 6}, {"p1", "compacting", 6}, {"p1", "thinking", 7},
			{"p1", "working", 8}, {"p1", "thinking", 9}, {"p1", "done", 10},
		}
		if diff := cmp.Diff(want, r.observed()); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
	})
}

// A pane's status numbering is kept while the view holds the pane or it is
// watched, and forgotten otherwise when the cache next prunes (at a
// subscription or a read): a pane id seen again then counts from 1.
func TestCache_StatusNumberingIsForgottenWithThePane(t *testing.T) {
	c, r := New(newFake(), nil), &recorder{}
	c.AddHandler(r.handler())
	c.view.setPane(herdr.PaneInfo{PaneID: "p1", TerminalID: "term_1", TabID: "t1"})
	panes := []string{"p3", "p1", "p2"} // p1 in the view, p2 watched, p3 neither
	for _, p := range panes {
		c.observe(p, "working")
		c.observe(p, "idle")
	}
	c.pruneStatuses(map[string]bool{"p2": true})
	for _, p := range panes {
		c.observe(p, "working")
	}
	want := []observation{
		{"p3", "working", 1}, // forgotten
		{"p1", "working", 3}, {"p2", "working", 3},
	}
	if diff := cmp.Diff(want, r.observed()[6:]); diff != "" {
		t.Errorf("statuses after the prune (-want +got):\n%s", diff)
	}
}

// A watched pane herdr does not have yet is left out of the subscription
// (which would be refused whole) and tried with a capped backoff until it
// exists; its status is passed on once known.
func TestCache_MissingWatchedPaneIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		c := start(t, f, r, panes("p7"))
		if got := c.Subscribed(); len(got) != 0 {
			t.Fatalf("Subscribed = %v, want nothing yet", got)
		}
		time.Sleep(testOpts.MissingPaneBackoff + testOpts.MissingPaneBackoff*2 + testOpts.MissingPaneBackoff*4 + testOpts.MaxMissingPaneBackoff)
		synctest.Wait()
		// The first subscription with p7, refused; the one without it; the
		// refused probes, 100, 200, 400, 400 ms apart.
		if n := f.callCounts()["events.subscribe"]; n != 6 {
			t.Errorf("events.subscribe called %d times, want 1 refused + 1 + 4 refused probes", n)
		}
		if obs := r.observed(); len(obs) != 0 {
			t.Errorf("statuses passed on for a pane that does not exist: %+v", obs)
		}
		f.addPane(herdr.PaneInfo{PaneID: "p7", TerminalID: "T7", TabID: "t1", WorkspaceID: "w1"}, herdr.StatusIdle)
		time.Sleep(testOpts.MaxMissingPaneBackoff)
		synctest.Wait()
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p7"}) {
			t.Fatalf("Subscribed = %v, want [p7]", got)
		}
		if diff := cmp.Diff([]observation{{"p7", "idle", 1}}, r.observed()); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p7", AgentStatus: herdr.StatusWorking})
		synctest.Wait()
		if obs := r.observed(); obs[len(obs)-1] != (observation{"p7", "working", 2}) {
			t.Errorf("statuses %+v; want working numbered 2", obs)
		}
		// Confirmed by the subscription, the pane stays covered when the
		// watched set is renewed before any listing shows it.
		c.Rewatch()
		time.Sleep(2 * testOpts.ResubscribeDelay)
		synctest.Wait()
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p7"}) {
			t.Errorf("Subscribed after a rewatch = %v, want [p7]", got)
		}
	})
}
