package herdrcache

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// errEventsLost is how a herdr.Stream ends when herdr sends events_lost.
var errEventsLost = fmt.Errorf("%w: %w: %w", herdr.ErrStreamDropped, herdr.ErrEventsLost,
	&herdr.Error{Method: "events.subscribe", Code: "events_lost", Message: "resubscribe and resync with session.snapshot"})

// herdr replays nothing to a new subscriber: a change made while the
// subscription is being set up reaches no stream. Reading herdr after the
// subscription is acknowledged sees it; a read taken before would keep a tab
// that is gone until the next resync.
func TestCache_SubscribesBeforeReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.tabs = append(f.tabs, herdr.TabInfo{TabID: "t2", WorkspaceID: "w1", Label: "fleetd/beta"})
		f.addPane(herdr.PaneInfo{PaneID: "p2", TerminalID: "T2", TabID: "t2", WorkspaceID: "w1"}, herdr.StatusIdle)
		var once sync.Once
		f.beforeSubscribe = func() { once.Do(func() { f.closeTab("t2") }) }
		c := start(t, f, r, panes("p1"))
		if _, ok := c.Pane("T2", "p2"); ok {
			t.Error("a pane closed before the subscription was acknowledged is still cached")
		}
		if tabs := c.TabsWithLabelPrefix("fleetd/"); len(tabs) != 1 || tabs[0].TabID != "t1" {
			t.Errorf("tabs %+v, want t1 only", tabs)
		}
		want := []string{"ping", "events.subscribe", "workspace.list", "tab.list", "pane.list", "agent.list"}
		if diff := cmp.Diff(want, f.callOrder()); diff != "" {
			t.Errorf("herdr calls in order (-want +got):\n%s", diff)
		}
	})
}

// Where herdr answers session.snapshot, one call replaces the listings; a
// herdr that does not know the method is listed instead, and not asked again
// at the next resync.
func TestCache_ReadsSessionSnapshot(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      map[string]int // calls of the first read and one resync
		wantSync  bool
		snapshots int
	}{
		{"answered", nil, map[string]int{"ping": 1, "events.subscribe": 1, "session.snapshot": 2}, true, 2},
		{"unknown method", &herdr.Error{Method: "session.snapshot", Code: "unknown_method"},
			map[string]int{"ping": 1, "events.subscribe": 1, "session.snapshot": 1,
				"workspace.list": 2, "tab.list": 2, "pane.list": 2, "agent.list": 2}, true, 1},
		{"not implemented", &herdr.Error{Method: "session.snapshot", Code: "not_implemented"},
			map[string]int{"ping": 1, "events.subscribe": 1, "session.snapshot": 1,
				"workspace.list": 2, "tab.list": 2, "pane.list": 2, "agent.list": 2}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, r := fixture(), &recorder{}
				src := snapshotHerdr{fakeHerdr: f, err: tt.err}
				c := New(src, &testOpts)
				c.AddHandler(r.handler())
				c.Watch(panes("p1"))
				stop := runCache(t, c)
				defer stop()
				time.Sleep(testOpts.ResyncPeriod)
				synctest.Wait()
				if c.Synced() != tt.wantSync {
					t.Fatalf("Synced = %v, want %v", c.Synced(), tt.wantSync)
				}
				if p, ok := c.Pane("T1", ""); !ok || p.Agent.AgentStatus != herdr.StatusIdle {
					t.Errorf("Pane(T1) = %+v, %v; want p1 with its idle agent", p, ok)
				}
				if diff := cmp.Diff(tt.want, f.callCounts()); diff != "" {
					t.Errorf("herdr calls (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// A snapshot herdr refuses for another reason is a failed read: the cache
// stays unsynced and does not list behind herdr's back.
func TestCache_FailedSnapshotIsAFailedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		c := New(snapshotHerdr{fakeHerdr: f, err: &herdr.Error{Method: "session.snapshot", Code: "internal_error"}}, &testOpts)
		c.AddHandler(r.handler())
		defer runCache(t, c)()
		if c.Synced() {
			t.Fatal("synced from a refused snapshot")
		}
		if n := f.callCounts()["workspace.list"]; n != 0 {
			t.Errorf("workspace.list called %d times after a refused snapshot", n)
		}
	})
}

// runCache runs c until the returned func is called (inside a bubble).
func runCache(t *testing.T, c *Cache) (stop func()) {
	t.Helper()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- c.Run(ctx) }()
	synctest.Wait()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// presence is a Handler that checks, at every read installed and every
// event applied, that the cache still holds pane.
type presence struct {
	mu     sync.Mutex
	c      *Cache
	pane   string
	absent []string
}

func (p *presence) handler() Handler {
	check := func(when string) {
		if _, ok := p.c.Pane("", p.pane); !ok {
			p.mu.Lock()
			p.absent = append(p.absent, when)
			p.mu.Unlock()
		}
	}
	return Handler{
		OnSynced: func() { check("synced") },
		OnEvent:  func(ev herdr.Event) { check(string(ev.Kind)) },
	}
}

func (p *presence) missing() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.absent
}

// events_lost ends the stream: the cache subscribes again at once and
// reads herdr again. It stays synced (readers recreate nothing), a pane that lives on is
// never missing, one that closed during the gap is gone, the status change
// no event reported is passed on with its number, and a later change on the
// new stream is seen.
func TestCache_EventsLostResubscribesAndResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.tabs = append(f.tabs, herdr.TabInfo{TabID: "t2", WorkspaceID: "w1", Label: "fleetd/beta"})
		f.addPane(herdr.PaneInfo{PaneID: "p2", TerminalID: "T2", TabID: "t2", WorkspaceID: "w1"}, herdr.StatusWorking)
		c := New(f, &testOpts)
		c.AddHandler(r.handler())
		pr := &presence{c: c, pane: "p1"}
		c.AddHandler(pr.handler())
		c.Watch(panes("p1", "p2"))
		defer runCache(t, c)()
		if got := c.Subscribed(); !cmp.Equal(got, []string{"p1", "p2"}) {
			t.Fatalf("Subscribed = %v, want [p1 p2]", got)
		}

		// The gap: herdr changes things, and the events are lost.
		f.setStatus("p1", herdr.StatusWorking)
		f.closeTab("t2")
		created := herdr.TabCreated{
			Tab:      herdr.TabInfo{TabID: "t3", WorkspaceID: "w1", Label: "fleetd/gamma"},
			RootPane: herdr.PaneInfo{PaneID: "p3", TerminalID: "T3", TabID: "t3", WorkspaceID: "w1"},
		}
		f.mu.Lock()
		f.tabs = append(f.tabs, created.Tab)
		f.panes = append(f.panes, created.RootPane)
		f.mu.Unlock()
		c.TabCreated(created) // a writer's own report, during the gap
		before := f.callCounts()
		// The stream has lived a while: herdr is there, and the cache
		// resubscribes at once, with no backoff.
		time.Sleep(2 * testOpts.MaxReconnect)
		f.drop(errEventsLost)
		synctest.Wait()

		if s, u := r.counts(); s != 2 || u != 0 {
			t.Errorf("OnSynced %d, OnUnsynced %d; want 2 and 0", s, u)
		}
		if got := pr.missing(); len(got) != 0 {
			t.Errorf("p1 was missing from the cache at %v", got)
		}
		if _, ok := c.Pane("T2", "p2"); ok {
			t.Error("p2, closed during the gap, is still cached")
		}
		if _, ok := c.Pane("T3", "p3"); !ok {
			t.Error("p3, created during the gap, is not cached")
		}
		// The whole list is refused for p2, which is gone; the cache
		// subscribes without it, reads, and covers p1 again (no ping: herdr
		// was never lost).
		after := f.callCounts()
		delta := map[string]int{}
		for m, n := range after {
			if d := n - before[m]; d != 0 {
				delta[m] = d
			}
		}
		if diff := cmp.Diff(map[string]int{"events.subscribe": 3, "workspace.list": 1, "tab.list": 1, "pane.list": 1,
			"agent.list": 2}, delta); diff != "" {
			t.Errorf("herdr calls after events_lost (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([][]string{{"p1", "p2"}, nil, {"p1"}}, f.subscriptions()); diff != "" {
			t.Errorf("accepted subscriptions (-want +got):\n%s", diff)
		}
		want := []observation{{"p1", "idle", 1}, {"p2", "working", 1}, {"p1", "working", 2}}
		if diff := cmp.Diff(want, dedupe(r.observed())); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p1", AgentStatus: herdr.StatusIdle})
		synctest.Wait()
		if obs := r.observed(); obs[len(obs)-1] != (observation{"p1", "idle", 3}) {
			t.Errorf("statuses %+v; want idle numbered 3 from the new stream", obs)
		}

		// A stream that loses events again at once is resubscribed after
		// the backoff, not in a tight loop.
		subs := f.callCounts()["events.subscribe"]
		f.drop(errEventsLost)
		synctest.Wait()
		if n := f.callCounts()["events.subscribe"]; n != subs {
			t.Errorf("resubscribed %d times at once after a stream that lived no time", n-subs)
		}
		time.Sleep(testOpts.ReconnectBackoff)
		synctest.Wait()
		// Refused for p2 (still watched, gone), without it, then with p1.
		if n := f.callCounts()["events.subscribe"]; n != subs+3 || !c.Synced() {
			t.Errorf("after the backoff: %d subscriptions, synced %v; want 3, synced", n-subs, c.Synced())
		}
	})
}

// dedupe drops consecutive repeats of the same observation (a read and a
// catch-up may both report an unchanged status).
func dedupe(obs []observation) []observation {
	var out []observation
	seen := map[observation]bool{}
	for _, o := range obs {
		if !seen[o] {
			out = append(out, o)
			seen[o] = true
		}
	}
	return out
}

// A burst of hundreds of events is applied in full and in order.
func TestCache_BurstOfEventsIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		for i := range 40 {
			id := fmt.Sprintf("px%d", i)
			f.addPane(herdr.PaneInfo{PaneID: id, TerminalID: "T" + id, TabID: "t1", WorkspaceID: "w1"}, "")
		}
		c := start(t, f, r, panes("p1"))
		const burst = 500
		var want []observation
		statuses := []herdr.AgentStatus{herdr.StatusWorking, herdr.StatusIdle}
		for i := range burst {
			st := statuses[i%2]
			f.send(herdr.Event{Kind: herdr.EventPaneAgentStatusChanged, PaneID: "p1", AgentStatus: st})
			want = append(want, observation{"p1", string(st), uint64(i + 2)})
			if i%12 == 0 && i/12 < 40 {
				f.send(herdr.Event{Kind: herdr.EventPaneClosed, PaneID: fmt.Sprintf("px%d", i/12)})
			}
		}
		synctest.Wait()
		obs := r.observed()
		if len(obs) < burst {
			t.Fatalf("%d statuses passed on, want the listing's and %d", len(obs), burst)
		}
		if diff := cmp.Diff(want, obs[len(obs)-burst:]); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		for i := range 40 {
			if _, ok := c.Pane("", fmt.Sprintf("px%d", i)); ok {
				t.Errorf("px%d still cached after its pane_closed", i)
			}
		}
	})
}

// fleetd_herdr_info shows the herdr the cache pinged; a herdr that comes
// back as another version replaces the series, and one newer than protocol
// 22 is driven with a warning naming its version.
func TestCache_HerdrInfoMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		f.pong = &herdr.Pong{Version: "0.9.3", Protocol: 22}
		reg := prometheus.NewPedanticRegistry()
		var logs syncbuf.Buffer
		o := testOpts
		o.Metrics = NewMetrics(reg)
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c := New(f, &o)
		c.AddHandler(r.handler())
		defer runCache(t, c)()
		const head = `
# HELP fleetd_herdr_info 1, labelled with the version and socket protocol of the herdr fleetd talks to (from its last ping).
# TYPE fleetd_herdr_info gauge
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`fleetd_herdr_info{protocol="22",version="0.9.3"} 1
`), "fleetd_herdr_info"); err != nil {
			t.Error(err)
		}
		if strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("warned about protocol 22:\n%s", logs.String())
		}

		f.setDown(true)
		synctest.Wait()
		f.mu.Lock()
		f.pong = &herdr.Pong{Version: "0.10.0", Protocol: 23}
		f.mu.Unlock()
		f.setDown(false)
		time.Sleep(testOpts.MaxReconnect)
		synctest.Wait()
		if !c.Synced() {
			t.Fatal("a herdr speaking protocol 23 is not driven")
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`fleetd_herdr_info{protocol="23",version="0.10.0"} 1
`), "fleetd_herdr_info"); err != nil {
			t.Error(err)
		}
		if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "herdr_version=0.10.0") {
			t.Errorf("no warning naming herdr 0.10.0:\n%s", l)
		}

		// A herdr the client refuses is shown too, and not driven.
		f.setDown(true)
		synctest.Wait()
		f.mu.Lock()
		f.pong = &herdr.Pong{Version: "0.7.0", Protocol: 19}
		f.pingErr = fmt.Errorf("%w: herdr 0.7.0 speaks protocol 19", herdr.ErrProtocolMismatch)
		f.mu.Unlock()
		f.setDown(false)
		time.Sleep(testOpts.MaxReconnect)
		synctest.Wait()
		if c.Synced() {
			t.Error("a herdr the client refuses is driven")
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`fleetd_herdr_info{protocol="19",version="0.7.0"} 1
`), "fleetd_herdr_info"); err != nil {
			t.Error(err)
		}
	})
}

// The cache subscribes to no lifecycle event it drops: tab.created and
// pane.created, which it never applies, are the largest events herdr
// sends, two for every tab a fleet starts.
func TestCache_SubscribesToNoEventItDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := fixture(), &recorder{}
		start(t, f, r, panes("p1"))
		kinds := f.subscribedKinds()
		if len(kinds) == 0 {
			t.Fatal("no lifecycle event subscribed to")
		}
		for _, k := range kinds {
			if k == herdr.SubTabCreated || k == herdr.SubPaneCreated {
				t.Errorf("subscribed to %s, which the cache does not apply (kinds %v)", k, kinds)
			}
		}
	})
}
