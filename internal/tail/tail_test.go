package tail_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/tail"
)

func TestNext(t *testing.T) {
	tests := []struct {
		name       string
		prev, next string
		want       []string
		redraw     bool
	}{
		{"unchanged", "a\nb", "a\nb", nil, false},
		{"grew", "a\nb", "a\nb\nc", []string{"c"}, false},
		{"scrolled", "a\nb\nc", "b\nc\nd\ne", []string{"d", "e"}, false},
		{"last line rewritten", "a\nb\n> fi", "a\nb\n> fix it\nworking", []string{"> fix it", "working"}, false},
		{"last line erased", "a\nb\nc", "a\nb", []string{}, false},
		{"from an empty screen", "", "a\nb", []string{"a", "b"}, false},
		{"repainted", "header\nold body\nfooter", "header\nnew body\nfooter", []string{"header", "new body", "footer"}, true},
		{"cleared", "a\nb", "", []string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, redraw := tail.Next(lines(tt.prev), lines(tt.next))
			if diff := cmp.Diff(tt.want, got); diff != "" || redraw != tt.redraw {
				t.Errorf("Next(%q, %q) = %q, redraw %v; want %q, redraw %v", tt.prev, tt.next, got, redraw, tt.want, tt.redraw)
			}
		})
	}
}

func lines(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

// fakeTerm is a herdr terminal per pane and a member list that wakes its
// waiters on every change, as controllers.Manager does.
type fakeTerm struct {
	mu      sync.Mutex
	screens map[string]string // pane → text
	readErr error
	reads   []read
	members map[string]v1alpha1.Member
	changed notify.Signal
}

type read struct {
	Target string
	Lines  int
}

func newFakeTerm(members ...v1alpha1.Member) *fakeTerm {
	f := &fakeTerm{screens: map[string]string{}, members: map[string]v1alpha1.Member{}}
	for _, m := range members {
		f.members[m.Name] = m
	}
	return f
}

func member(name, pane, status string) v1alpha1.Member {
	return v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name},
		Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, PaneID: pane, AgentStatus: status}}
}

func (f *fakeTerm) ReadTail(_ context.Context, target string, n int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, read{target, n})
	if f.readErr != nil {
		return "", f.readErr
	}
	all := lines(f.screens[target])
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n"), nil
}

func (f *fakeTerm) Member(name string) (v1alpha1.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[name]
	return m, ok
}

func (f *fakeTerm) WaitFor(ctx context.Context, cond func([]v1alpha1.Member) bool) error {
	return notify.Wait(ctx, &f.changed, func() bool {
		f.mu.Lock()
		var ms []v1alpha1.Member
		for _, m := range f.members {
			ms = append(ms, m)
		}
		f.mu.Unlock()
		return cond(ms)
	})
}

// set changes a member (nil: deletes it) and wakes the waiters.
func (f *fakeTerm) set(name string, m *v1alpha1.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m == nil {
		delete(f.members, name)
	} else {
		f.members[name] = *m
	}
	f.changed.Notify()
}

func (f *fakeTerm) write(pane, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.screens[pane] = text
}

func (f *fakeTerm) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reads)
}

func TestRead(t *testing.T) {
	f := newFakeTerm(member("w", "w1:p1", "idle"), v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "new"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseStarting}})
	f.write("w1:p1", "one\ntwo\nthree")
	tl := tail.New(f, f, nil)
	got, err := tl.Read(context.Background(), "w", 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tail.Tail{Member: "w", PaneID: "w1:p1", Lines: []string{"two", "three"}}, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if _, err := tl.Read(context.Background(), "zz", 0); !errors.Is(err, tail.ErrNotFound) {
		t.Errorf("unknown member: %v, want ErrNotFound", err)
	}
	if _, err := tl.Read(context.Background(), "new", 0); !errors.Is(err, tail.ErrNoPane) || !strings.Contains(err.Error(), "Starting") {
		t.Errorf("member without a pane: %v, want ErrNoPane naming its phase", err)
	}
	for _, n := range []int{-1, tail.MaxLines + 1} {
		if _, err := tl.Read(context.Background(), "w", n); !errors.Is(err, tail.ErrLines) {
			t.Errorf("lines %d: %v, want ErrLines", n, err)
		}
	}
}

// collect runs Follow in the background and gathers its frames.
type collect struct {
	mu     sync.Mutex
	frames []tail.Frame
	done   chan error
}

func follow(ctx context.Context, tl *tail.Tails, name string, n int) *collect {
	c := &collect{done: make(chan error, 1)}
	go func() {
		c.done <- tl.Follow(ctx, name, n, func(f tail.Frame) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.frames = append(c.frames, f)
			return nil
		})
	}()
	return c
}

func (c *collect) got() []tail.Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]tail.Frame(nil), c.frames...)
}

// A status change herdr reported wakes the follower at once; output that
// came with no event shows after one refresh, never before; a new pane is
// shown whole; a deleted member ends the follow.
func TestFollow_WakesOnActivityAndRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTerm(member("w", "w1:p1", "idle"))
		f.write("w1:p1", "a\nb\nc")
		tl := tail.New(f, f, &tail.Options{Refresh: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := follow(ctx, tl, "w", 2)
		synctest.Wait()
		want := []tail.Frame{{Lines: []string{"b", "c"}, PaneID: "w1:p1"}}
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Fatalf("first frame (-want +got):\n%s", diff)
		}

		// Output and a status change: shown without waiting for the refresh.
		f.write("w1:p1", "a\nb\nc\nd")
		working := member("w", "w1:p1", "working")
		f.set("w", &working)
		synctest.Wait()
		want = append(want, tail.Frame{Lines: []string{"d"}})
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Fatalf("after a status change (-want +got):\n%s", diff)
		}

		// Output with no event: nothing until the refresh passes.
		f.write("w1:p1", "b\nc\nd\ne")
		time.Sleep(time.Minute - time.Second)
		synctest.Wait()
		if n := len(c.got()); n != 2 {
			t.Fatalf("%d frames before the refresh, want 2", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		want = append(want, tail.Frame{Lines: []string{"e"}})
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Fatalf("after the refresh (-want +got):\n%s", diff)
		}

		// Unchanged screens emit nothing, however often they are read.
		reads := f.readCount()
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if n := len(c.got()); n != 3 || f.readCount() != reads+3 {
			t.Fatalf("%d frames and %d reads after three quiet refreshes, want 3 frames and %d reads", n, f.readCount(), reads+3)
		}

		// Replaced: the new pane's screen, whole.
		f.write("w1:p7", "fresh")
		replaced := member("w", "w1:p7", "idle")
		f.set("w", &replaced)
		synctest.Wait()
		want = append(want, tail.Frame{Lines: []string{"fresh"}, Redraw: true, PaneID: "w1:p7"})
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Fatalf("after the replacement (-want +got):\n%s", diff)
		}

		f.set("w", nil)
		synctest.Wait()
		select {
		case err := <-c.done:
			if !errors.Is(err, tail.ErrNotFound) {
				t.Errorf("Follow after the member was deleted = %v, want ErrNotFound", err)
			}
		default:
			t.Fatal("Follow still runs after the member was deleted")
		}
		for _, r := range f.reads {
			if r.Lines != 0 && r.Lines != 2 {
				t.Errorf("read %+v: a follower reads the visible screen", r)
			}
		}
	})
}

// The first read's failure is Follow's error; later ones are retried at the
// next wake, and cancelling ends the follow with the context's error.
func TestFollow_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTerm(member("w", "w1:p1", "idle"))
		f.readErr = errors.New("herdr unreachable")
		tl := tail.New(f, f, nil)
		err := tl.Follow(context.Background(), "w", 0, func(tail.Frame) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "herdr unreachable") {
			t.Fatalf("Follow with a failing first read = %v", err)
		}

		f.readErr = nil
		f.write("w1:p1", "a")
		ctx, cancel := context.WithCancel(context.Background())
		c := follow(ctx, tl, "w", 0)
		synctest.Wait()
		f.mu.Lock()
		f.readErr = errors.New("herdr restarting")
		f.screens["w1:p1"] = "a\nb"
		f.mu.Unlock()
		time.Sleep(tail.DefaultRefresh)
		synctest.Wait()
		f.mu.Lock()
		f.readErr = nil
		f.mu.Unlock()
		time.Sleep(tail.DefaultRefresh)
		synctest.Wait()
		want := []tail.Frame{{Lines: []string{"a"}, PaneID: "w1:p1"}, {Lines: []string{"b"}}}
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Errorf("frames across a failed read (-want +got):\n%s", diff)
		}
		cancel()
		if err := <-c.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow after cancel = %v", err)
		}

		if err := tl.Follow(context.Background(), "zz", 0, nil); !errors.Is(err, tail.ErrNotFound) {
			t.Errorf("Follow of an unknown member = %v", err)
		}
		emitErr := errors.New("client gone")
		if err := tl.Follow(context.Background(), "w", 0, func(tail.Frame) error { return emitErr }); !errors.Is(err, emitErr) {
			t.Errorf("Follow whose emit fails = %v", err)
		}
	})
}

// A member with no pane yet is waited for, not an error.
func TestFollow_WaitsForAPane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starting := member("w", "", "")
		starting.Status.Phase = v1alpha1.PhaseStarting
		f := newFakeTerm(starting)
		tl := tail.New(f, f, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := follow(ctx, tl, "w", 0)
		synctest.Wait()
		if len(c.got()) != 0 {
			t.Fatalf("frames before the member has a pane: %+v", c.got())
		}
		f.write("w1:p2", "hello")
		ready := member("w", "w1:p2", "idle")
		f.set("w", &ready)
		synctest.Wait()
		want := []tail.Frame{{Lines: []string{"hello"}, PaneID: "w1:p2"}}
		if diff := cmp.Diff(want, c.got()); diff != "" {
			t.Errorf("frames (-want +got):\n%s", diff)
		}
	})
}
