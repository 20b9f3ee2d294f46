package notify

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSignal_NotifyClosesTheChannelTakenBefore(t *testing.T) {
	var s Signal
	a, b := s.Changed(), s.Changed()
	if a != b {
		t.Fatal("two readers before a change got different channels")
	}
	if closed(a) {
		t.Fatal("closed before any change")
	}
	s.Notify()
	if !closed(a) {
		t.Fatal("Notify left the channel open")
	}
	next := s.Changed()
	if closed(next) {
		t.Fatal("the channel after a change is already closed")
	}
	s.Notify()
	if !closed(next) {
		t.Fatal("the second Notify left the new channel open")
	}
}

func TestSignal_NotifyWithoutReadersIsCheap(t *testing.T) {
	var s Signal
	for range 3 {
		s.Notify() // no channel handed out: nothing to close, no panic
	}
	if closed(s.Changed()) {
		t.Fatal("a channel taken after the notifications is closed")
	}
}

func TestSignal_FollowMergesSources(t *testing.T) {
	var a, b, merged Signal
	merged.Follow(&a, &b)
	for _, src := range []*Signal{&a, &b} {
		ch := merged.Changed()
		src.Notify()
		if !closed(ch) {
			t.Fatal("a followed source's change did not reach the follower")
		}
	}
	ch := a.Changed()
	merged.Notify()
	if closed(ch) {
		t.Fatal("a follower's own change reached its source")
	}
}

func TestWait_WakesOnTheChangeThatMakesCondTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Signal
		var v atomic.Int64
		var evaluated atomic.Int64
		done := make(chan error, 1)
		go func() {
			done <- Wait(t.Context(), &s, func() bool { evaluated.Add(1); return v.Load() == 3 })
		}()
		for i := range 3 {
			synctest.Wait()
			v.Store(int64(i + 1))
			s.Notify()
		}
		if err := <-done; err != nil {
			t.Fatalf("Wait = %v", err)
		}
		if n := evaluated.Load(); n != 4 {
			t.Fatalf("cond evaluated %d times; want 4 (at once and after each of 3 changes)", n)
		}
	})
}

func TestWait_EndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Signal
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := Wait(ctx, &s, func() bool { return false }); err != context.DeadlineExceeded {
			t.Fatalf("Wait = %v; want the context's deadline", err)
		}
	})
}

func TestWait_ReturnsTheContextsCause(t *testing.T) {
	var s Signal
	ctx, cancel := context.WithCancelCause(t.Context())
	stopped := errors.New("the fake stopped")
	cancel(stopped)
	if err := Wait(ctx, &s, func() bool { return false }); err != stopped {
		t.Fatalf("Wait = %v; want the cause the context was cancelled with", err)
	}
}

func TestSignal_ConcurrentUse(t *testing.T) {
	var s, f Signal
	f.Follow(&s)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				ch := f.Changed()
				s.Notify()
				<-ch
			}
		})
	}
	wg.Wait()
}

// plain is a change source that is not a Signal: a channel closed and
// replaced at every change.
type plain struct {
	mu sync.Mutex
	ch chan struct{}
}

func (p *plain) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}

func (p *plain) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// Forward notifies its Signal at every change of a source that is not a
// Signal, and ends with its context.
func TestSignal_ForwardFollowsAPlainSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var src plain
		var s Signal
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Forward(ctx, &src); close(done) }()
		for range 3 {
			synctest.Wait()
			ch := s.Changed()
			src.fire()
			synctest.Wait()
			if !closed(ch) {
				t.Fatal("a change of the source did not reach the Signal")
			}
		}
		cancel()
		<-done
	})
}

// Each runs its function again for a change made while the function ran:
// the channel is taken before it, so the last change is never missed (the
// fence follower of the controllers missed one when it took the channel
// after acting).
func TestEach_AChangeWhileFnRunsCallsItAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s Signal
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		done := make(chan struct{})
		go func() {
			Each(ctx, &s, func() {
				calls++
				if calls == 1 {
					s.Notify() // a change while fn runs
				}
			})
			close(done)
		}()
		synctest.Wait()
		s.Notify()
		synctest.Wait()
		if calls != 2 {
			t.Errorf("fn ran %d times for a change and one made while it ran, want 2", calls)
		}
		cancel()
		<-done
	})
}
