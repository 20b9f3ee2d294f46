package herdr_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
)

// These tests drive the client against the fake herdr (in memory, schema
// checked, in a synctest bubble: the fake's delays run on virtual time).

func onFake(t *testing.T, opts herdrsim.Options, f func(ctx context.Context, c *herdr.Client, srv *herdrsim.Server)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		opts.InMemory = true
		srv, err := validated.Start(&opts)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		f(t.Context(), herdr.New(&herdr.Options{Dial: srv.Dial}), srv)
	})
}

func newTab(t *testing.T, ctx context.Context, c *herdr.Client) string {
	t.Helper()
	ws, err := c.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	return ws.RootPane.PaneID
}

func TestFake_PingBothProtocols(t *testing.T) {
	for _, p := range []int{20, 22} {
		onFake(t, herdrsim.Options{Protocol: p}, func(ctx context.Context, c *herdr.Client, _ *herdrsim.Server) {
			pong, err := c.Ping(ctx)
			if err != nil || pong.Protocol != p || pong.Newer() {
				t.Errorf("protocol %d: Ping = %+v, %v", p, pong, err)
			}
		})
	}
}

// On a herdr whose new shells take 400 ms to start, agent.start refuses
// with agent_pane_busy at first; StartAgent retries until the shell is up.
func TestFake_StartAgentWaitsForTheShell(t *testing.T) {
	onFake(t, herdrsim.Options{ShellStartDelay: 400 * time.Millisecond, ReadyDelay: 3 * time.Second},
		func(ctx context.Context, c *herdr.Client, srv *herdrsim.Server) {
			pane := newTab(t, ctx, c)
			start := time.Now()
			a, err := c.StartAgent(ctx, herdr.AgentStartParams{Name: "coder", Kind: "claude", PaneID: pane}, 0)
			if err != nil {
				t.Fatalf("StartAgent: %v", err)
			}
			if !a.InteractiveReady || a.PaneID != pane {
				t.Errorf("agent = %+v", a)
			}
			if d := time.Since(start); d < 3400*time.Millisecond || d > 3600*time.Millisecond {
				t.Errorf("start took %s, want about 400 ms of shell start plus 3 s of readiness", d)
			}
			if n := srv.Calls()["agent.start"]; n < 2 {
				t.Errorf("agent.start calls = %d, want the busy refusals retried", n)
			}
		})
}

func TestFake_StartAgentAtADialogAwaitsInput(t *testing.T) {
	onFake(t, herdrsim.Options{ReadyDelay: 3 * time.Second, Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}},
		func(ctx context.Context, c *herdr.Client, srv *herdrsim.Server) {
			pane := newTab(t, ctx, c)
			a, err := c.StartAgent(ctx, herdr.AgentStartParams{Name: "coder", Kind: "claude", PaneID: pane}, 0)
			if !errors.Is(err, herdr.ErrAgentAwaitingInput) || errors.Is(err, herdr.ErrAgentStartFailed) {
				t.Fatalf("err = %v, want ErrAgentAwaitingInput only", err)
			}
			if a == nil || a.AgentStatus != herdr.StatusBlocked || !a.LaunchPending || a.Name != "coder" {
				t.Fatalf("agent = %+v, want coder launch-pending and blocked", a)
			}
			time.Sleep(time.Minute) // past the 30 s startup timeout: still waiting, not failed
			if a, err := c.GetAgent(ctx, "coder"); err != nil || !a.LaunchPending {
				t.Fatalf("after a minute: %+v, %v; want still pending under its name", a, err)
			}
			if err := srv.AnswerDialog(pane); err != nil {
				t.Fatal(err)
			}
			if a, err := c.GetAgent(ctx, "coder"); err != nil || !a.InteractiveReady || a.AgentStatus != herdr.StatusIdle {
				t.Errorf("after the answer: %+v, %v; want ready and idle", a, err)
			}
		})
}

func TestFake_EventsLostEndsTheStream(t *testing.T) {
	onFake(t, herdrsim.Options{EventRing: 2}, func(ctx context.Context, c *herdr.Client, _ *herdrsim.Server) {
		s, err := c.Subscribe(ctx, []herdr.Subscription{{Type: herdr.SubPaneClosed}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		newTab(t, ctx, c) // four events at once; two are retained
		for range s.Events() {
			t.Error("an event was delivered")
		}
		if err := s.Err(); !errors.Is(err, herdr.ErrEventsLost) || !errors.Is(err, herdr.ErrStreamDropped) {
			t.Errorf("Err = %v, want ErrEventsLost and ErrStreamDropped", err)
		}
	})
}
