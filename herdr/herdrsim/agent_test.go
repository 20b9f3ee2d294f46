package herdrsim_test

import (
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/google/go-cmp/cmp"
)

func TestAgentStartValidationOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	_, holder := h.workspace(nil)
	h.agent("taken", holder)
	busy := h.ok("pane.split", map[string]any{"target_pane_id": pane, "direction": "right"})
	busyPane := str(busy, "pane", "pane_id")
	if err := h.srv.SetForeground(busyPane, "vim"); err != nil {
		t.Fatal(err)
	}
	// Each case breaks its own rule and every later one, so the code
	// returned pins the order of the checks.
	tests := []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"bad name first", map[string]any{"name": "Bad", "kind": "nope", "pane_id": "w9:p9", "args": []string{"\x01"}, "timeout_ms": 1}, "invalid_agent_name"},
		{"name too long", map[string]any{"name": "a23456789012345678901234567890123", "kind": "claude", "pane_id": pane}, "invalid_agent_name"},
		{"kind before args", map[string]any{"name": "a", "kind": "nope", "pane_id": "w9:p9", "args": []string{"\x01"}}, "unsupported_agent_kind"},
		{"args before name taken", map[string]any{"name": "taken", "kind": "claude", "pane_id": "w9:p9", "args": []string{"x\ny"}}, "invalid_agent_argument"},
		{"name taken before pane", map[string]any{"name": "taken", "kind": "claude", "pane_id": "w9:p9", "timeout_ms": 1}, "agent_name_taken"},
		{"pane before timeout", map[string]any{"name": "a", "kind": "claude", "pane_id": "w9:p9", "timeout_ms": 1}, "agent_pane_not_found"},
		{"pane hosting an agent", map[string]any{"name": "b", "kind": "claude", "pane_id": holder, "timeout_ms": 1}, "agent_pane_busy"},
		{"pane running a program", map[string]any{"name": "b", "kind": "claude", "pane_id": busyPane, "timeout_ms": 1}, "agent_pane_busy"},
		{"timeout too small", map[string]any{"name": "b", "kind": "claude", "pane_id": pane, "timeout_ms": 3000}, "invalid_agent_timeout"},
		{"timeout too large", map[string]any{"name": "b", "kind": "claude", "pane_id": pane, "timeout_ms": 300001}, "invalid_agent_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _ := h.fail("agent.start", tt.params); code != tt.want {
				t.Errorf("code = %s, want %s", code, tt.want)
			}
		})
	}
	t.Run("alias, case-insensitive, argv", func(t *testing.T) {
		res := h.ok("agent.start", map[string]any{"name": "ok", "kind": "Claude-Code", "pane_id": pane, "args": []string{"--model", "x y"}, "timeout_ms": 300000})
		if diff := cmp.Diff([]any{"claude", "--model", "x y"}, res["argv"]); diff != "" {
			t.Errorf("argv (-want +got):\n%s", diff)
		}
		st, _ := h.srv.Pane(pane)
		if want := "claude --model 'x y'"; st.Screen != want {
			t.Errorf("typed command = %q, want %q", st.Screen, want)
		}
	})
}

func TestAgentLaunchPendingThenReady(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{ReadyDelay: 3 * time.Second})
	_, pane := h.workspace(nil)
	started := h.agent("w1", pane)
	a := started["agent"].(map[string]any)
	if a["launch_pending"] != true || a["interactive_ready"] != nil || a["name"] != "w1" || a["agent_status"] != "unknown" {
		t.Fatalf("agent.start agent = %v, want launch_pending, not ready", a)
	}
	got := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
	if got["launch_pending"] != true {
		t.Fatalf("agent.get before the delay = %v, want launch_pending", got)
	}
	if code, _ := h.fail("agent.prompt", map[string]any{"target": "w1", "text": "hi"}); code != "agent_not_ready" {
		t.Errorf("prompt while launching = %s, want agent_not_ready", code)
	}
	h.clock.Step(3 * time.Second)
	got = h.ok("agent.get", map[string]any{"target": pane})["agent"].(map[string]any)
	if got["launch_pending"] != nil || got["interactive_ready"] != true || got["agent_status"] != "idle" || got["state_change_seq"] != float64(1) {
		t.Fatalf("agent.get after the delay = %v, want interactive_ready idle with state_change_seq 1", got)
	}
}

func TestAgentInstantReady(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	if a := h.agent("w1", pane)["agent"].(map[string]any); a["launch_pending"] != true {
		t.Fatalf("agent.start = %v: herdr always answers launch_pending", a)
	}
	if a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any); a["interactive_ready"] != true {
		t.Fatalf("agent.get = %v, want interactive_ready at once with ReadyDelay 0", a)
	}
}

func TestFailedLaunchClearsName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		launch  herdrsim.Launch
		advance time.Duration
	}{
		{"never detected", herdrsim.LaunchNever, 30 * time.Second},
		{"program exits", herdrsim.LaunchExit, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &herdrsim.Options{ReadyDelay: time.Second, Behavior: herdrsim.Behavior{Launch: tt.launch}})
			_, pane := h.workspace(nil)
			h.agent("w1", pane)
			h.clock.Step(tt.advance - time.Millisecond)
			if a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any); a["launch_pending"] != true {
				t.Fatalf("before the deadline: %v", a)
			}
			h.clock.Step(time.Millisecond)
			if code, _ := h.fail("agent.get", map[string]any{"target": "w1"}); code != "agent_not_found" {
				t.Errorf("agent.get by name after failure = %s, want agent_not_found", code)
			}
			a := h.ok("agent.get", map[string]any{"target": pane})["agent"].(map[string]any)
			if a["launch_pending"] != nil || a["interactive_ready"] != nil || a["name"] != nil {
				t.Errorf("agent.get by pane = %v, want !launch_pending && !interactive_ready, no name", a)
			}
		})
	}
}

func TestPromptToBlockedAgentSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	before, _ := h.srv.Pane(pane)
	if code, _ := h.fail("agent.prompt", map[string]any{"target": "w1", "text": "do it"}); code != "agent_blocked" {
		t.Fatalf("code = %s, want agent_blocked", code)
	}
	after, _ := h.srv.Pane(pane)
	if after.Screen != before.Screen || len(after.Prompts) != 0 {
		t.Errorf("screen %q → %q, prompts %v: a blocked agent must receive neither text nor Enter", before.Screen, after.Screen, after.Prompts)
	}
	if code, _ := h.fail("agent.prompt", map[string]any{"target": "w1", "text": ""}); code != "empty_agent_prompt" {
		t.Errorf("empty prompt = %s, want empty_agent_prompt", code)
	}
	if code, _ := h.fail("agent.prompt", map[string]any{"target": "nobody", "text": "x"}); code != "agent_not_found" {
		t.Errorf("unknown target = %s, want agent_not_found", code)
	}
}

func TestPromptWaitStalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout int
		advance time.Duration
		want    string
	}{
		{"stall window is 5 s", 60000, 5 * time.Second, "agent_prompt_stalled"},
		{"short timeout reports timeout", 4000, 4 * time.Second, "timeout"},
		{"no timeout still stalls", 0, 5 * time.Second, "agent_prompt_stalled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{IgnorePrompts: true}})
			_, pane := h.workspace(nil)
			h.agent("w1", pane)
			wait := map[string]any{}
			if tt.timeout > 0 {
				wait["timeout_ms"] = tt.timeout
			}
			_, c := h.send("agent.prompt", map[string]any{"target": "w1", "text": "hello", "wait": wait})
			if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			h.clock.Step(tt.advance - time.Millisecond)
			h.clock.Step(time.Millisecond)
			line, ok := c.next()
			if !ok {
				t.Fatal("no response")
			}
			if r := h.response(line); r.Error == nil || r.Error.Code != tt.want {
				t.Fatalf("response = %s, want %s", line, tt.want)
			}
			if got := h.srv.Prompts(pane); !cmp.Equal(got, []string{"hello"}) {
				t.Errorf("Prompts = %q: the text was delivered even though the agent ignored it", got)
			}
		})
	}
}

func TestPromptWaitFollowsAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{WorkFor: 10 * time.Second, Reply: "all done"}})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	_, c := h.send("agent.prompt", map[string]any{"target": "w1", "text": "fix it", "wait": map[string]any{"timeout_ms": 60000}})
	if err := h.srv.WaitParked(ctxT(t), "agent.prompt", 1); err != nil {
		t.Fatal(err)
	}
	if err := h.clock.WaitForTimers(ctxT(t), 2); err != nil { // work timer + wait deadline
		t.Fatal(err)
	}
	if a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any); a["agent_status"] != "working" {
		t.Fatalf("status while working = %v", a["agent_status"])
	}
	h.clock.Step(10 * time.Second)
	line, ok := c.next()
	if !ok {
		t.Fatal("no response")
	}
	r := h.response(line)
	if r.Error != nil || str(r.Result, "agent", "agent_status") != "idle" {
		t.Fatalf("response = %s, want agent_prompted with idle", line)
	}
	if seq := r.Result["agent"].(map[string]any)["state_change_seq"]; seq != float64(3) {
		t.Errorf("state_change_seq = %v, want 3 (ready, working, idle)", seq)
	}
	st, _ := h.srv.Pane(pane)
	if !cmp.Equal(st.Prompts, []string{"fix it"}) || st.Screen != "claude\nfix it\nall done" {
		t.Errorf("prompts %q, screen %q", st.Prompts, st.Screen)
	}
}

func TestDoneOutsideActiveTab(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wsID, front := h.workspace(nil)
	back := str(h.ok("tab.create", map[string]any{"workspace_id": wsID}), "root_pane", "pane_id")
	h.agent("front", front)
	h.agent("back", back)
	for _, target := range []string{"front", "back"} {
		h.ok("agent.prompt", map[string]any{"target": target, "text": "go"})
	}
	got := map[string]string{}
	for _, a := range h.ok("agent.list", map[string]any{})["agents"].([]any) {
		got[a.(map[string]any)["name"].(string)] = a.(map[string]any)["agent_status"].(string)
	}
	if diff := cmp.Diff(map[string]string{"front": "idle", "back": "done"}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestAgentWait(t *testing.T) {
	t.Parallel()
	t.Run("already matching returns at once", func(t *testing.T) {
		h := newHarness(t, nil)
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		if a := h.ok("agent.wait", map[string]any{"target": "w1", "until": []string{"idle", "done"}}); str(a, "agent", "agent_status") != "idle" {
			t.Fatalf("agent.wait = %v", a)
		}
	})
	t.Run("pane closed gives agent_not_running", func(t *testing.T) {
		h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
		_, pane := h.workspace(nil)
		h.ok("pane.split", map[string]any{"target_pane_id": pane, "direction": "down"})
		h.agent("w1", pane)
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
		_, c := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"idle", "done"}})
		if err := h.srv.WaitParked(ctxT(t), "agent.wait", 1); err != nil {
			t.Fatal(err)
		}
		h.ok("pane.close", map[string]any{"pane_id": pane})
		line, _ := c.next()
		if r := h.response(line); r.Error == nil || r.Error.Code != "agent_not_running" {
			t.Fatalf("response = %s", line)
		}
	})
	t.Run("transient status counts", func(t *testing.T) {
		h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
		_, c := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"blocked"}, "timeout_ms": 1000})
		if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		h.srv.SetAgentState(pane, "blocked")
		h.srv.SetAgentState(pane, "working")
		line, _ := c.next()
		if r := h.response(line); r.Error != nil {
			t.Fatalf("response = %s, want success for the blocked status seen in between", line)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		h := newHarness(t, nil)
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		_, c := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"working"}, "timeout_ms": 1000})
		if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Step(time.Second)
		line, _ := c.next()
		if r := h.response(line); r.Error == nil || r.Error.Code != "timeout" {
			t.Fatalf("response = %s, want timeout", line)
		}
	})
	t.Run("release with a wanted final status succeeds", func(t *testing.T) {
		h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Then: herdrsim.StayWorking}})
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
		_, c := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"working"}})
		line, _ := c.next()
		if r := h.response(line); r.Error != nil {
			t.Fatalf("already working: %s", line)
		}
		_, c = h.send("agent.wait", map[string]any{"target": pane, "until": []string{"idle"}})
		if err := h.srv.WaitParked(ctxT(t), "agent.wait", 1); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.ExitAgent(pane); err != nil {
			t.Fatal(err)
		}
		line, _ = c.next()
		if r := h.response(line); r.Error == nil || r.Error.Code != "agent_not_running" {
			t.Fatalf("response = %s, want agent_not_running (final status working is not wanted)", line)
		}
	})
}

func TestLongCallStopsSilentlyOnPeerClose(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	t.Run("any byte", func(t *testing.T) {
		_, c := h.send("agent.wait", map[string]any{"target": "w1", "until": []string{"working"}, "timeout_ms": 60000})
		if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("x"))
		c.eof()
		if err := h.clock.WaitIdle(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("close", func(t *testing.T) {
		_, c := h.send("events.wait", map[string]any{"match_event": map[string]any{"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": "working"}, "timeout_ms": 60000})
		if err := h.clock.WaitForTimers(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := h.clock.WaitIdle(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAgentControls(t *testing.T) {
	t.Parallel()
	t.Run("crash exits the pane", func(t *testing.T) {
		h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Then: herdrsim.Crash}})
		_, pane := h.workspace(nil)
		h.ok("pane.split", map[string]any{"target_pane_id": pane, "direction": "right"})
		h.agent("w1", pane)
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "boom"})
		if code, _ := h.fail("pane.get", map[string]any{"pane_id": pane}); code != "pane_not_found" {
			t.Errorf("pane.get after crash = %s", code)
		}
		if got := kinds(h.srv.Events(), "pane_exited", "pane_closed"); !cmp.Equal(got, []string{"pane_exited"}) {
			t.Errorf("events = %v, want pane_exited only", got)
		}
	})
	t.Run("hook scripts the agent", func(t *testing.T) {
		h := newHarness(t, nil)
		_, pane := h.workspace(nil)
		got := make(chan string, 1)
		h.srv.SetBehavior(pane, herdrsim.Behavior{OnPrompt: func(paneID, prompt string) { got <- paneID + " " + prompt }})
		h.agent("w1", pane)
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "hi"})
		if v := <-got; v != pane+" hi" {
			t.Errorf("hook got %q", v)
		}
		if err := h.srv.SetAgentStatus(pane, "done"); err != nil {
			t.Fatal(err)
		}
		if a := h.ok("agent.get", map[string]any{"target": "w1"}); str(a, "agent", "agent_status") != "done" {
			t.Errorf("status = %v", a)
		}
	})
}

func kinds(events []herdrsim.Event, only ...string) []string {
	var out []string
	for _, ev := range events {
		if len(only) == 0 {
			out = append(out, ev.Kind)
			continue
		}
		for _, k := range only {
			if ev.Kind == k {
				out = append(out, ev.Kind)
			}
		}
	}
	return out
}

// TestSetDefaultBehaviorAppliesToAgentsStartedLater: an agent started after
// the default changed comes up blocked; one started before keeps its own.
func TestSetDefaultBehaviorAppliesToAgentsStartedLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, first := h.workspace(nil)
	h.agent("w1", first)
	if prev := h.srv.SetDefaultBehavior(herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}); prev.Launch != herdrsim.LaunchReady {
		t.Errorf("previous default = %+v, want the zero behaviour", prev)
	}
	_, second := h.workspace(nil)
	h.agent("w2", second)
	if code, _ := h.fail("agent.prompt", map[string]any{"target": "w2", "text": "do it"}); code != "agent_blocked" {
		t.Errorf("prompt to the agent started after the change = %s, want agent_blocked", code)
	}
	h.ok("agent.prompt", map[string]any{"target": "w1", "text": "do it"})
}
