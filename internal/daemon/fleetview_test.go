package daemon

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// source is a change source: Changed is closed at the next change.
type source struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSource() *source { return &source{ch: make(chan struct{})} }

func (s *source) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *source) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// changes wakes a waiter at every change of any source, including one made
// before Run started and one made while it was handing out a new channel;
// with no change it wakes nobody.
func TestChanges_WakesOnEverySource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newSource(), newSource()
		c := newChanges(a.Changed, b.Changed)
		first := c.Changed()
		a.fire() // before Run
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		synctest.Wait()
		select {
		case <-first:
		default:
			t.Fatal("a change made before Run woke nobody")
		}
		for i, s := range []*source{b, a, b} {
			ch := c.Changed()
			synctest.Wait()
			select {
			case <-ch:
				t.Fatalf("step %d: woken without a change", i)
			default:
			}
			s.fire()
			synctest.Wait()
			select {
			case <-ch:
			default:
				t.Fatalf("step %d: a change woke nobody", i)
			}
		}
		cancel()
		<-done
	})
}
