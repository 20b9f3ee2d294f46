package clock

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFake_FiresTimersInDeadlineOrderOnlyWhenDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	late := f.NewTimer(10 * time.Second)
	early := f.NewTimer(time.Second)
	stopped := f.NewTimer(2 * time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported inactive")
	}
	if next, ok := f.NextDeadline(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want %v", next, ok, t0.Add(time.Second))
	}
	f.Step(5 * time.Second)
	select {
	case got := <-early.C():
		if !got.Equal(t0.Add(5 * time.Second)) {
			t.Errorf("early fired at %v", got)
		}
	default:
		t.Fatal("early timer did not fire after its deadline")
	}
	select {
	case <-late.C():
		t.Fatal("late timer fired before its deadline")
	default:
	}
	f.Step(5 * time.Second)
	select {
	case <-late.C():
	default:
		t.Fatal("late timer did not fire")
	}
	select {
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if f.Waiters() != 0 {
		t.Errorf("Waiters = %d, want 0", f.Waiters())
	}
}

func TestFake_ZeroDurationFiresAtOnceAndTimerAddedSignals(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	added := f.TimerAdded()
	select {
	case <-f.NewTimer(0).C():
	default:
		t.Fatal("zero-duration timer did not fire at once")
	}
	f.NewTimer(time.Minute)
	select {
	case <-added:
	default:
		t.Fatal("TimerAdded not signalled")
	}
}

func TestFake_AfterFuncRunsDueCallbacksInDeadlineOrderOnTheAdvancingGoroutine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	var got []string
	record := func(name string) func() {
		return func() { got = append(got, fmt.Sprintf("%s@%v", name, f.Now().Sub(t0))) }
	}
	f.AfterFunc(3*time.Second, record("c"))
	f.AfterFunc(time.Second, record("a"))
	f.AfterFunc(2*time.Second, record("b1"))
	f.AfterFunc(2*time.Second, record("b2")) // same deadline: scheduling order
	f.AfterFunc(time.Minute, record("late"))
	f.Step(5 * time.Second)
	// Appending to got without a lock is race-free only because every
	// callback ran on this goroutine before Step returned.
	want := []string{"a@1s", "b1@2s", "b2@2s", "c@3s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("callbacks (-want +got):\n%s", diff)
	}
	if now := f.Now(); !now.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("Now after Step = %v, want t0+5s", now.Sub(t0))
	}
	if f.Waiters() != 1 {
		t.Errorf("Waiters = %d, want 1 (the late callback)", f.Waiters())
	}
}

func TestFake_CallbacksScheduledByCallbacksRunWithinTheSameAdvance(t *testing.T) {
	t0 := time.Unix(0, 0)
	f := NewFake(t0)
	var got []time.Duration
	var tick func()
	tick = func() {
		// Reading and scheduling from a callback would deadlock if the
		// clock's lock were held.
		got = append(got, f.Now().Sub(t0))
		f.AfterFunc(2*time.Second, tick)
	}
	f.AfterFunc(2*time.Second, tick)
	f.Step(7 * time.Second)
	if diff := cmp.Diff([]time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second}, got); diff != "" {
		t.Errorf("ticks (-want +got):\n%s", diff)
	}
	if next, ok := f.NextDeadline(); !ok || !next.Equal(t0.Add(8*time.Second)) {
		t.Errorf("NextDeadline = %v, %v; want t0+8s", next, ok)
	}
}

func TestFake_AfterFuncDueNowRunsAtTheNextAdvanceNotBefore(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ran := 0
	tm := f.AfterFunc(0, func() { ran++ })
	if ran != 0 {
		t.Fatal("AfterFunc(0) ran on the scheduling goroutine")
	}
	if tm.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
	f.Step(0)
	if ran != 1 {
		t.Fatalf("Step(0) ran the due callback %d times, want 1", ran)
	}
	if tm.Stop() {
		t.Error("Stop after the callback ran reported it cancelled the call")
	}
}

func TestFake_StopCancelsACallback(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ran := false
	tm := f.AfterFunc(time.Second, func() { ran = true })
	if !tm.Stop() {
		t.Fatal("Stop of a pending callback reported inactive")
	}
	if tm.Stop() {
		t.Error("second Stop reported active")
	}
	f.Step(time.Hour)
	if ran {
		t.Error("stopped callback ran")
	}
}

func TestFake_CallbacksRunBeforeChannelTimersWhichSeeTheTargetTime(t *testing.T) {
	t0 := time.Unix(0, 0)
	f := NewFake(t0)
	ch := f.NewTimer(time.Second)
	var sawChannelFired bool
	var at time.Duration
	f.AfterFunc(3*time.Second, func() {
		at = f.Now().Sub(t0)
		select {
		case <-ch.C():
			sawChannelFired = true
		default:
		}
	})
	var made Timer
	f.AfterFunc(4*time.Second, func() { made = f.NewTimer(time.Second) }) // due at 5s, within the step
	f.Step(5 * time.Second)
	if at != 3*time.Second || sawChannelFired {
		t.Errorf("callback at %v saw the channel timer fired: %v; want 3s, false", at, sawChannelFired)
	}
	for name, tm := range map[string]Timer{"first": ch, "made by a callback": made} {
		select {
		case got := <-tm.C():
			if !got.Equal(t0.Add(5 * time.Second)) {
				t.Errorf("%s channel timer delivered %v, want t0+5s", name, got.Sub(t0))
			}
		default:
			t.Errorf("%s channel timer did not fire", name)
		}
	}
}

func TestFake_WaitForTimersAndWaitIdleFollowThePendingSet(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	armed := make(chan Timer)
	go func() {
		a := f.AfterFunc(time.Second, func() {})
		armed <- f.NewTimer(time.Minute)
		armed <- a
	}()
	if err := f.WaitForTimers(ctx, 2); err != nil {
		t.Fatalf("WaitForTimers: %v", err)
	}
	ch, cb := <-armed, <-armed
	idle := make(chan error, 1)
	go func() { idle <- f.WaitIdle(ctx) }()
	f.Step(time.Second) // runs the callback; the channel timer stays
	select {
	case err := <-idle:
		t.Fatalf("WaitIdle returned %v with a timer pending", err)
	default:
	}
	if cb.Stop() {
		t.Error("callback still pending after its deadline")
	}
	ch.Stop()
	if err := <-idle; err != nil {
		t.Errorf("WaitIdle: %v", err)
	}

	short, stop := context.WithCancel(ctx)
	stop()
	if err := f.WaitForTimers(short, 1); err != context.Canceled {
		t.Errorf("WaitForTimers on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestFake_TimerAddedIsNotSignalledByStopOrFiring(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)
	f.AfterFunc(time.Second, func() {})
	added := f.TimerAdded()
	tm.Stop()
	f.Step(time.Second)
	select {
	case <-added:
		t.Fatal("TimerAdded signalled without a new timer")
	default:
	}
	f.AfterFunc(time.Second, func() {})
	select {
	case <-added:
	default:
		t.Fatal("TimerAdded not signalled by AfterFunc")
	}
}

func TestReal_TimersFireOnTheWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Clock = Real{}
		start := c.Now()
		ran := make(chan time.Time, 1)
		cb := c.AfterFunc(time.Minute, func() { ran <- c.Now() })
		if cb.C() != nil {
			t.Error("an AfterFunc timer has a channel")
		}
		stopped := c.AfterFunc(time.Minute, func() { t.Error("stopped callback ran") })
		if !stopped.Stop() {
			t.Error("Stop of a pending callback reported inactive")
		}
		tm := c.NewTimer(2 * time.Minute)
		if got := (<-ran).Sub(start); got != time.Minute {
			t.Errorf("callback ran after %v, want 1m", got)
		}
		if got := (<-tm.C()).Sub(start); got != 2*time.Minute {
			t.Errorf("timer fired after %v, want 2m", got)
		}
		if tm.Stop() {
			t.Error("Stop of a fired timer reported active")
		}
	})
}
