package herdrsim_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/google/go-cmp/cmp"
)

func TestIDsAreNeverReused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wsID, p1 := h.workspace(nil)
	if wsID != "w1" || p1 != "w1:p1" {
		t.Fatalf("first ids = %s, %s", wsID, p1)
	}
	var panes []string
	for range 9 {
		panes = append(panes, str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "down"}), "pane", "pane_id"))
	}
	if panes[8] != "w1:pA" {
		t.Errorf("10th pane = %s, want w1:pA (bijective base 32)", panes[8])
	}
	h.ok("pane.close", map[string]any{"pane_id": panes[8]})
	if got := str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "down"}), "pane", "pane_id"); got != "w1:pB" {
		t.Errorf("pane after closing w1:pA = %s, want w1:pB", got)
	}
	if code, _ := h.fail("pane.get", map[string]any{"pane_id": "w1:pA"}); code != "pane_not_found" {
		t.Errorf("closed pane = %s, want pane_not_found", code)
	}
	t2 := h.ok("tab.create", map[string]any{"workspace_id": wsID})
	if got := str(t2, "tab", "tab_id"); got != "w1:t2" {
		t.Errorf("second tab = %s", got)
	}
	h.ok("tab.close", map[string]any{"tab_id": "w1:t2"})
	t3 := h.ok("tab.create", map[string]any{"workspace_id": wsID})
	if got, root := str(t3, "tab", "tab_id"), str(t3, "root_pane", "pane_id"); got != "w1:t3" || root != "w1:pD" {
		t.Errorf("tab after closing w1:t2 = %s with root %s, want w1:t3 with w1:pD", got, root)
	}
	term := regexp.MustCompile(`^term_[0-9a-f]+$`)
	seen := map[string]bool{}
	for _, p := range h.ok("pane.list", map[string]any{})["panes"].([]any) {
		id := p.(map[string]any)["terminal_id"].(string)
		if !term.MatchString(id) || seen[id] {
			t.Errorf("terminal id %q is malformed or repeated", id)
		}
		seen[id] = true
	}
}

func TestPaneEnv(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(map[string]any{"env": map[string]any{
		"FLEETD_AGENT": "a1", "HERDR_PANE_ID": "spoofed", "TERM": "dumb", "CODEX_THREAD_ID": "x",
	}})
	env, ok := h.srv.PaneEnv(pane)
	if !ok {
		t.Fatal("no pane")
	}
	want := map[string]string{
		"FLEETD_AGENT": "a1", "HERDR_ENV": "1", "HERDR_SOCKET_PATH": h.srv.SocketPath(), "HERDR_BIN_PATH": "herdr",
		"HERDR_WORKSPACE_ID": "w1", "HERDR_TAB_ID": "w1:t1", "HERDR_PANE_ID": pane,
		"TERM": "xterm-256color", "COLORTERM": "truecolor",
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "A=B", "A\x00"} {
		if code, _ := h.fail("tab.create", map[string]any{"env": map[string]any{bad: "v"}}); code != "invalid_env" {
			t.Errorf("env key %q: %s, want invalid_env", bad, code)
		}
	}
}

// TestEmissionOrder pins herdr's events per operation, including the uneven
// close and exit rules.
func TestEmissionOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// step runs setup, then act, and checks the events act emitted.
	step := func(name string, want []string, setup, act func()) {
		t.Helper()
		if setup != nil {
			setup()
		}
		before := len(h.srv.Events())
		act()
		emitted := h.srv.Events()[before:]
		if got := kinds(emitted); !cmp.Equal(got, want) {
			t.Errorf("%s emitted %v, want %v", name, got, want)
		}
		for _, ev := range emitted {
			if err := h.v.Event(ev.Line); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	var ws, p1, p2, tab2, tab2pane, tab3, ws3, lonely, exiting string
	step("workspace.create", []string{"workspace_created", "tab_created", "pane_created", "layout_updated"}, nil, func() { ws, p1 = h.workspace(nil) })
	step("workspace.create focus", []string{"workspace_created", "tab_created", "pane_created", "layout_updated", "workspace_focused"}, nil, func() {
		h.ok("workspace.create", map[string]any{"focus": true})
	})
	step("tab.create", []string{"tab_created", "pane_created", "layout_updated"}, nil, func() {
		res := h.ok("tab.create", map[string]any{"workspace_id": ws})
		tab2, tab2pane = str(res, "tab", "tab_id"), str(res, "root_pane", "pane_id")
	})
	step("pane.split", []string{"pane_created", "layout_updated"}, nil, func() {
		p2 = str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "right"}), "pane", "pane_id")
	})
	step("pane.close with a surviving tab", []string{"pane_closed", "layout_updated"}, nil, func() { h.ok("pane.close", map[string]any{"pane_id": p2}) })
	step("pane.close of a tab's last pane", []string{"pane_closed"}, nil, func() { h.ok("pane.close", map[string]any{"pane_id": tab2pane}) })
	if code, _ := h.fail("tab.close", map[string]any{"tab_id": tab2}); code != "tab_not_found" {
		t.Errorf("the tab must be gone with its last pane: %s", code)
	}
	step("tab.close of a tab with panes", []string{"tab_closed"}, func() {
		res := h.ok("tab.create", map[string]any{"workspace_id": ws})
		tab3 = str(res, "tab", "tab_id")
		h.ok("pane.split", map[string]any{"target_pane_id": str(res, "root_pane", "pane_id"), "direction": "down"})
	}, func() { h.ok("tab.close", map[string]any{"tab_id": tab3}) })
	step("tab.close of the last tab", []string{"tab_closed", "workspace_closed"}, func() { ws3, _ = h.workspace(nil) }, func() {
		h.ok("tab.close", map[string]any{"tab_id": ws3 + ":t1"})
	})
	step("pane.close of the workspace's last pane", []string{"pane_closed", "workspace_closed"}, func() { _, lonely = h.workspace(nil) }, func() {
		h.ok("pane.close", map[string]any{"pane_id": lonely})
	})
	step("workspace.close", []string{"workspace_closed"}, nil, func() { h.ok("workspace.close", map[string]any{"workspace_id": "w2"}) })
	step("process exit with a surviving tab", []string{"pane_exited", "layout_updated"}, func() {
		exiting = str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "right"}), "pane", "pane_id")
	}, func() { h.srv.KillPane(exiting) })
	step("process exit of the last pane", []string{"pane_exited"}, nil, func() { h.srv.KillPane(p1) })
	if _, ok := h.srv.Pane(p1); ok {
		t.Error("exited pane is still there")
	}
	if ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(ws) != 0 {
		t.Errorf("the last exit must remove the workspace silently; left %v", ws)
	}
}

func TestSubscriptionEnvelopes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{NoReplay: true})
	_, pane := h.workspace(nil)
	s := h.subscribe(sub("pane.agent_detected"), sub("pane.agent_status_changed", "pane_id", pane), sub("pane.created"))
	h.agent("w1", pane)
	detected := s.event()
	status := s.event()
	if detected.Event != "pane_agent_detected" || detected.Data["type"] != "pane_agent_detected" || detected.Data["agent"] != "claude" {
		t.Errorf("lifecycle line = %s, want snake_case event with a type tag", detected.raw)
	}
	if _, tagged := status.Data["type"]; status.Event != "pane.agent_status_changed" || tagged || status.Data["agent_status"] != "idle" {
		t.Errorf("per-pane line = %s, want dot-named event without type", status.raw)
	}
	p2 := str(h.ok("pane.split", map[string]any{"target_pane_id": pane, "direction": "down"}), "pane", "pane_id")
	if ev := s.event(); ev.Event != "pane_created" || str(ev.Data, "pane", "pane_id") != p2 {
		t.Errorf("got %s, want pane_created for %s", ev.raw, p2)
	}
}

func TestSubscriptionReplaysRing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Protocol: 20}) // herdr 0.8.2 replays; 0.9 never does
	_, p1 := h.workspace(nil)
	_, p2 := h.workspace(nil)
	s := h.subscribe(sub("pane.created"))
	for _, want := range []string{p1, p2} {
		if ev := s.event(); str(ev.Data, "pane", "pane_id") != want {
			t.Errorf("replayed %s, want pane_created for %s", ev.raw, want)
		}
	}
}

func TestSubscriptionStatusFilterAndInitial(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	s := h.subscribe(sub("pane.agent_status_changed", "pane_id", pane, "agent_status", "idle"))
	if ev := s.event(); ev.Data["agent_status"] != "idle" {
		t.Fatalf("initial = %s, want the already-matching idle status", ev.raw)
	}
	h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"}) // working: filtered out
	h.srv.SetAgentState(pane, "idle")
	if ev := s.event(); ev.Data["agent_status"] != "idle" {
		t.Fatalf("got %s, want idle after the filtered working", ev.raw)
	}
}

// Protocol 20 answers a subscription setup error under a probe id, protocol
// 22 under the request id.
func TestSubscriptionSetupErrorID(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		h := newHarness(t, &herdrsim.Options{Protocol: protocol})
		_, pane := h.workspace(nil)
		id, c := h.send("events.subscribe", map[string]any{"subscriptions": []any{sub("pane.created"), sub("pane.agent_status_changed", "pane_id", pane), sub("pane.agent_status_changed", "pane_id", "w1:p9")}})
		line, _ := c.next()
		r := h.response(line)
		want := map[int]string{20: id + ":sub:2:probe", 22: id}[protocol]
		if r.Error == nil || r.Error.Code != "pane_not_found" || r.ID != want {
			t.Fatalf("protocol %d: response = %s, want pane_not_found with id %s", protocol, line, want)
		}
		c.eof()
	}
}

func TestEventsWait(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		t.Run(fmt.Sprint("protocol ", protocol), func(t *testing.T) { testEventsWait(t, protocol) })
	}
}

func testEventsWait(t *testing.T, protocol int) {
	h := newHarness(t, &herdrsim.Options{Protocol: protocol, Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
	probe := func(id string) string { // the id of a setup error
		if protocol == 20 {
			return id + ":sub:0:probe"
		}
		return id
	}
	_, pane := h.workspace(nil)
	h.ok("pane.split", map[string]any{"target_pane_id": pane, "direction": "down"})
	h.agent("w1", pane)
	match := func(status string) map[string]any {
		return map[string]any{"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": status}}
	}
	res := h.ok("events.wait", match("idle"))
	ev := res["event"].(map[string]any)
	if ev["event"] != "pane_agent_status_changed" || str(ev, "data", "type") != "pane_agent_status_changed" || str(ev, "data", "agent_status") != "idle" {
		t.Errorf("immediate match = %v", res)
	}
	if code, _ := h.fail("events.wait", map[string]any{"match_event": map[string]any{"event": "pane_closed", "pane_id": pane}}); code != "unsupported_event_wait_match" {
		t.Errorf("other event = %s", code)
	}
	id, c := h.send("events.wait", map[string]any{"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": "w1:p9", "agent_status": "idle"}})
	line, _ := c.next()
	if r := h.response(line); r.Error == nil || r.Error.Code != "pane_not_found" || r.ID != probe(id) {
		t.Errorf("missing pane = %s", line)
	}
	_, c = h.send("events.wait", match("blocked"))
	if err := h.srv.WaitParked(ctxT(t), "events.wait", 1); err != nil {
		t.Fatal(err)
	}
	h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
	h.srv.SetAgentState(pane, "blocked")
	line, _ = c.next()
	if r := h.response(line); r.Error != nil || str(r.Result, "event", "data", "agent_status") != "blocked" {
		t.Errorf("transition = %s", line)
	}
	id, c = h.send("events.wait", match("done"))
	if err := h.srv.WaitParked(ctxT(t), "events.wait", 1); err != nil {
		t.Fatal(err)
	}
	h.ok("pane.close", map[string]any{"pane_id": pane})
	line, _ = c.next()
	if r := h.response(line); r.Error == nil || r.Error.Code != "pane_not_found" || r.ID != probe(id) {
		t.Errorf("pane closed = %s", line)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	t.Run("garbage is caught by the validator", func(t *testing.T) {
		h := newHarness(t, nil)
		h.srv.InjectFault("ping", herdrsim.Fault{Garbage: []byte(`{"id":"x","result":{"type":"pong"}}`), Times: 1})
		_, c := h.send("ping", map[string]any{})
		line, _ := c.next()
		if err := h.v.Response(line); err == nil {
			t.Fatalf("validator accepted the malformed pong %s", line)
		}
		h.ok("ping", map[string]any{}) // Times: 1 — the next ping is clean
	})
	t.Run("a real response with a field removed is caught", func(t *testing.T) {
		h := newHarness(t, nil)
		_, pane := h.workspace(nil)
		_, c := h.send("pane.get", map[string]any{"pane_id": pane})
		line, _ := c.next()
		var m map[string]any
		json.Unmarshal(line, &m)
		delete(m["result"].(map[string]any)["pane"].(map[string]any), "terminal_id")
		bad, _ := json.Marshal(m)
		if err := h.v.Response(bad); err == nil {
			t.Fatalf("validator accepted %s", bad)
		}
	})
	t.Run("drop, with and without effect", func(t *testing.T) {
		h := newHarness(t, nil)
		h.srv.InjectFault("workspace.create", herdrsim.Fault{Drop: true, Times: 1})
		_, c := h.send("workspace.create", map[string]any{})
		c.eof()
		h.srv.InjectFault("workspace.create", herdrsim.Fault{Drop: true, Execute: true, Times: 1})
		_, c = h.send("workspace.create", map[string]any{})
		c.eof()
		if ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(ws) != 1 {
			t.Errorf("workspaces = %v, want only the executed one", ws)
		}
	})
	t.Run("hang until the fake stops, then restart", func(t *testing.T) {
		h := newHarness(t, nil)
		h.workspace(nil)
		h.srv.InjectFault("", herdrsim.Fault{Hang: true})
		_, c := h.send("ping", map[string]any{})
		if err := h.srv.WaitParked(ctxT(t), "ping", 1); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.Stop(); err != nil {
			t.Fatal(err)
		}
		c.eof()
		h.srv.ClearFaults()
		if err := h.srv.Restart(); err != nil {
			t.Fatal(err)
		}
		if ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(ws) != 1 {
			t.Errorf("state after restart = %v", ws)
		}
	})
	t.Run("latency runs on the clock", func(t *testing.T) {
		h := newHarness(t, nil)
		h.srv.InjectFault("ping", herdrsim.Fault{Latency: 2e9})
		_, c := h.send("ping", map[string]any{})
		if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Step(2e9)
		line, ok := c.next()
		if !ok || h.response(line).Result["type"] != "pong" {
			t.Fatalf("response = %s", line)
		}
	})
}

func TestEventRingKeepsTheNewest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{EventRing: 3})
	for range 3 {
		h.ok("workspace.create", map[string]any{})
	}
	var got []string
	var seqs []uint64
	for _, ev := range h.srv.Events() {
		got = append(got, ev.Kind)
		seqs = append(seqs, ev.Seq)
	}
	// Each workspace.create emits workspace_created, tab_created,
	// pane_created, layout_updated: 12 in all, of which the last 3 stay.
	if want := []string{"tab_created", "pane_created", "layout_updated"}; !cmp.Equal(got, want) {
		t.Errorf("ring kinds = %v, want %v", got, want)
	}
	if want := []uint64{10, 11, 12}; !cmp.Equal(seqs, want) {
		t.Errorf("ring seqs = %v, want %v", seqs, want)
	}
}

// TestSubscriptionStatusOfEachWatchedPaneOnly watches the statuses of two
// of three panes in one subscription, as fleetd watches its members'
// panes: every status of a watched pane comes, in order, and none of the
// other pane's — whose changes come first each time, so that one sent
// would be read before the watched pane's.
func TestSubscriptionStatusOfEachWatchedPaneOnly(t *testing.T) {
	for _, protocol := range []int{22, 20} {
		t.Run(fmt.Sprint("protocol=", protocol), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &herdrsim.Options{Protocol: protocol, Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
			_, a := h.workspace(nil)
			b := str(h.ok("pane.split", map[string]any{"target_pane_id": a, "direction": "right"}), "pane", "pane_id")
			c := str(h.ok("pane.split", map[string]any{"target_pane_id": a, "direction": "down"}), "pane", "pane_id")
			for i, p := range []string{a, b, c} {
				h.agent(fmt.Sprint("w", i), p)
			}
			for _, p := range []string{a, b, c} {
				h.srv.SetAgentState(p, "idle")
			}
			s := h.subscribe(sub("pane.agent_status_changed", "pane_id", a), sub("pane.agent_status_changed", "pane_id", c))
			for i, step := range []struct{ pane, status string }{
				{a, "working"}, {c, "blocked"}, {a, "idle"}, {c, "working"}, {a, "blocked"},
			} {
				h.srv.SetAgentState(b, []string{"working", "idle"}[i%2]) // a change each time
				h.srv.SetAgentState(step.pane, step.status)
				ev := s.event()
				if ev.Data["pane_id"] != step.pane || ev.Data["agent_status"] != step.status {
					t.Fatalf("step %d: got %s, want %s %s", i, ev.raw, step.pane, step.status)
				}
			}
		})
	}
}
