package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/mcp"
)

// herdr restarts with session restore under a running fleetd (the same
// pane ids, new terminal ids, the agents relaunched under their names), or
// hands off live to a new binary (every connection dropped, new terminal
// ids). fleetd opens no tab and starts no agent, every worker is Ready
// again on its pane's new terminal, every worker's token still opens the
// gateway as that worker (its open session and a new one), and a
// bridge_send to a worker afterwards gets its reply.
func TestGateway_HerdrRestartOrHandoffKeepsTokensAndSends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		disrupt func(*herdrsim.Server) error
	}{
		{"restart with restore", func(s *herdrsim.Server) error {
			if err := s.Stop(); err != nil {
				return err
			}
			return s.RestartRestored(nil)
		}},
		{"live handoff", (*herdrsim.Server).Handoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachProtocol(t, func(t *testing.T, protocol int) {
				keepsTokensAndSends(t, protocol, tc.disrupt)
			})
		})
	}
}

func keepsTokensAndSends(t *testing.T, protocol int, disrupt func(*herdrsim.Server) error) {
	f := startFleetOn(t, protocol)
	workers := []*worker{f.spawn("alice"), f.spawn("bob")}
	views := map[string]mcp.MemberView{}
	for _, w := range workers {
		views[w.name], _ = f.memberView(w.name)
	}
	calls := f.sim.Calls()
	if err := disrupt(f.sim); err != nil {
		t.Fatal(err)
	}
	terminals := map[string]string{}
	for _, w := range workers {
		p, ok := f.sim.Pane(w.pane)
		if !ok || p.AgentName != w.name {
			t.Fatalf("herdr kept %s's pane %s as %+v, %v", w.name, w.pane, p, ok)
		}
		terminals[w.name] = p.TerminalID
	}
	var last []string
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		ready, seen := 0, []string{}
		for _, m := range ms {
			if m.Status.Phase == v1alpha1.PhaseReady && m.Status.TerminalID == terminals[m.Name] {
				ready++
			}
			seen = append(seen, m.Name+" "+m.Status.Phase+" on "+m.Status.TerminalID)
		}
		last = seen
		return ready == len(workers)
	})
	if err != nil {
		t.Fatalf("the workers were not Ready again on their new terminals %v: %v; last seen %v", terminals, err, last)
	}
	now := f.sim.Calls()
	for _, m := range []string{"tab.create", "agent.start", "tab.close", "workspace.create"} {
		if now[m] != calls[m] {
			t.Errorf("%s called %d times after herdr restarted or handed off", m, now[m]-calls[m])
		}
	}
	for _, w := range workers {
		want := mcp.WhoamiOutput{Role: "worker", Name: w.name, SessionID: views[w.name].SessionID, PaneID: w.pane}
		if who, err := call[mcp.WhoamiOutput](f.ctx, w.sess, "bridge_whoami", nil); err != nil || who != want {
			t.Errorf("%s's open session afterwards: bridge_whoami = %+v, %v; want %+v", w.name, who, err, want)
		}
		fresh, err := f.connectTo(f.info.MCPURL, w.token)
		if err != nil {
			t.Errorf("%s's token no longer opens the gateway afterwards: %v", w.name, err)
			continue
		}
		if who, err := call[mcp.WhoamiOutput](f.ctx, fresh, "bridge_whoami", nil); err != nil || who != want {
			t.Errorf("%s's token in a new session: bridge_whoami = %+v, %v; want %+v", w.name, who, err, want)
		}
		fresh.Close()
	}

	for _, w := range workers {
		sent := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "afterwards, " + w.name, "sessionId": w.name})
		if got := f.prompt(w); got != "afterwards, "+w.name {
			t.Fatalf("%s was prompted %q", w.name, got)
		}
		reply := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "done, " + w.name})
		out := waitOK(t, f.ctx, sent)
		want := mcp.SendOutput{Outcome: "reply", Text: "done, " + w.name, TurnID: reply.TurnID, SessionID: views[w.name].SessionID, Name: w.name}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("bridge_send to %s afterwards (-want +got):\n%s", w.name, diff)
		}
	}
}

// A bridge_send is held on a worker whose agent was given the prompt (seen
// working on it, or not yet seen picking it up) when herdr restarts with
// session restore: herdr relaunches the agent, a new process that lost the
// prompt. The held call returns at once with turn_done saying herdr
// restarted, the prompt is never typed again, and a message queued behind
// it goes to the relaunched agent. (Without the relaunch notice the first
// case returned the new agent's screen as if the turn had run, the second
// waited out its deadline.)
func TestGateway_HerdrRestartEndsTheTurnItsRelaunchedAgentLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		working bool
	}{{"seen working", true}, {"not picked up yet", false}} {
		t.Run(tc.name, func(t *testing.T) {
			eachProtocol(t, func(t *testing.T, protocol int) {
				f := startFleetOn(t, protocol)
				w := f.spawn("alice")
				if !tc.working {
					f.sim.SetBehavior(w.pane, herdrsim.Behavior{OnPrompt: func(_, text string) { w.prompts <- text }})
				}
				held := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "long task", "sessionId": "alice", "timeoutMs": 600_000})
				if got := f.prompt(w); got != "long task" {
					t.Fatalf("alice was prompted %q", got)
				}
				if tc.working {
					f.setStatus(w, "working")
				}
				callOK[mcp.SendOutput](f, f.primary, "bridge_send", map[string]any{"content": "next task", "sessionId": "alice", "wait": false})

				f.restartRestored()
				ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
				defer cancel()
				out := waitOK(t, ctx, held)
				if out.Outcome != "turn_done" || !strings.Contains(out.Text, "herdr restarted") || !strings.Contains(out.Text, "not typed again") {
					t.Errorf("the held bridge_send after herdr restarted = %+v; want turn_done naming the restart", out)
				}
				if got := f.prompt(w); got != "next task" {
					t.Errorf("the relaunched agent was prompted %q; want the queued %q (and never the lost prompt again)", got, "next task")
				}
			})
		})
	}
}

// After a live handoff, whose agent keeps running, a held call on its turn
// stays open and gets the worker's reply: a new terminal id is not a
// relaunch.
func TestGateway_HerdrHandoffKeepsTheHeldTurn(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		f := startFleetOn(t, protocol)
		w := f.spawn("alice")
		held := callAsync[mcp.SendOutput](f.ctx, f.primary, "bridge_send", map[string]any{"content": "long task", "sessionId": "alice", "timeoutMs": 600_000})
		if got := f.prompt(w); got != "long task" {
			t.Fatalf("alice was prompted %q", got)
		}
		f.setStatus(w, "working")
		if err := f.sim.Handoff(); err != nil {
			t.Fatal(err)
		}
		p, ok := f.sim.Pane(w.pane)
		if !ok {
			t.Fatal("herdr lost alice's pane in the handoff")
		}
		err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
			for _, m := range ms {
				if m.Name == "alice" {
					return m.Status.Phase == v1alpha1.PhaseReady && m.Status.TerminalID == p.TerminalID
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("alice was not Ready again on her new terminal: %v", err)
		}
		select {
		case r := <-held:
			t.Fatalf("the held bridge_send ended at the handoff: %+v, %v", r.out, r.err)
		default:
		}
		reply := callOK[mcp.ReplyOutput](f, w.sess, "bridge_reply", map[string]any{"content": "done after the handoff"})
		out := waitOK(t, f.ctx, held)
		if out.Outcome != "reply" || out.Text != "done after the handoff" || out.TurnID != reply.TurnID {
			t.Errorf("the held bridge_send after the handoff = %+v; want the worker's reply", out)
		}
	})
}

// restartRestored restarts herdr with session restore as a real herdr
// restarts: its process is gone for a while, long enough for fleetd to find
// its socket refusing a connection, and comes back with its panes and their
// agents relaunched.
func (f *running) restartRestored() {
	f.t.Helper()
	if err := f.sim.Stop(); err != nil {
		f.t.Fatal(err)
	}
	const refused = `fleetd_herdr_requests_total{code="unavailable",method="ping"}`
	tick := time.NewTicker(20 * time.Millisecond) // paces the polls of /metrics; decides nothing
	defer tick.Stop()
	for {
		resp, err := http.Get(f.info.URL + "/metrics")
		if err != nil {
			f.t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			f.t.Fatal(err)
		}
		if strings.Contains(string(body), refused) {
			break
		}
		select {
		case <-tick.C:
		case <-f.ctx.Done():
			f.t.Fatal("fleetd never found herdr's socket refusing a connection")
		}
	}
	if err := f.sim.RestartRestored(nil); err != nil {
		f.t.Fatal(err)
	}
}
