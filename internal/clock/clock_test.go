package clock

import (
	"testing"
	"time"
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
