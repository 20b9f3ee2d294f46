package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// waiterClock is the wall clock that reports the timers of held calls: a
// timer set for between min and max (a held call's deadline; the test gives
// its calls a timeout no other timer of the core uses) is reported on armed
// when set and on stopped when stopped, which is when its call let go.
type waiterClock struct {
	clock.Real
	min, max       time.Duration
	armed, stopped chan struct{}
}

func (c *waiterClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Real.AfterFunc(d, f)
	if d < c.min || d > c.max {
		return t
	}
	c.armed <- struct{}{}
	return reportingTimer{t, c.stopped}
}

type reportingTimer struct {
	clock.Timer
	stopped chan<- struct{}
}

func (t reportingTimer) Stop() bool {
	ok := t.Timer.Stop()
	t.stopped <- struct{}{}
	return ok
}

func recv(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("%s never happened", what)
	}
}

// waitingTurns counts the turns on which a call is held.
func waitingTurns(f *running) int {
	f.t.Helper()
	n := 0
	for _, w := range callOK[mcp.StatusOutput](f, f.primary, "bridge_status", nil).Workers {
		for _, turn := range w.OpenTurns {
			if turn.Waiting {
				n++
			}
		}
	}
	return n
}

// TestGateway_CancelledSendReleasesItsWaiter cancels held bridge_send calls
// from the client side, more of them than the per-caller limit of held
// calls, and shows each one let go of its turn on the server and gave its
// place back: the limit still admits exactly as many held calls as before.
func TestGateway_CancelledSendReleasesItsWaiter(t *testing.T) {
	t.Parallel()
	const (
		limit   = 2
		timeout = 7 * time.Minute
	)
	clk := &waiterClock{min: timeout - time.Minute, max: timeout, armed: make(chan struct{}, 64), stopped: make(chan struct{}, 64)}
	f := startFleetWith(t, "", &messaging.Options{PickupGrace: 10 * time.Minute, MaxWaitersPerCaller: limit, Clock: clk})
	w := f.spawn("coder")
	send := func(ctx context.Context, content string) <-chan result[mcp.SendOutput] {
		return callAsync[mcp.SendOutput](ctx, f.primary, "bridge_send",
			map[string]any{"content": content, "sessionId": "coder", "timeoutMs": timeout.Milliseconds()})
	}

	const cancelled = 2*limit + 1
	for i := range cancelled {
		ctx, cancel := context.WithCancel(f.ctx)
		held := send(ctx, fmt.Sprintf("task %d", i))
		recv(t, f.ctx, clk.armed, "holding the call")
		if i == 0 {
			f.prompt(w)
		}
		if n := waitingTurns(f); n != 1 {
			t.Fatalf("call %d: %d turns with a held call, want 1", i, n)
		}
		cancel()
		if _, err := wait(t, f.ctx, held); err == nil {
			t.Fatalf("call %d returned a result after its context was cancelled", i)
		}
		recv(t, f.ctx, clk.stopped, "releasing the cancelled call")
		if n := waitingTurns(f); n != 0 {
			t.Fatalf("call %d: %d turns still have a held call after the cancellation, want 0", i, n)
		}
	}
	metrics := scrape(t, f.info.URL)
	if want := fmt.Sprintf(`fleetd_rendezvous_wait_seconds_count{outcome="canceled"} %d`, cancelled); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q", want)
	}

	// The limit still admits two held calls, and refuses a third.
	ctx, cancel := context.WithCancel(f.ctx)
	var held []<-chan result[mcp.SendOutput]
	for i := range limit {
		held = append(held, send(ctx, fmt.Sprintf("held %d", i)))
		recv(t, f.ctx, clk.armed, "holding a call after the cancellations")
	}
	if _, err := call[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "one too many", "sessionId": "coder"}); err == nil || err.Code != "too_many_waiters" {
		t.Errorf("a call beyond the limit: %v, want too_many_waiters", err)
	}
	cancel()
	for _, h := range held {
		wait(t, f.ctx, h)
	}
}
