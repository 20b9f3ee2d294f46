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
				case "pane.get":
					c.result(`{"type":"pane_info","pane":` + paneJSON + `}`)
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
			want := []string{`pane.get {"pane_id":"w1:p2"}`, `agent.start {"name":"reviewer","kind":"claude","pane_id":"w1:p2","timeout_ms":10000}`}
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
		if c.req.Method == "pane.get" {
			c.result(`{"type":"pane_info","pane":` + paneJSON + `}`)
			return
		}
		c.fail("agent_name_taken", "agent name reviewer is already used")
	})
	_, err := newClient(t, &Options{SocketPath: srv.path}).StartAgent(t.Context(),
		AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2"}, time.Microsecond)
	if !IsCode(err, "agent_name_taken") {
		t.Fatalf("err = %v, want agent_name_taken", err)
	}
	if errors.Is(err, ErrAgentStartFailed) {
		t.Errorf("a refused agent.start is herdr's error, not a readiness failure: %v", err)
	}
	if n := srv.accepted.Load(); n != 2 {
		t.Errorf("connections = %d, want 2 (pane.get, agent.start; no polling after a refusal)", n)
	}
}

// withStatus is agentLine(flags) with agent_status replaced.
func withStatus(flags, status string) string {
	return strings.Replace(agentLine(flags), `"agent_status":"idle"`, `"agent_status":"`+status+`"`, 1)
}

// TestStartAgent_LikeHerdrsCLI scripts the rules herdr's CLI follows:
// retry agent_pane_busy while a new shell starts (bounded), fail fast on a
// replaced pane or another kind, and report a dialog as awaiting input.
func TestStartAgent_LikeHerdrsCLI(t *testing.T) {
	const otherTerm = "term_18a2b3c4d5e6f8"
	pending := `"launch_pending":true`
	tests := []struct {
		name string
		// starts are agent.start's answers: "!code" or an agent line.
		starts []string
		// terms are the terminal ids pane.get answers, in order.
		terms []string
		polls []string // agent.get answers: agent lines
		tick  time.Duration
		// wantErrs must all match; wantOK: the agent is returned.
		wantErrs []error
		wantCode string
		wantOK   bool
		wantCall []string // methods, in order
	}{
		{
			name:     "busy while the shell starts, then started",
			starts:   []string{"!agent_pane_busy", "!agent_pane_busy", agentLine(pending)},
			polls:    []string{agentLine(`"interactive_ready":true`)},
			tick:     400 * time.Millisecond,
			wantOK:   true,
			wantCall: []string{"pane.get", "agent.start", "pane.get", "agent.start", "pane.get", "agent.start", "agent.get"},
		},
		{
			name:     "busy for longer than 2 s",
			starts:   []string{"!agent_pane_busy", "!agent_pane_busy", "!agent_pane_busy", "!agent_pane_busy"},
			tick:     500 * time.Millisecond, // the second agent.start answers at 2 s: no third
			wantCode: "agent_pane_busy",
			wantCall: []string{"pane.get", "agent.start", "pane.get", "agent.start"},
		},
		{
			name:     "pane replaced while busy",
			starts:   []string{"!agent_pane_busy"},
			terms:    []string{"term_18a2b3c4d5e6f7", otherTerm},
			wantErrs: []error{ErrAgentStartFailed, ErrPaneReplaced},
			wantCall: []string{"pane.get", "agent.start", "pane.get"},
		},
		{
			name:     "pane replaced while launching",
			starts:   []string{agentLine(pending)},
			polls:    []string{strings.Replace(agentLine(pending), "term_18a2b3c4d5e6f7", otherTerm, 1)},
			wantErrs: []error{ErrAgentStartFailed, ErrPaneReplaced},
			wantCall: []string{"pane.get", "agent.start", "agent.get"},
		},
		{
			name:     "kind mismatch",
			starts:   []string{agentLine(pending)},
			polls:    []string{strings.Replace(agentLine(pending), `"agent":"claude"`, `"agent":"codex"`, 1)},
			wantErrs: []error{ErrAgentStartFailed, ErrAgentKindMismatch},
			wantCall: []string{"pane.get", "agent.start", "agent.get"},
		},
		{
			name:     "blocked at a dialog",
			starts:   []string{withStatus(pending, "unknown")},
			polls:    []string{withStatus(pending, "blocked")},
			wantErrs: []error{ErrAgentAwaitingInput},
			wantOK:   true,
			wantCall: []string{"pane.get", "agent.start", "agent.get"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)}
			var mu sync.Mutex
			var calls []string
			n := map[string]int{}
			next := func(xs []string, method string) string {
				i := n[method]
				n[method]++
				if i >= len(xs) {
					if len(xs) == 0 {
						return ""
					}
					return xs[len(xs)-1]
				}
				return xs[i]
			}
			srv := startServer(t, func(c *scriptConn) {
				mu.Lock()
				calls = append(calls, c.req.Method)
				var answer string
				switch c.req.Method {
				case "pane.get":
					answer = next(tt.terms, "pane.get")
				case "agent.start":
					answer = next(tt.starts, "agent.start")
				case "agent.get":
					answer = next(tt.polls, "agent.get")
				}
				mu.Unlock()
				clock.Advance(tt.tick)
				switch c.req.Method {
				case "pane.get":
					pane := paneJSON
					if answer != "" {
						pane = strings.Replace(pane, "term_18a2b3c4d5e6f7", answer, 1)
					}
					c.result(`{"type":"pane_info","pane":` + pane + `}`)
				case "agent.start":
					if code, ok := strings.CutPrefix(answer, "!"); ok {
						c.fail(code, "pane w1:p2 is busy: its shell is still starting")
						return
					}
					c.result(`{"type":"agent_started","argv":["claude"],"agent":` + answer + `}`)
				case "agent.get":
					c.result(`{"type":"agent_info","agent":` + answer + `}`)
				}
			})
			c := newClient(t, &Options{SocketPath: srv.path})
			c.now = clock.Now
			a, err := c.StartAgent(t.Context(), AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2"}, time.Microsecond)
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to match %v", err, want)
				}
			}
			if tt.wantCode != "" && !IsCode(err, tt.wantCode) {
				t.Errorf("err = %v, want herdr's %s", err, tt.wantCode)
			}
			if len(tt.wantErrs) == 0 && tt.wantCode == "" && err != nil {
				t.Errorf("StartAgent: %v", err)
			}
			if errors.Is(err, ErrAgentAwaitingInput) && errors.Is(err, ErrAgentStartFailed) {
				t.Errorf("awaiting input must not read as a failed start: %v", err)
			}
			if (a != nil) != tt.wantOK {
				t.Errorf("agent = %+v, want returned: %v", a, tt.wantOK)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.wantCall, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartAgent_ContextCancelStopsPolling(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		if c.req.Method == "pane.get" {
			c.result(`{"type":"pane_info","pane":` + paneJSON + `}`)
			return
		}
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
