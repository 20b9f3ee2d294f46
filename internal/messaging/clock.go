package messaging

import (
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Clock is the core's only source of time. Deadlines are computed from Now and
// waited for with AfterFunc; nothing in the package reads the wall clock
// directly, so a test can run the whole core inside a testing/synctest bubble
// or under a scripted clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FromControllerClock adapts the controllers' channel-timer clock
// (controllers/clock.Real, controllers/clock.Fake), so that the core and the
// reconciler can share one scripted clock in a test. Each pending AfterFunc
// holds one goroutine, which ends when the timer fires or is stopped.
func FromControllerClock(c clock.Clock) Clock { return controllerClock{c} }

type controllerClock struct{ c clock.Clock }

func (c controllerClock) Now() time.Time { return c.c.Now() }

func (c controllerClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &chanTimer{timer: c.c.NewTimer(d), stop: make(chan struct{})}
	go func() {
		select {
		case <-t.timer.C():
			f()
		case <-t.stop:
		}
	}()
	return t
}

type chanTimer struct {
	timer clock.Timer
	stop  chan struct{}
	once  sync.Once
}

func (t *chanTimer) Stop() bool {
	stopped := t.timer.Stop()
	t.once.Do(func() { close(t.stop) })
	return stopped
}
