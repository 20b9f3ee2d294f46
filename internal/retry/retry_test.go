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
