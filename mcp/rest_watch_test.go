package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// liveFleet is a MemberSource and MemberWaiter whose members a test
// changes, broadcasting each change the way controllers.Manager does.
type liveFleet struct {
	mu      sync.Mutex
	members map[string]v1alpha1.Member
	changed notify.Signal
}

func newLiveFleet(ms ...v1alpha1.Member) *liveFleet {
	f := &liveFleet{members: map[string]v1alpha1.Member{}}
	for _, m := range ms {
		f.members[m.Name] = m
	}
	return f
}

func (f *liveFleet) Members() []v1alpha1.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]v1alpha1.Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *liveFleet) Member(name string) (v1alpha1.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[name]
	return m, ok
}

func (f *liveFleet) MemberEvents(string) []v1alpha1.Event { return nil }

func (f *liveFleet) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	return notify.Wait(ctx, &f.changed, func() bool { return cond(f.Members()) })
}

// set writes (or, with remove, deletes) a member and broadcasts.
func (f *liveFleet) set(m v1alpha1.Member, remove bool) {
	f.mu.Lock()
	if remove {
		delete(f.members, m.Name)
	} else {
		f.members[m.Name] = m
	}
	f.mu.Unlock()
	f.changed.Notify()
}

func member(name, phase string) v1alpha1.Member {
	return v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Status: v1alpha1.MemberStatus{Phase: phase}}
}

// sseReader reads a watch stream event by event.
type sseReader struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// openWatch starts GET /members?watch=1 as token; the request ends with ctx.
func openWatch(ctx context.Context, t *testing.T, url, token string) *sseReader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/members?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event as "TYPE name phase", or the comment line
// as it came; "EOF" when the stream ended.
func (r *sseReader) next() string {
	r.t.Helper()
	var typ, data string
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			return line
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && typ != "":
			var ev struct {
				Type   string
				Object v1alpha1.Member
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				r.t.Fatalf("event data %q: %v", data, err)
			}
			if ev.Type != typ {
				r.t.Fatalf("event %s carries type %s", typ, ev.Type)
			}
			if typ == WatchSynced || typ == WatchError {
				return typ
			}
			return fmt.Sprintf("%s %s %s", typ, ev.Object.Name, ev.Object.Status.Phase)
		}
	}
	return "EOF"
}

func (r *sseReader) expect(want ...string) {
	r.t.Helper()
	var got []string
	for range want {
		got = append(got, r.next())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		r.t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func newWatchServer(t *testing.T, fleet interface {
	MemberSource
	MemberWaiter
}, opts Options) (*httptest.Server, *Handler) {
	t.Helper()
	opts.Members, opts.Waiter = fleet, fleet
	opts.Tokens = fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a"}, "other-secret": {Role: "worker", Member: "b"}}
	h, err := NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.EndStreams()
		srv.Close()
	})
	return srv, h
}

func TestWatch_StreamsTheStateThenOneEventPerChange(t *testing.T) {
	fleet := newLiveFleet(member("a", "Pending"), member("b", "Ready"))
	srv, _ := newWatchServer(t, fleet, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := openWatch(ctx, t, srv.URL, "primary-secret")
	if ct := r.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	r.expect("ADDED a Pending", "ADDED b Ready", "SYNCED")
	fleet.set(member("a", "Ready"), false)
	r.expect("MODIFIED a Ready")
	fleet.set(member("b", "Ready"), false) // no change: no event
	fleet.set(member("c", "Starting"), false)
	fleet.set(member("b", ""), true)
	r.expect("ADDED c Starting", "DELETED b Ready")

	// A second watcher starts from the state as it is now.
	r2 := openWatch(ctx, t, srv.URL, "worker-secret")
	r2.expect("ADDED a Ready", "ADDED c Starting", "SYNCED")
}

// TestWatch_EndStreamsClosesStreamsAndRefusesNewOnes: the one shutdown
// hook, EndStreams, ends the watch streams as it does the log followers.
func TestWatch_EndStreamsClosesStreamsAndRefusesNewOnes(t *testing.T) {
	fleet := newLiveFleet(member("a", "Ready"))
	srv, h := newWatchServer(t, fleet, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := openWatch(ctx, t, srv.URL, "primary-secret")
	r.expect("ADDED a Ready", "SYNCED")
	h.EndStreams()
	r.expect("EOF")
	r2 := openWatch(ctx, t, srv.URL, "primary-secret")
	if r2.resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("watch after EndStreams: %d, want 503", r2.resp.StatusCode)
	}
}

func TestWatch_HeartbeatOnAQuietStream(t *testing.T) {
	fleet := newLiveFleet(member("a", "Ready"))
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	srv, _ := newWatchServer(t, fleet, Options{Clock: clk, WatchHeartbeat: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := openWatch(ctx, t, srv.URL, "primary-secret")
	r.expect("ADDED a Ready", "SYNCED")
	for range 2 {
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Step(10 * time.Second)
		r.expect(": heartbeat")
	}
}

func TestWatch_Refusals(t *testing.T) {
	fleet := newLiveFleet(member("a", "Ready"))
	srv, _ := newWatchServer(t, fleet, Options{MaxWatchersPerToken: 2, MaxWatchers: 4}) // a quarter, 1, is the primary's
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		openWatch(ctx, t, srv.URL, "worker-secret").expect("ADDED a Ready", "SYNCED")
	}
	if r := openWatch(ctx, t, srv.URL, "worker-secret"); r.resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third stream of one worker token: %d, want 429", r.resp.StatusCode)
	}
	// Another worker has its own allowance, but the workers together
	// never take the primary's share.
	openWatch(ctx, t, srv.URL, "other-secret").expect("ADDED a Ready", "SYNCED")
	if r := openWatch(ctx, t, srv.URL, "other-secret"); r.resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a worker's stream past the workers' share: %d, want 429", r.resp.StatusCode)
	}
	openWatch(ctx, t, srv.URL, "primary-secret").expect("ADDED a Ready", "SYNCED")

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/members?watch=1", nil)
	req.Header.Set("Authorization", "Bearer primary-secret")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("Accept: application/json: %d, want 406", resp.StatusCode)
	}

	noWaiter, err := NewHandler(Options{Members: fleet, Tokens: fakeTokens{"p": {Role: "primary"}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodGet, "/members?watch=true", nil)
	req.Header.Set("Authorization", "Bearer p")
	noWaiter.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotImplemented {
		t.Errorf("watch without a Waiter: %d, want 501", rec.Code)
	}
}

// A watcher's queue is bounded by bytes as well as by events: a watcher
// that does not read while large members change is dropped once what it
// has queued passes the bound, long before its 512 events.
func TestWatchHub_DropsAWatcherPastItsByteBound(t *testing.T) {
	hub, feed, sub, ws := hubOf(t, newLiveFleet(), 1)
	slow := ws[0]
	big := member("a", "Ready")
	big.Annotations = map[string]string{"note": strings.Repeat("x", 256<<10)}
	published := 0
	for dropped := false; !dropped; published++ {
		big.Status.Restarts = int32(published)
		hub.publish(sub, []v1alpha1.Member{big})
		select {
		case <-slow.dropped:
			dropped = true
		default:
		}
		if published > watchBuffer {
			t.Fatalf("a watcher that reads nothing was not dropped after %d events of 256 KiB", published)
		}
	}
	if max := watchBufferBytes/(256<<10) + 2; published > max {
		t.Errorf("dropped after %d events of 256 KiB, want at most %d (%d MiB)", published, max, watchBufferBytes>>20)
	}
	hub.leave(slow)
	<-feed.returned
}

func TestWatchHub_DropsASlowWatcherWithoutBlockingTheOthers(t *testing.T) {
	hub, feed, sub, ws := hubOf(t, newLiveFleet(), 2)
	slow, fast := ws[0], ws[1]
	got := 0
	for i := range watchBuffer + 1 {
		// Returns at once every time, though slow never reads.
		hub.publish(sub, []v1alpha1.Member{member("a", fmt.Sprint(i))})
		fast.queued.Add(-int64(len(<-fast.frames)))
		got++
	}
	if got != watchBuffer+1 {
		t.Fatalf("fast watcher got %d events", got)
	}
	select {
	case <-slow.dropped:
	default:
		t.Fatal("the slow watcher was not dropped")
	}
	select {
	case <-fast.dropped:
		t.Fatal("the fast watcher was dropped")
	default:
	}
	hub.leave(fast)
	hub.leave(slow) // already gone: a no-op
	<-feed.returned // the subscription stopped with the last watcher
}

// hubOf returns a hub of fleet on a feed that never sees a change, with n
// watchers joined, and its subscription: the test calls publish on it as
// the feed would.
func hubOf(tb testing.TB, fleet *liveFleet, n int) (*watchHub, idleWaiter, *subscription, []*watcher) {
	tb.Helper()
	feed := idleWaiter{returned: make(chan struct{})}
	hub := newWatchHub(context.Background(), fleet, feed)
	var ws []*watcher
	for range n {
		w, _, err := hub.join()
		if err != nil {
			tb.Fatal(err)
		}
		ws = append(ws, w)
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	return hub, feed, hub.sub, ws
}

// idleWaiter is a subscription that never sees a change.
type idleWaiter struct{ returned chan struct{} }

func (w idleWaiter) WaitFor(ctx context.Context, _ func([]v1alpha1.Member) bool) error {
	<-ctx.Done()
	close(w.returned)
	return ctx.Err()
}

// BenchmarkWatchHub_Publish measures one status change of one member in a
// fleet of 1000 with 8 watchers: the diff and the fan-out.
func BenchmarkWatchHub_Publish(b *testing.B) {
	all := make([]v1alpha1.Member, 1000)
	for i := range all {
		all[i] = member(fmt.Sprintf("m%04d", i), "Ready")
	}
	hub, feed, sub, ws := hubOf(b, newLiveFleet(all...), 8)
	b.ResetTimer()
	for i := range b.N {
		all[7].Status.Restarts = int32(i + 1)
		hub.publish(sub, all)
		for _, w := range ws {
			w.queued.Add(-int64(len(<-w.frames)))
		}
	}
	b.StopTimer()
	for _, w := range ws {
		hub.leave(w)
	}
	<-feed.returned
}
