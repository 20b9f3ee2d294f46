package herdrtest

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is the fake's source of time. Every delay the fake models (agent
// readiness, work duration, the prompt Enter delay, the prompt stall window,
// wait timeouts, injected latency) is a timer on this clock, so a test that
// passes a [ManualClock] decides when time moves and never sleeps.
//
// I/O deadlines on the socket (herdr's 5 s request and write limits) are not
// on this clock; they are real deadlines on the connection.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed and returns
	// a function that cancels the call if it has not started, reporting
	// whether it did cancel.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// ManualClock is a [Clock] that moves only when a test calls [ManualClock.Advance].
// It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	timers  []*manualTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

type manualTimer struct {
	at  time.Time
	seq int
	f   func()
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run d after the current time. A timer whose time
// has already come (d <= 0) runs at the next Advance, even Advance(0).
func (c *ManualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	c.signalLocked()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				c.signalLocked()
				return true
			}
		}
		return false
	}
}

// Advance moves the clock forward by d and runs, in time order and one after
// another, every timer that has come due. Timers scheduled by those callbacks
// run too if they fall due within d. Callbacks run on the caller's goroutine
// without the clock's lock held.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.signalLocked()
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending reports how many timers are scheduled and not yet run.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitForTimers blocks until at least n timers are pending or ctx ends. A
// test uses it to know that the fake has armed a timeout (for example the
// prompt stall window) before it advances the clock past it.
func (c *ManualClock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		pending, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if pending >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// WaitIdle blocks until no timer is pending or ctx ends: after it, a wait
// that armed a timeout has ended (its timer was cancelled or has fired).
func (c *ManualClock) WaitIdle(ctx context.Context) error {
	for {
		c.mu.Lock()
		pending, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if pending == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (c *ManualClock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}
