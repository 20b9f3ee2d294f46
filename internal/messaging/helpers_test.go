package messaging

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeHerdr is the test Prompter: it records every prompt, answers with a
// scripted error per call, and can hold a call until released (a prompt in
// flight when fleetd dies).
type fakeHerdr struct {
	mu       sync.Mutex
	prompts  []prompted
	errs     []error       // consumed one per Prompt call; nil when exhausted
	hold     chan struct{} // when set, Prompt blocks until closed or ctx ends
	tails    map[string]string
	tailHold chan struct{} // when set, ReadTail blocks until closed
	reads    []string
}

type prompted struct{ Target, Text string }

func (f *fakeHerdr) Prompt(ctx context.Context, target, text string) error {
	f.mu.Lock()
	f.prompts = append(f.prompts, prompted{target, text})
	var err error
	if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (f *fakeHerdr) ReadTail(ctx context.Context, target string, lines int) (string, error) {
	f.mu.Lock()
	hold := f.tailHold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fmt.Sprintf("%s/%d", target, lines))
	if t, ok := f.tails[target]; ok {
		return t, nil
	}
	return "", fmt.Errorf("no pane %s", target)
}

func (f *fakeHerdr) sent() []prompted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]prompted(nil), f.prompts...)
}

func (f *fakeHerdr) failNext(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, errs...)
}

// idsWithPrefix makes ids deterministic: t-<run>1, m-<run>2, … A reopened
// core gets another run, as random ids would keep apart.
func idsWithPrefix(run string) func(string) string {
	var mu sync.Mutex
	n := 0
	return func(prefix string) string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s%s%d", prefix, run, n)
	}
}

func testOptions(o *Options) *Options {
	if o == nil {
		o = &Options{}
	}
	if o.NewID == nil {
		o.NewID = idsWithPrefix("")
	}
	return o
}

func newCore(t *testing.T, dir string, h Prompter, o *Options) *Core {
	t.Helper()
	c, err := New(dir, h, testOptions(o))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// crash abandons c the way kill -9 would: nothing more reaches the journal
// (every acknowledged record already did), background calls are cut and the
// file is closed without any final write.
func crash(c *Core) {
	c.lockW()
	c.closed = true
	for _, w := range c.workers.Entries() {
		w.stopGrace()
	}
	c.unlockW()
	c.cancel()
	c.wg.Wait()
	c.j.Close()
}

// call runs f in a goroutine and returns a channel with its result, so a test
// can hold a blocking call open while it drives events.
func call[T any](f func() (T, error)) <-chan outcome[T] {
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := f()
		ch <- outcome[T]{v, err}
	}()
	return ch
}

type outcome[T any] struct {
	v   T
	err error
}

// pending asserts that ch has no result yet once the bubble is quiet.
func pending[T any](t *testing.T, ch <-chan outcome[T]) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		t.Fatalf("call returned early: %+v, %v", r.v, r.err)
	default:
	}
}

// result waits for ch once the bubble is quiet; the call must have returned.
func got[T any](t *testing.T, ch <-chan outcome[T]) (T, error) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		return r.v, r.err
	default:
		t.Fatal("call still blocked")
		panic("unreachable")
	}
}

var bg = context.Background()

const minute = time.Minute

// compacted waits until c runs no journal rewrite in the background (one
// may start another when it ends).
func compacted(c *Core) {
	for {
		c.mu.Lock()
		done := c.compacted
		c.mu.Unlock()
		if done == nil {
			return
		}
		<-done
	}
}
