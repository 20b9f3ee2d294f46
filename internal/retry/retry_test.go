package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The waits grow from the base to MaxFactor times it, each within Jitter
// of its nominal value, and start again from the base after Reset.
func TestBackoff_GrowsJitteredAndResets(t *testing.T) {
	const base = time.Second
	b := New(base, nil)
	nominal := base
	for i := range 8 {
		d := b.Next()
		lo, hi := time.Duration(float64(nominal)*(1-Jitter)), time.Duration(float64(nominal)*(1+Jitter))+1
		if d < lo || d > hi {
			t.Errorf("wait %d = %s; want within [%s, %s]", i, d, lo, hi)
		}
		nominal = min(nominal*Multiplier, MaxFactor*base)
	}
	b.Reset()
	if d := b.Next(); d > time.Duration(float64(base)*(1+Jitter))+1 {
		t.Errorf("first wait after Reset = %s; want about %s", d, base)
	}
}

// Two loops that fail together do not retry in step.
func TestBackoff_Jitters(t *testing.T) {
	a, b := New(time.Second, nil), New(time.Second, nil)
	same := 0
	for range 20 {
		if a.Next() == b.Next() {
			same++
		}
	}
	if same == 20 {
		t.Error("two backoffs waited exactly alike 20 times")
	}
}

// Wait sleeps on the clock it was given and gives up when its context
// ends.
func TestBackoff_WaitSleepsOnTheClockAndEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(time.Minute, nil)
		start := time.Now()
		if !b.Wait(context.Background()) {
			t.Fatal("Wait = false without a cancellation")
		}
		if d := time.Since(start); d < 30*time.Second || d > 90*time.Second {
			t.Errorf("waited %s; want about a minute", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if b.Wait(ctx) {
			t.Error("Wait = true though its context ended first")
		}
	})
}

// OnWake runs a pass at each wake; a failed pass runs again after the
// backoff without a new wake, until one succeeds; it returns when its
// context ends, in a wait too.
func TestBackoff_OnWakeRetriesFailedPassesUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wake := make(chan struct{}, 1)
		var passes []time.Duration
		start := time.Now()
		failures := 2
		done := make(chan struct{})
		go func() {
			defer close(done)
			New(time.Second, nil).OnWake(ctx, wake, func(context.Context) bool {
				passes = append(passes, time.Since(start))
				if failures > 0 {
					failures--
					return true
				}
				return false
			})
		}()
		synctest.Wait()
		if len(passes) != 0 {
			t.Fatalf("%d passes before a wake", len(passes))
		}
		wake <- struct{}{}
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(passes) != 3 || passes[0] != 0 || passes[1] < 500*time.Millisecond || passes[2]-passes[1] < time.Second {
			t.Errorf("passes at %v; want one at once, then two after growing waits", passes)
		}
		failures = 1
		wake <- struct{}{}
		synctest.Wait()
		cancel() // in the wait after the failed pass
		<-done
		if len(passes) != 4 {
			t.Errorf("%d passes; want the fourth, then none after the context ended", len(passes))
		}
	})
}
