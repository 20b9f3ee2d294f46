package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
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
	for _, tc := range []struct {
		name    string
		disrupt func(*herdrtest.Server) error
	}{
		{"restart with restore", func(s *herdrtest.Server) error {
			if err := s.Stop(); err != nil {
				return err
			}
			return s.RestartRestored(nil)
		}},
		{"live handoff", (*herdrtest.Server).Handoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachProtocol(t, func(t *testing.T, protocol int) {
				keepsTokensAndSends(t, protocol, tc.disrupt)
			})
		})
	}
}

func keepsTokensAndSends(t *testing.T, protocol int, disrupt func(*herdrtest.Server) error) {
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
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		ready := 0
		for _, m := range ms {
			if m.Status.Phase == v1alpha1.PhaseReady && m.Status.TerminalID == terminals[m.Name] {
				ready++
			}
		}
		return ready == len(workers)
	})
	if err != nil {
		t.Fatalf("the workers were not Ready again on their new terminals: %v", err)
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
