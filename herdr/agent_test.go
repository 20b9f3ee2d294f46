package herdr

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// agentLine is agentJSON with the readiness flags replaced.
func agentLine(flags string) string {
	s := strings.Replace(agentJSON, `"interactive_ready":true`, flags, 1)
	return strings.Replace(s, `,}`, `}`, 1)
}

// fakeClock is advanced by the scripted server, so a test can let StartAgent's
// deadline pass without waiting for it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func TestStartAgent(t *testing.T) {
	startParams := AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2", TimeoutMS: 10000}
	tests := []struct {
		name string
		// polls are the agent.get answers in order: an agent line with these
		// flags, or "!code" for a herdr error.
		polls       []string
		tick        time.Duration // fake time passing per agent.get
		wantErr     error
		wantTimeout bool
		wantCode    string
		wantGets    int
	}{
		{
			name:     "pending then ready",
			polls:    []string{`"launch_pending":true`, `"launch_pending":true`, `"interactive_ready":true`},
			wantGets: 3,
		},
		{
			name:     "ready without launch_pending field",
			polls:    []string{`"launch_pending":true`, `"interactive_ready":true`},
			wantGets: 2,
		},
		{
			name:     "neither pending nor ready (missing bools are false)",
			polls:    []string{`"launch_pending":true`, ``},
			wantErr:  ErrAgentStartFailed,
			wantGets: 2,
		},
		{
			name:     "name cleared after a failed launch",
			polls:    []string{`"launch_pending":true`, `!agent_not_found`},
			wantErr:  ErrAgentStartFailed,
			wantCode: "agent_not_found",
			wantGets: 2,
		},
		{
			name:        "deadline",
			polls:       []string{`"launch_pending":true`, `"launch_pending":true`, `"launch_pending":true`, `"launch_pending":true`},
			tick:        4 * time.Second,
			wantErr:     ErrAgentStartTimeout,
			wantTimeout: true,
			wantGets:    3, // 12 s > 10 s after the third poll
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)}
			var mu sync.Mutex
			var methods []string
			gets := 0
			srv := startServer(t, func(c *scriptConn) {
				mu.Lock()
				methods = append(methods, c.req.Method+" "+string(c.req.Params))
				mu.Unlock()
				switch c.req.Method {
				case "agent.start":
					c.result(`{"type":"agent_started","argv":["claude"],"agent":` + agentLine(`"launch_pending":true`) + `}`)
				case "agent.get":
					mu.Lock()
					answer := tt.polls[gets]
					gets++
					mu.Unlock()
					clock.Advance(tt.tick)
					if code, ok := strings.CutPrefix(answer, "!"); ok {
						c.fail(code, "no agent named reviewer")
						return
					}
					c.result(`{"type":"agent_info","agent":` + agentLine(answer) + `}`)
				default:
					t.Errorf("unexpected method %s", c.req.Method)
				}
			})
			c := newClient(t, &Options{SocketPath: srv.path})
			c.now = clock.Now
			a, err := c.StartAgent(t.Context(), startParams, time.Microsecond)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("StartAgent: %v", err)
				}
				if !a.InteractiveReady || a.Name != "reviewer" {
					t.Errorf("agent = %+v, want reviewer interactive-ready", a)
				}
			} else {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrAgentStartFailed) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if got := errors.Is(err, ErrAgentStartTimeout); got != tt.wantTimeout {
					t.Errorf("errors.Is(ErrAgentStartTimeout) = %v (err %v)", got, err)
				}
				if tt.wantCode != "" && !IsCode(err, tt.wantCode) {
					t.Errorf("err = %v, want herdr code %s kept", err, tt.wantCode)
				}
				if !strings.Contains(err.Error(), `"reviewer"`) || !strings.Contains(err.Error(), "w1:p2") {
					t.Errorf("error %q does not say which agent and pane", err)
				}
			}
			want := []string{`agent.start {"name":"reviewer","kind":"claude","pane_id":"w1:p2","timeout_ms":10000}`}
			for range tt.wantGets {
				want = append(want, `agent.get {"target":"reviewer"}`)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(want, methods); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartAgent_LaunchRefused(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		c.fail("agent_pane_busy", "pane w1:p2 is running vim")
	})
	_, err := newClient(t, &Options{SocketPath: srv.path}).StartAgent(t.Context(),
		AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2"}, time.Microsecond)
	if !IsCode(err, "agent_pane_busy") {
		t.Fatalf("err = %v, want agent_pane_busy", err)
	}
	if errors.Is(err, ErrAgentStartFailed) {
		t.Errorf("a refused agent.start is herdr's error, not a readiness failure: %v", err)
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("connections = %d, want 1 (no polling after a refusal)", n)
	}
}

func TestStartAgent_ContextCancelStopsPolling(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		c.result(`{"type":"agent_started","argv":["claude"],"agent":` + agentLine(`"launch_pending":true`) + `}`)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := newClient(t, &Options{SocketPath: srv.path, Observer: func(string, string, time.Duration) { cancel() }})
	_, err := c.StartAgent(ctx, AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2"}, time.Hour)
	if err == nil || !errors.Is(err, ctx.Err()) {
		t.Fatalf("err = %v, want the context's error", err)
	}
}
