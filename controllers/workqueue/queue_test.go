package workqueue

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// The tests run inside testing/synctest bubbles, where clock.Real (the
// queue's default) reads virtual time: time passes by time.Sleep, and
// synctest.Wait lets the queue's delay goroutine finish what came due.

// get returns the key a worker gets now, once every goroutine of the bubble
// has settled; it fails the test when no key is ready. It never waits for
// time to pass.
func get(t *testing.T, q *Queue) string {
	t.Helper()
	synctest.Wait()
	now, cancel := context.WithCancel(t.Context())
	cancel() // Get still hands out a key that is ready
	k, ok := q.Get(now)
	if !ok {
		t.Fatal("Get returned no key")
	}
	return k
}

// getAfter blocks in Get, as a worker does, and returns the key and how much
// (virtual) time passed until it came.
func getAfter(t *testing.T, q *Queue) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	k, ok := q.Get(t.Context())
	if !ok {
		t.Fatal("Get returned no key")
	}
	return k, time.Since(start)
}

func TestQueue_DeduplicatesWaitingKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// A burst larger than the room an empty queue keeps, drained, leaves a
// queue that deduplicates and requeues as before: the dirty map made anew
// holds what the old one did (nothing).
func TestQueue_AfterADrainedBurstKeysAreStillDeduplicatedAndRequeued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		defer q.ShutDown()
		for round := range 2 {
			for i := range 3 * keepDirtyRoom {
				q.Add(strconv.Itoa(i))
			}
			var held string
			for n := 0; q.Len() > 0; n++ {
				k := get(t, q)
				if n == 0 {
					held = k // still processing when the burst has drained
					continue
				}
				q.Done(k)
			}
			q.Add("x")
			q.Add("x")
			q.Add(held) // added while processing: back after Done
			if q.Len() != 1 {
				t.Fatalf("round %d: Len = %d after adding x twice and the held key, want 1", round, q.Len())
			}
			if got := get(t, q); got != "x" {
				t.Fatalf("round %d: got %q, want x", round, got)
			}
			q.Done("x")
			q.Done(held)
			if got := get(t, q); got != held {
				t.Fatalf("round %d: got %q, want the held key %q back", round, got, held)
			}
			q.Done(held)
			if q.Len() != 0 || !q.Idle() {
				t.Fatalf("round %d: Len = %d, idle %v after everything was done", round, q.Len(), q.Idle())
			}
		}
	})
}

func TestQueue_KeyAddedWhileProcessingComesBackAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

func TestQueue_AddAfterWaitsForClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		defer q.ShutDown()
		q.AddAfter("late", time.Minute)
		q.AddAfter("late", 2*time.Minute) // the earlier deadline wins
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if q.Len() != 0 || q.Idle() {
			t.Fatalf("delayed key released early (Len %d, Idle %v)", q.Len(), q.Idle())
		}
		time.Sleep(time.Second)
		if got := get(t, q); got != "late" {
			t.Errorf("got %q", got)
		}
	})
}

func TestQueue_PerItemBackoffDoublesUpToCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(&Options{BaseDelay: time.Second, MaxDelay: 10 * time.Second, QPS: -1})
		defer q.ShutDown()
		var delays []time.Duration
		for range 6 {
			q.AddRateLimited("k")
			k, waited := getAfter(t, q)
			delays = append(delays, waited)
			q.Done(k)
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
	})
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
// next rate-limited key comes out 1/QPS later on the queue's clock, not on
// the wall clock, and the bucket refills by that clock's time. This test alone keeps a clock.Fake: inside the bubble the
// wall clock is virtual too, so only a clock of its own — which the bubble's
// time never moves — tells the two apart.
func TestQueue_TokenBucketWaitsOnTheQueueClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.NewFake(t0)
		q := New(&Options{Clock: c, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, QPS: 10, Burst: 1})
		defer q.ShutDown()
		var released []time.Duration
		release := func() {
			t.Helper()
			synctest.Wait() // the delay goroutine has armed its timer
			next, ok := c.NextDeadline()
			if !ok {
				t.Fatal("no timer armed on the queue's clock")
			}
			c.SetTime(next)
			q.Done(get(t, q))
			released = append(released, c.Now().Sub(t0))
		}
		q.AddRateLimited("a")
		q.AddRateLimited("b")
		release()
		release()
		// The bucket is read at the queue clock's time too: "c", added when
		// "b" came out, waits one more 1/QPS from then.
		q.AddRateLimited("c")
		release()
		if diff := cmp.Diff([]time.Duration{time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}, released); diff != "" {
			t.Errorf("release times (-want +got):\n%s", diff)
		}
	})
}

func TestQueue_ShutDownReleasesGetAndIgnoresAdds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		done := make(chan bool, 1)
		go func() {
			_, ok := q.Get(context.Background())
			done <- ok
		}()
		synctest.Wait() // Get is blocked
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
	})
}

func TestQueue_KeysQueuedAtOnceWakeAsManyWaitingWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		defer q.ShutDown()
		const workers = 3
		got := make(chan string, workers)
		for range workers {
			go func() {
				if k, ok := q.Get(t.Context()); ok {
					got <- k // held: no Done
				}
			}()
		}
		synctest.Wait() // every worker waits in Get
		q.Add("a")
		q.Add("b")
		q.Add("c")
		synctest.Wait()
		taken := map[string]bool{}
		for len(got) > 0 {
			taken[<-got] = true
		}
		if diff := cmp.Diff(map[string]bool{"a": true, "b": true, "c": true}, taken); diff != "" {
			t.Errorf("keys taken by the %d waiting workers (-want +got):\n%s", workers, diff)
		}
	})
}

// TestQueue_EveryKeyIsTakenWithNothingAddedAfter races adds against
// workers going to sleep: each queued key must wake a worker by itself —
// a lost wake-up would leave keys queued with every worker asleep, since
// nothing is added afterwards to wake one.
func TestQueue_EveryKeyIsTakenWithNothingAddedAfter(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	const workers, keys = 8, 4000
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	taken := make(chan struct{}, keys)
	for range workers {
		go func() {
			for {
				k, ok := q.Get(ctx)
				if !ok {
					return
				}
				runtime.Gosched()
				q.Done(k)
				taken <- struct{}{}
			}
		}()
	}
	for p := range 2 {
		go func() {
			for i := range keys / 2 {
				q.Add(fmt.Sprintf("p%d-%d", p, i))
				if i%7 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	deadline := time.After(10 * time.Second) // bounds a failure; the keys take milliseconds
	for n := 0; n < keys; n++ {
		select {
		case <-taken:
		case <-deadline:
			t.Fatalf("%d of %d keys taken; %d still queued with every worker waiting", n, keys, q.Len())
		}
	}
}

func TestQueue_GetHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		defer q.ShutDown()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, ok := q.Get(ctx); ok {
			t.Error("Get with a cancelled context returned a key")
		}
	})
}

func TestMetrics_SeriesMoveAndLint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		q := New(&Options{Name: "member", Metrics: NewMetrics(reg)})
		defer q.ShutDown()
		q.Add("a")
		q.Add("b")
		if got := testutil.ToFloat64(q.metrics.depth); got != 2 {
			t.Errorf("depth = %v", got)
		}
		k := get(t, q)
		time.Sleep(time.Second)
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
	})
}

func TestQueue_WaitInactiveReturnsWhenWorkIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(nil)
		defer q.ShutDown()
		q.Add("a")
		k := get(t, q)
		done := make(chan error, 1)
		go func() { done <- q.WaitInactive(t.Context()) }()
		synctest.Wait() // WaitInactive has looked and is waiting
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
	})
}

// The queue duration a worker's Get observes is how long its key waited
// since it was added, however long the queue has run before.
func TestMetrics_QueueDurationIsTheWaitSinceAdded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		time.Sleep(time.Hour) // the clock's reading is no epoch of the queue's
		q := New(&Options{Name: "member", Metrics: NewMetrics(reg)})
		defer q.ShutDown()
		time.Sleep(time.Minute)
		q.Add("a")
		time.Sleep(2 * time.Second)
		q.Add("b")
		time.Sleep(3 * time.Second)
		for _, want := range []string{"a", "b"} {
			if k := get(t, q); k != want {
				t.Fatalf("got %q, want %q", k, want)
			}
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fleetd_workqueue_queue_duration_seconds" {
				continue
			}
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 5+3 {
				t.Errorf("queue durations: %d summing to %vs, want 2 summing to 8s", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
		t.Error("no queue duration series")
	})
}
