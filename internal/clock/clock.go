package clock

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer whose C delivers the time once d has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc arranges for f to be called once d has passed and returns a
	// timer whose Stop cancels the call if it has not started. The timer's C
	// is nil: the call is the only notice. Real calls f in its own goroutine;
	// Fake calls it on the goroutine that advances the clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the clock's users need.
type Timer interface {
	// C delivers the time once the timer fires. It is nil for a timer made
	// by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing (for an AfterFunc timer: the call
	// from starting); it reports whether it did.
	Stop() bool
}

// Sleep waits d on c; false if ctx ended first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer wrapped as a Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc returns time.AfterFunc wrapped as a Timer; its C is nil.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a manually driven clock, safe for concurrent use. The zero value is
// not usable; call NewFake.
//
// Its time moves only in Step and SetTime, which fire what has come due, in
// two phases:
//
//  1. AfterFunc callbacks, one after another in deadline order (timers with
//     the same deadline in the order they were made), on the goroutine that
//     advances the clock and without the clock's lock held, so a callback
//     may read the clock and schedule more. While a callback runs, Now
//     reads its deadline. A callback scheduled by a callback runs in the
//     same advance if it falls due within it.
//  2. Channel timers (NewTimer): Now reads the target time, and every timer
//     whose deadline has been reached receives it. A goroutine woken by one
//     therefore sees the final time, as it would after a real sleep.
//
// So a channel timer due before a callback is delivered after it in the same
// advance. Nothing can tell: its receiver runs on another goroutine, which
// the advance never waits for, whereas a callback's effects are complete when
// Step returns.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  []*fakeTimer
	added   notify.Signal // notified whenever a timer is made
	changed notify.Signal // notified whenever the pending set changes
}

// NewFake returns a Fake clock reading t.
func NewFake(t time.Time) *Fake {
	return &Fake{now: t}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the fake time reaches now+d. A
// timer with d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, when: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.addLocked(t)
	return t
}

// AfterFunc schedules f for when the fake time reaches now+d. It never calls
// f itself: a callback whose time has already come (d <= 0) runs at the next
// Step or SetTime, even Step(0).
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, when: f.now.Add(d), fn: fn}
	f.addLocked(t)
	return t
}

func (f *Fake) addLocked(t *fakeTimer) {
	f.seq++
	t.seq = f.seq
	f.timers = append(f.timers, t)
	f.added.Notify()
	f.changed.Notify()
}

// Step advances the fake time by d and fires what has come due.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	t := f.now.Add(d)
	f.mu.Unlock()
	f.SetTime(t)
}

// SetTime moves the fake time to t (never backwards) and fires what has come
// due, as the type's documentation describes.
func (f *Fake) SetTime(t time.Time) {
	f.mu.Lock()
	if f.now.After(t) {
		t = f.now
	}
	for {
		tm := f.nextCallbackLocked(t)
		if tm == nil {
			break
		}
		f.removeLocked(tm)
		if tm.when.After(f.now) {
			f.now = tm.when
		}
		f.mu.Unlock()
		tm.fn()
		f.mu.Lock()
	}
	if t.After(f.now) {
		f.now = t
	}
	f.fireChannelsLocked()
	f.mu.Unlock()
}

// fireChannelsLocked sends the current time to every channel timer that has
// come due.
func (f *Fake) fireChannelsLocked() {
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].before(f.timers[j]) })
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if tm.fn != nil || tm.when.After(f.now) {
			kept = append(kept, tm)
			continue
		}
		tm.c <- f.now
	}
	if len(kept) != len(f.timers) {
		clear(f.timers[len(kept):])
		f.changed.Notify()
	}
	f.timers = kept
}

// nextCallbackLocked returns the earliest AfterFunc timer due by end, or nil.
func (f *Fake) nextCallbackLocked(end time.Time) *fakeTimer {
	var next *fakeTimer
	for _, tm := range f.timers {
		if tm.fn != nil && !tm.when.After(end) && (next == nil || tm.before(next)) {
			next = tm
		}
	}
	return next
}

// removeLocked takes t out of the pending set and reports whether it was
// there.
func (f *Fake) removeLocked(t *fakeTimer) bool {
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			f.changed.Notify()
			return true
		}
	}
	return false
}

// NextDeadline reports the earliest pending timer deadline, if any.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, tm := range f.timers {
		if next.IsZero() || tm.when.Before(next) {
			next = tm.when
		}
	}
	return next, !next.IsZero()
}

// Waiters returns the number of pending timers and callbacks.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// TimerAdded returns a channel closed the next time a timer or callback is
// scheduled, so a test can wait for a component to arm its next timer
// instead of sleeping.
func (f *Fake) TimerAdded() <-chan struct{} { return f.added.Changed() }

// WaitForTimers blocks until at least n timers or callbacks are pending or
// ctx ends. A test uses it to know that a component has armed a timeout
// before it advances the clock past it.
func (f *Fake) WaitForTimers(ctx context.Context, n int) error {
	return f.waitFor(ctx, func(pending int) bool { return pending >= n })
}

// WaitIdle blocks until nothing is pending or ctx ends: after it, every
// timer armed before has fired or been stopped.
func (f *Fake) WaitIdle(ctx context.Context) error {
	return f.waitFor(ctx, func(pending int) bool { return pending == 0 })
}

func (f *Fake) waitFor(ctx context.Context, done func(pending int) bool) error {
	return notify.Wait(ctx, &f.changed, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return done(len(f.timers))
	})
}

// fakeTimer is a channel timer (c set) or an AfterFunc callback (fn set).
type fakeTimer struct {
	f    *Fake
	when time.Time
	seq  uint64
	c    chan time.Time
	fn   func()
}

func (t *fakeTimer) before(u *fakeTimer) bool {
	if !t.when.Equal(u.when) {
		return t.when.Before(u.when)
	}
	return t.seq < u.seq
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.removeLocked(t)
}
