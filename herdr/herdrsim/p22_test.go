package herdrsim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/google/go-cmp/cmp"
)

// Protocol 22 (herdr 0.9) behaviour, from PROTOCOL-22.md. Every response and
// stream line is checked against the protocol-22 schema by the harness.

func TestP22_SubscriptionsAreLiveOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.workspace(nil) // before the subscription: never sent
	s := h.subscribe(sub("pane.created"))
	_, p2 := h.workspace(nil)
	if ev := s.event(); ev.Event != "pane_created" || str(ev.Data, "pane", "pane_id") != p2 {
		t.Fatalf("first event %s, want pane_created for %s (no replay of w1's)", ev.raw, p2)
	}
}

func TestP22_BurstsAreSentInFull(t *testing.T) {
	t.Parallel()
	// The subscriber reads only after its 250 calls: the stream's writes
	// fill the socket's buffer and wait for it. Under load the calls take
	// longer than the 5 s herdr gives a write, and the fake would end the
	// stream (which a CI run saw); what is tested here is the burst.
	h := newHarness(t, &herdrsim.Options{RequestTimeout: 2 * time.Minute})
	_, root := h.workspace(nil)
	s := h.subscribe(sub("pane.created"))
	const n = 250 // 500 events, within the 512 herdr retains for a reader that reads only afterwards
	var want []string
	for range n {
		res := h.ok("pane.split", map[string]any{"target_pane_id": root, "direction": "down"})
		want = append(want, str(res, "pane", "pane_id"))
	}
	var got []string
	for len(got) < n {
		got = append(got, str(s.event().Data, "pane", "pane_id"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pane_created ids (-want +got):\n%s", diff)
	}
}

func TestP22_EventsLostClosesTheStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{EventRing: 2})
	id, c := h.send("events.subscribe", map[string]any{"subscriptions": []any{sub("workspace.focused")}})
	if line, _ := c.next(); h.response(line).Result["type"] != "subscription_started" {
		t.Fatalf("ack = %s", line)
	}
	// One call emits four events; the history keeps two, so the subscriber
	// fell behind even though no lost event matched its kind.
	h.workspace(nil)
	line, ok := c.next()
	if !ok {
		t.Fatal("stream closed without events_lost")
	}
	if err := h.v.StreamLine(line); err != nil {
		t.Fatal(err)
	}
	r := h.response(line)
	if r.Error == nil || r.Error.Code != "events_lost" || r.ID != id || !strings.Contains(r.Error.Message, "session.snapshot") {
		t.Fatalf("line = %s, want events_lost under %s advising session.snapshot", line, id)
	}
	c.eof()
}

func TestP20_SlowSubscriberLosesEventsSilently(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Protocol: 20, NoReplay: true, EventRing: 2})
	s := h.subscribe(sub("workspace.created"), sub("layout.updated"))
	h.workspace(nil)
	if ev := s.event(); ev.Event != "layout_updated" {
		t.Fatalf("got %s, want the retained layout_updated (herdr 0.8.2 drops the rest silently)", ev.raw)
	}
}

func TestP22_CompletionSeq(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		h := newHarness(t, &herdrsim.Options{Protocol: protocol})
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		seq := func() any {
			return h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)["completion_seq"]
		}
		before := seq()
		h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
		if err := h.srv.WaitPrompts(ctxT(t), pane, 1); err != nil {
			t.Fatal(err)
		}
		after := seq()
		want := map[int][2]any{20: {nil, nil}, 22: {float64(0), float64(1)}}[protocol]
		if before != want[0] || after != want[1] {
			t.Errorf("protocol %d: completion_seq %v → %v, want %v → %v", protocol, before, after, want[0], want[1])
		}
		// Going idle without having worked is no completion.
		h.srv.SetAgentState(pane, "blocked")
		h.srv.SetAgentState(pane, "idle")
		if got := seq(); got != after {
			t.Errorf("protocol %d: completion_seq after blocked → idle = %v, want %v", protocol, got, after)
		}
	}
}

func TestP22_PromptAnswersAfterEnter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{EnterDelay: 300 * time.Millisecond})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	id, c := h.send("agent.prompt", map[string]any{"target": "w1", "text": "go"})
	if err := h.srv.WaitParked(ctxT(t), "agent.prompt", 1); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Prompts(pane); len(got) != 0 {
		t.Fatalf("prompts before Enter = %v", got)
	}
	h.clock.Step(300 * time.Millisecond)
	line, _ := c.next()
	if r := h.response(line); r.ID != id || r.Result["type"] != "agent_prompted" {
		t.Fatalf("response = %s", line)
	}
	if got := h.srv.Prompts(pane); !cmp.Equal(got, []string{"go"}) {
		t.Errorf("prompts after the answer = %v, want [go]: herdr 0.9 answers after Enter", got)
	}
}

func TestP20_PromptAnswersBeforeEnter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Protocol: 20, EnterDelay: 300 * time.Millisecond})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	h.ok("agent.prompt", map[string]any{"target": "w1", "text": "go"})
	if got := h.srv.Prompts(pane); len(got) != 0 {
		t.Fatalf("prompts at the answer = %v, want none yet (herdr 0.8.2 answers before Enter)", got)
	}
	h.clock.Step(300 * time.Millisecond)
	if got := h.srv.Prompts(pane); !cmp.Equal(got, []string{"go"}) {
		t.Errorf("prompts after Enter = %v", got)
	}
}

func TestP22_PromptFailsAfterTyping(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"timeout", "agent_prompt_failed"} {
		h := newHarness(t, nil)
		_, pane := h.workspace(nil)
		h.agent("w1", pane)
		h.srv.InjectFault("agent.prompt", herdrsim.Fault{PromptError: code, Times: 1})
		if got, _ := h.fail("agent.prompt", map[string]any{"target": "w1", "text": "go"}); got != code {
			t.Errorf("code = %s, want %s", got, code)
		}
		if got := h.srv.Prompts(pane); !cmp.Equal(got, []string{"go"}) {
			t.Errorf("%s: prompts = %v: the text was typed and submitted before the failure", code, got)
		}
	}
}

func TestP22_DialogAtStart(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		t.Run(fmt.Sprint("protocol ", protocol), func(t *testing.T) {
			h := newHarness(t, &herdrsim.Options{Protocol: protocol, ReadyDelay: 3 * time.Second,
				Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked, Dialog: "Trust this folder? [y/n]"}})
			_, pane := h.workspace(nil)
			h.agent("w1", pane)
			h.clock.Step(3 * time.Second)
			h.clock.Step(60 * time.Second) // far past the 30 s startup deadline
			a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
			if a["launch_pending"] != true || a["interactive_ready"] != nil || a["agent_status"] != "blocked" {
				t.Fatalf("agent at the dialog = %v, want launch_pending, not ready, blocked, name kept", a)
			}
			if st, _ := h.srv.Pane(pane); !strings.Contains(st.Screen, "Trust this folder?") {
				t.Errorf("screen %q does not show the dialog", st.Screen)
			}
			if got := h.ok("pane.read", map[string]any{"pane_id": pane, "source": "visible"}); !strings.Contains(str(got, "read", "text"), "Trust this folder?") {
				t.Errorf("visible read %v does not show the dialog", got)
			}
			wantCode := map[int]string{20: "agent_not_ready", 22: "agent_blocked"}[protocol]
			if code, _ := h.fail("agent.prompt", map[string]any{"target": "w1", "text": "hi"}); code != wantCode {
				t.Errorf("prompt at the dialog = %s, want %s", code, wantCode)
			}
			if err := h.srv.AnswerDialog(pane); err != nil {
				t.Fatal(err)
			}
			a = h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
			if a["launch_pending"] != nil || a["interactive_ready"] != true || a["agent_status"] != "idle" {
				t.Errorf("agent after the answer = %v, want ready and idle", a)
			}
			if err := h.srv.AnswerDialog(pane); err == nil {
				t.Error("AnswerDialog without a dialog succeeded")
			}
		})
	}
}

// A dialog answered while the agent goes on loading: the agent is no
// longer blocked but still launch-pending and not ready (status unknown)
// until detection sees it idle.
func TestDialogAnsweredWhileTheAgentLoads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{ReadyDelay: time.Second, Behavior: herdrsim.Behavior{Launch: herdrsim.LaunchBlocked}})
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	h.clock.Step(time.Second)
	if err := h.srv.AnswerDialogLoading(pane); err != nil {
		t.Fatal(err)
	}
	a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
	if a["launch_pending"] != true || a["interactive_ready"] != nil || a["agent_status"] != "unknown" {
		t.Fatalf("agent loading after the answer = %v, want launch_pending, not ready, unknown", a)
	}
	if err := h.srv.AnswerDialogLoading(pane); err == nil {
		t.Error("AnswerDialogLoading without a dialog succeeded")
	}
	if err := h.srv.SetAgentStatus(pane, "idle"); err != nil {
		t.Fatal(err)
	}
	a = h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
	if a["launch_pending"] != nil || a["interactive_ready"] != true || a["agent_status"] != "idle" {
		t.Errorf("agent once detected = %v, want ready and idle", a)
	}
}

func TestP22_AgentPaneBusyWhileTheShellStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{ShellStartDelay: 400 * time.Millisecond})
	_, pane := h.workspace(nil)
	if code, _ := h.fail("agent.start", map[string]any{"name": "w1", "kind": "claude", "pane_id": pane}); code != "agent_pane_busy" {
		t.Fatalf("agent.start on a starting shell = %s, want agent_pane_busy", code)
	}
	h.clock.Step(400 * time.Millisecond)
	h.agent("w1", pane)
}

func TestP22_QwenKind(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		h := newHarness(t, &herdrsim.Options{Protocol: protocol})
		_, pane := h.workspace(nil)
		_, r := h.call("agent.start", map[string]any{"name": "q", "kind": "qwen-code", "pane_id": pane})
		switch {
		case protocol == 20 && (r.Error == nil || r.Error.Code != "unsupported_agent_kind"):
			t.Errorf("protocol 20 qwen-code = %+v, want unsupported_agent_kind", r)
		case protocol == 22 && (r.Error != nil || str(r.Result, "agent", "agent") != "qwen"):
			t.Errorf("protocol 22 qwen-code = %+v, want a qwen agent", r)
		}
	}
}

func TestP22_SessionSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ws, pane := h.workspace(nil)
	h.agent("w1", pane)
	snap := h.ok("session.snapshot", map[string]any{})["snapshot"].(map[string]any)
	if snap["protocol"] != float64(22) || len(snap["workspaces"].([]any)) != 1 || len(snap["panes"].([]any)) != 1 ||
		len(snap["agents"].([]any)) != 1 || len(snap["layouts"].([]any)) != 1 || snap["focused_workspace_id"] != ws || snap["focused_pane_id"] != pane {
		t.Errorf("snapshot = %v", snap)
	}
}

func TestP22_WorkspaceCloseGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ws, _ := h.workspace(nil)
	linked, err := h.srv.AddLinkedWorkspace(ws, "/src/repo-feature")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := h.fail("workspace.close", map[string]any{"workspace_id": ws}); code != "workspace_group_close_required" {
		t.Fatalf("close of a workspace with a linked worktree = %s", code)
	}
	h.ok("workspace.close", map[string]any{"workspace_id": ws, "close_group": true})
	if got := h.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(got) != 0 {
		t.Errorf("workspaces after close_group = %v, want none (%s and %s closed)", got, ws, linked)
	}
	// Protocol 20 knows no groups: the one workspace closes.
	h20 := newHarness(t, &herdrsim.Options{Protocol: 20})
	ws, _ = h20.workspace(nil)
	h20.srv.AddLinkedWorkspace(ws, "/src/repo-feature")
	h20.ok("workspace.close", map[string]any{"workspace_id": ws})
	if got := h20.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(got) != 1 {
		t.Errorf("protocol 20 workspaces after close = %v, want the linked one left", got)
	}
}

func TestP22_ScrollAndSideEffectFreeReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	info := h.ok("pane.get", map[string]any{"pane_id": pane})["pane"].(map[string]any)
	rows := info["scroll"].(map[string]any)["viewport_rows"].(float64)
	if rows != 40 {
		t.Fatalf("viewport_rows = %v, want herdr's headless 40", rows)
	}
	for _, params := range []map[string]any{
		{"target": "w1", "source": "visible"},
		{"target": "w1", "source": "recent", "lines": rows},
	} {
		h.ok("agent.read", params)
	}
	if st, _ := h.srv.Pane(pane); st.HistoryScrolls != 0 {
		t.Fatalf("reads within the viewport scrolled the agent %d times", st.HistoryScrolls)
	}
	h.ok("agent.read", map[string]any{"target": "w1", "source": "recent", "lines": 200})
	if st, _ := h.srv.Pane(pane); st.HistoryScrolls != 1 {
		t.Errorf("HistoryScrolls = %d after a read of 200 lines, want 1", st.HistoryScrolls)
	}
}

func TestP22_RestartWithSessionRestore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{ReadyDelay: time.Second})
	_, p1 := h.workspace(nil)
	p2 := str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "down"}), "pane", "pane_id")
	p3 := str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "down"}), "pane", "pane_id")
	for name, p := range map[string]string{"alpha": p1, "beta": p2, "gamma": p3} {
		h.agent(name, p)
	}
	h.clock.Step(time.Second)
	h.srv.SetAgentSession(p1, herdrsim.AgentSession{Source: "claude-hook", Agent: "claude", Kind: "id", Value: "sess-1"})
	before := map[string]herdrsim.PaneState{}
	for _, st := range h.srv.Panes() {
		before[st.ID] = st
	}
	h.srv.Stop()
	if err := h.srv.RestartRestored(&herdrsim.RestoreOptions{RestoreErrors: map[string]string{p3: "claude session file missing"}}); err != nil {
		t.Fatal(err)
	}
	for _, st := range h.srv.Panes() {
		b := before[st.ID]
		if b.ID == "" || st.TerminalID == b.TerminalID || st.TabID != b.TabID {
			t.Errorf("pane %s: before %+v after %+v: want the same ids with a new terminal id", st.ID, b, st)
		}
	}
	a := h.ok("agent.get", map[string]any{"target": "alpha"})["agent"].(map[string]any)
	if a["launch_pending"] != true || a["pane_id"] != p1 || str(a, "agent_session", "value") != "sess-1" {
		t.Fatalf("alpha right after restore = %v, want launch_pending on %s with its session", a, p1)
	}
	if code, _ := h.fail("agent.get", map[string]any{"target": "gamma"}); code != "agent_not_found" {
		t.Errorf("gamma (failed restore) = %s, want agent_not_found", code)
	}
	if got := str(h.ok("pane.get", map[string]any{"pane_id": p3}), "pane", "restore_error"); got != "claude session file missing" {
		t.Errorf("restore_error = %q", got)
	}
	if st, _ := h.srv.Pane(p1); !strings.Contains(st.Screen, "claude --resume sess-1") {
		t.Errorf("alpha's pane shows %q, want the native resume command", st.Screen)
	}
	if st, _ := h.srv.Pane(p2); st.Screen != "" {
		t.Errorf("beta relaunched at once (%q), want 100 ms after alpha", st.Screen)
	}
	h.clock.Step(herdrsim.RelaunchInterval)
	if st, _ := h.srv.Pane(p2); st.Screen != "claude" {
		t.Errorf("beta's pane shows %q after 100 ms, want its command", st.Screen)
	}
	h.clock.Step(time.Second)
	for _, name := range []string{"alpha", "beta"} {
		if a := h.ok("agent.get", map[string]any{"target": name})["agent"].(map[string]any); a["interactive_ready"] != true {
			t.Errorf("%s after ReadyDelay = %v, want ready", name, a)
		}
	}
}

// A status a test sets on a restored agent whose relaunch is still queued
// (herdr relaunches them RelaunchInterval apart) relaunches it first: the
// agent shows the status with its program in the foreground and takes a
// prompt. (Before, the status cancelled the queued relaunch and the agent
// refused every prompt with agent_not_ready, its pane a bare shell.)
func TestP22_StatusOfAnAgentNotRelaunchedYet(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"SetAgentState", "SetAgentStatus"} {
		t.Run(set, func(t *testing.T) {
			h := newHarness(t, nil)
			_, p1 := h.workspace(nil)
			p2 := str(h.ok("pane.split", map[string]any{"target_pane_id": p1, "direction": "down"}), "pane", "pane_id")
			h.agent("alpha", p1)
			h.agent("beta", p2)
			h.srv.Stop()
			if err := h.srv.RestartRestored(nil); err != nil {
				t.Fatal(err)
			}
			if st, _ := h.srv.Pane(p2); st.Screen != "" {
				t.Fatalf("beta relaunched at once (%q), want RelaunchInterval after alpha", st.Screen)
			}
			var err error
			if set == "SetAgentState" {
				err = h.srv.SetAgentState(p2, "idle")
			} else {
				err = h.srv.SetAgentStatus(p2, "idle")
			}
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := h.srv.Pane(p2); st.Screen != "claude" || st.Status != "idle" {
				t.Errorf("beta after its status was set: screen %q status %q; want its command typed, idle", st.Screen, st.Status)
			}
			h.ok("agent.prompt", map[string]any{"target": "beta", "text": "go on"})
			h.clock.Step(herdrsim.RelaunchInterval) // the queued relaunch finds nothing left to do
			if st, _ := h.srv.Pane(p2); !slices.Equal(st.Prompts, []string{"go on"}) || strings.Count(st.Screen, "claude") != 1 {
				t.Errorf("beta: prompts %q, screen %q; want the prompt taken and the command typed once", st.Prompts, st.Screen)
			}
		})
	}
}

func TestP22_LiveHandoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	h.agent("w1", pane)
	before, _ := h.srv.Pane(pane)
	s := h.subscribe(sub("pane.created"))
	if err := h.srv.Handoff(); err != nil {
		t.Fatal(err)
	}
	s.eof()
	after, _ := h.srv.Pane(pane)
	if after.TerminalID == before.TerminalID || after.ID != before.ID || after.Screen != before.Screen {
		t.Errorf("handoff: %+v → %+v, want a new terminal id and everything else kept", before, after)
	}
	if a := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any); a["interactive_ready"] != true || a["terminal_id"] != after.TerminalID {
		t.Errorf("agent after handoff = %v", a)
	}
}

func TestReportSessionSurvivesRestoreAndResumesCodex(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{ReportSession: true}})
	_, pane := h.workspace(nil)
	h.ok("agent.start", map[string]any{"name": "cx", "kind": "codex", "pane_id": pane})
	a := h.ok("agent.get", map[string]any{"target": "cx"})["agent"].(map[string]any)
	session := str(a, "agent_session", "value")
	if session == "" || str(a, "agent_session", "kind") != "id" || str(a, "agent_session", "agent") != "codex" {
		t.Fatalf("agent = %v, want a reported codex session id", a)
	}
	h.srv.Stop()
	if err := h.srv.RestartRestored(nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.srv.Pane(pane); !strings.Contains(st.Screen, "codex resume "+session) || st.AgentSession == nil || st.AgentSession.Value != session {
		t.Errorf("pane after restore: screen %q, session %+v; want codex resumed with %s", st.Screen, st.AgentSession, session)
	}
}

// A scroll entry's pane never scrolls here (the fake models no scroll
// events), but the stream still goes past every event: one that only
// waits on scrolls does not fall behind the retained history, and the
// request's other entries keep getting theirs. Every call below emits
// fewer events than the ring keeps.
func TestP22_ScrollEntryDoesNotFallBehind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{EventRing: 8})
	_, root := h.workspace(nil)
	s := h.subscribe(sub("pane.scroll_changed", "pane_id", root), sub("pane.created"))
	for i := range 12 { // 24 events: three times the ring
		res := h.ok("pane.split", map[string]any{"target_pane_id": root, "direction": "down"})
		want := str(res, "pane", "pane_id")
		if ev := s.event(); ev.Event != "pane_created" || str(ev.Data, "pane", "pane_id") != want {
			t.Fatalf("split %d: got %s, want pane_created for %s", i, ev.raw, want)
		}
	}
}
