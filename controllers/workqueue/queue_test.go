package workqueue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func get(t *testing.T, q *Queue) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, ok := q.Get(ctx)
	if !ok {
		t.Fatal("Get returned no key")
	}
	return k
}

// waitTimer blocks until the fake clock has at least n pending timers.
func waitTimers(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		// Take the channel before looking, or a timer armed in between
		// would be missed.
		added := c.TimerAdded()
		if c.Waiters() >= n {
			return
		}
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("timed out waiting for %d timers (have %d)", n, c.Waiters())
		}
	}
}

func TestQueue_DeduplicatesWaitingKeys(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	for _, k := range []string{"a", "b", "a", "c", "b"} {
		q.Add(k)
	}
	var got []string
	for q.Len() > 0 {
		k := get(t, q)
		got = append(got, k)
		q.Done(k)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestQueue_KeyAddedWhileProcessingComesBackAfterDone(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	q.Add("a")
	k := get(t, q)
	q.Add("a")
	if q.Len() != 0 {
		t.Fatalf("key being processed was handed out twice: Len = %d", q.Len())
	}
	q.Done(k)
	if q.Len() != 1 {
		t.Fatalf("Len after Done = %d, want 1", q.Len())
	}
	if got := get(t, q); got != "a" {
		t.Errorf("got %q", got)
	}
}

func TestQueue_AddAfterWaitsForClock(t *testing.T) {
	c := clock.NewFake(t0)
	q := New(&Options{Clock: c})
	defer q.ShutDown()
	q.AddAfter("late", time.Minute)
	q.AddAfter("late", 2*time.Minute) // the earlier deadline wins
	waitTimers(t, c, 1)
	c.Step(59 * time.Second)
	if q.Len() != 0 || q.Idle() {
		t.Fatalf("delayed key released early (Len %d, Idle %v)", q.Len(), q.Idle())
	}
	c.Step(time.Second)
	if got := get(t, q); got != "late" {
		t.Errorf("got %q", got)
	}
}

func TestQueue_PerItemBackoffDoublesUpToCap(t *testing.T) {
	c := clock.NewFake(t0)
	q := New(&Options{Clock: c, BaseDelay: time.Second, MaxDelay: 10 * time.Second, QPS: -1})
	defer q.ShutDown()
	var delays []time.Duration
	for range 6 {
		q.AddRateLimited("k")
		waitTimers(t, c, 1)
		next, _ := c.NextDeadline()
		delays = append(delays, next.Sub(c.Now()))
		c.SetTime(next)
		q.Done(get(t, q))
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	if q.NumRequeues("k") != 6 {
		t.Errorf("NumRequeues = %d", q.NumRequeues("k"))
	}
	q.Forget("k")
	if q.NumRequeues("k") != 0 {
		t.Errorf("NumRequeues after Forget = %d", q.NumRequeues("k"))
	}
}

func TestRateLimiter_TokenBucketLimitsOverallRate(t *testing.T) {
	r := newRateLimiter(time.Millisecond, time.Millisecond, 10, 2)
	var got []time.Duration
	for i := range 4 {
		got = append(got, r.when(string(rune('a'+i)), t0))
	}
	want := []time.Duration{time.Millisecond, time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	// One second later the bucket has refilled to its burst.
	if d := r.when("z", t0.Add(time.Second)); d != time.Millisecond {
		t.Errorf("after refill: %v", d)
	}
}

// The bucket's wait runs on the queue's clock: with the burst spent, the
// next rate-limited key comes out 1/QPS later on the fake clock, not on the
// wall clock.
func TestQueue_TokenBucketWaitsOnTheQueueClock(t *testing.T) {
	c := clock.NewFake(t0)
	q := New(&Options{Clock: c, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: 10, Burst: 1})
	defer q.ShutDown()
	q.AddRateLimited("a")
	q.AddRateLimited("b")
	var released []time.Duration
	for range 2 {
		waitTimers(t, c, 1)
		next, _ := c.NextDeadline()
		c.SetTime(next)
		q.Done(get(t, q))
		released = append(released, c.Now().Sub(t0))
	}
	if diff := cmp.Diff([]time.Duration{time.Millisecond, 100 * time.Millisecond}, released); diff != "" {
		t.Errorf("release times (-want +got):\n%s", diff)
	}
}

func TestQueue_ShutDownReleasesGetAndIgnoresAdds(t *testing.T) {
	q := New(nil)
	done := make(chan bool)
	go func() {
		_, ok := q.Get(context.Background())
		done <- ok
	}()
	q.ShutDown()
	if <-done {
		t.Error("Get returned a key after ShutDown")
	}
	q.Add("x")
	q.AddAfter("y", time.Hour)
	if q.Len() != 0 || !q.ShuttingDown() {
		t.Errorf("queue accepted work after ShutDown")
	}
	q.ShutDown() // idempotent
}

func TestQueue_GetHonoursContext(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := q.Get(ctx); ok {
		t.Error("Get with a cancelled context returned a key")
	}
}

func TestMetrics_SeriesMoveAndLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := clock.NewFake(t0)
	q := New(&Options{Name: "member", Clock: c, Metrics: NewMetrics(reg)})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	if got := testutil.ToFloat64(q.metrics.depth); got != 2 {
		t.Errorf("depth = %v", got)
	}
	k := get(t, q)
	c.Step(time.Second)
	q.Done(k)
	q.AddRateLimited("a")
	want := `
# HELP fleetd_workqueue_adds_total Total number of adds handled by the work queue.
# TYPE fleetd_workqueue_adds_total counter
fleetd_workqueue_adds_total{name="member"} 2
# HELP fleetd_workqueue_depth Current number of keys waiting in the work queue.
# TYPE fleetd_workqueue_depth gauge
fleetd_workqueue_depth{name="member"} 1
# HELP fleetd_workqueue_retries_total Total number of rate-limited retries handled by the work queue.
# TYPE fleetd_workqueue_retries_total counter
fleetd_workqueue_retries_total{name="member"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"fleetd_workqueue_adds_total", "fleetd_workqueue_depth", "fleetd_workqueue_retries_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(q.metrics.workDuration.(prometheus.Collector)); n != 1 {
		t.Errorf("work duration series = %d", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

func TestQueue_WaitInactiveReturnsWhenWorkIsDone(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	q.Add("a")
	k := get(t, q)
	done := make(chan error, 1)
	go func() { done <- q.WaitInactive(context.Background()) }()
	select {
	case <-done:
		t.Fatal("WaitInactive returned while a key was processing")
	default:
	}
	q.Done(k)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q.Active() {
		t.Error("Active after WaitInactive")
	}
}
