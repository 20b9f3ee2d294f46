package daemon

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/mcp"
)

// answerWithin is how fast /healthz and the primary's calls must answer
// while a worker token holds every call it can.
const answerWithin = time.Second

// One worker token holding as many calls as it likes (GET /inbox with wait,
// each on its own connection) shuts out neither /healthz nor the primary:
// its calls past its share of the listener are refused at once with 429,
// and everybody else is answered within a second.
func TestListener_OneWorkerTokenCannotShutOutTheAPI(t *testing.T) {
	t.Parallel()
	const conns = 24 // the listener's cap: 18 held calls, 14 of them the workers'
	f := startFleetConfig(t, "", Config{Listener: &listener.Limits{MaxConns: conns}})
	w := f.spawn("coder")

	held, stop := context.WithCancel(f.ctx)
	defer stop()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	const calls = 2 * conns
	codes := make(chan int, calls)
	for range calls {
		go func() {
			req, _ := http.NewRequestWithContext(held, "GET", f.info.URL+"/inbox?wait=true&timeoutMs=600000", nil)
			req.Header.Set("Authorization", "Bearer "+w.token)
			resp, err := client.Do(req)
			switch {
			case held.Err() != nil:
				codes <- 0 // cut when the test stops holding
				return
			case err != nil:
				// At the cap, a connection whose request the server has
				// not read yet may be closed for room.
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	// At most 14 are held (one of them may be its MCP session's event
	// stream); every other one is refused at once (or, over the cap,
	// closed before it was read).
	for i := range calls - 14 {
		select {
		case code := <-codes:
			if code != http.StatusTooManyRequests && code != -1 {
				t.Fatalf("a held call past the worker's share: %d, want 429", code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d held calls past the worker's share were refused; the rest hang", i, calls-14)
		}
	}

	probe := func(what string, do func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(f.ctx, answerWithin)
		defer cancel()
		start := time.Now()
		if err := do(ctx); err != nil {
			t.Errorf("%s while a worker holds every call it can: %v (after %v)", what, err, time.Since(start))
		}
	}
	probe("/healthz", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.info.URL+"/healthz", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	probe("the primary's bridge_status", func(ctx context.Context) error {
		_, terr := call[mcp.StatusOutput](ctx, f.primary, "bridge_status", map[string]any{})
		if terr != nil {
			return terr
		}
		return nil
	})
	probe("the primary's held GET /inbox", func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.info.URL+"/inbox?wait=true&timeoutMs=10", nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the primary's GET /inbox: %d, want 200", resp.StatusCode)
		}
		return nil
	})
	stop()
	for range 14 {
		<-codes
	}
}

// The gateway's default held-call quota is the one the daemon gives it
// for the listener's default connection cap.
func TestHeldCallDefaults_MatchTheListener(t *testing.T) {
	t.Parallel()
	limits, err := (&listener.Limits{}).WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got := limits.HeldCalls(); got != mcp.DefaultHeldCalls {
		t.Errorf("the default listener carries %d held calls; mcp.DefaultHeldCalls is %d", got, mcp.DefaultHeldCalls)
	}
}
