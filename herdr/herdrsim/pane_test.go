package herdrsim_test

import (
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

func TestPaneInputAndRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	h.ok("pane.send_text", map[string]any{"pane_id": pane, "text": "echo hi"})
	h.ok("pane.send_keys", map[string]any{"pane_id": pane, "keys": []string{"Enter"}})
	h.ok("pane.send_text", map[string]any{"pane_id": pane, "text": "ls\rpwd"})
	if code, _ := h.fail("pane.send_keys", map[string]any{"pane_id": pane, "keys": []string{"x", "hyperspace"}}); code != "invalid_key" {
		t.Errorf("unknown key = %s, want invalid_key", code)
	}
	if code, _ := h.fail("pane.send_text", map[string]any{"pane_id": "w1:p9", "text": "x"}); code != "pane_not_found" {
		t.Errorf("missing pane = %s", code)
	}
	read := h.ok("pane.read", map[string]any{"pane_id": pane, "source": "recent"})["read"].(map[string]any)
	if read["text"] != "echo hi\nls\npwd" || read["revision"] != float64(0) || read["truncated"] != false || read["format"] != "text" {
		t.Errorf("pane.read = %v (an invalid key must send nothing)", read)
	}
	for range 5 {
		h.ok("pane.send_text", map[string]any{"pane_id": pane, "text": "line\n"})
	}
	read = h.ok("pane.read", map[string]any{"pane_id": pane, "source": "recent", "lines": 2})["read"].(map[string]any)
	if read["text"] != "line\nline" || read["truncated"] != true {
		t.Errorf("pane.read lines=2 = %v, want the last 2 lines, truncated", read)
	}
}

func TestAgentInputRenameAndRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{Behavior: herdrsim.Behavior{Reply: "ok, done"}})
	_, pane := h.workspace(nil)
	_, other := h.workspace(nil)
	h.agent("w1", pane)
	h.agent("w2", other)
	h.ok("pane.send_text", map[string]any{"pane_id": pane, "text": "typed by hand"})
	h.ok("agent.send_keys", map[string]any{"target": "w1", "keys": []string{"enter"}})
	read := h.ok("agent.read", map[string]any{"target": "w1", "source": "recent"})["read"].(map[string]any)
	if !strings.HasSuffix(read["text"].(string), "typed by hand\nok, done") || read["pane_id"] != pane {
		t.Errorf("agent.read = %v", read)
	}
	if got := h.srv.Prompts(pane); len(got) != 1 || got[0] != "typed by hand" {
		t.Errorf("Prompts = %q", got)
	}
	tests := []struct {
		name, want string
		params     map[string]any
	}{
		{"invalid name", "invalid_agent_name", map[string]any{"target": "w1", "name": "No"}},
		{"taken", "agent_name_taken", map[string]any{"target": "w1", "name": "w2"}},
		{"unknown target", "agent_not_found", map[string]any{"target": "ghost", "name": "x"}},
		{"terminal id is no target", "agent_not_found", map[string]any{"target": str(h.ok("pane.get", map[string]any{"pane_id": pane}), "pane", "terminal_id")}},
	}
	for _, tt := range tests {
		if code, _ := h.fail("agent.rename", tt.params); code != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, code, tt.want)
		}
	}
	if a := h.ok("agent.rename", map[string]any{"target": "w1", "name": "lead"}); str(a, "agent", "name") != "lead" {
		t.Errorf("rename = %v", a)
	}
	if a := h.ok("agent.rename", map[string]any{"target": "lead", "name": nil}); str(a, "agent", "name") != "" {
		t.Errorf("clearing rename = %v", a)
	}
	if code, _ := h.fail("agent.get", map[string]any{"target": "lead"}); code != "agent_not_found" {
		t.Errorf("cleared name still resolves: %s", code)
	}
	if err := h.srv.SetForeground(other, "less"); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.fail("agent.send_keys", map[string]any{"target": "w2", "keys": []string{"q"}}); code != "agent_not_ready" {
		t.Errorf("agent not in the foreground = %s, want agent_not_ready", code)
	}
}

func TestOutputMatching(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, pane := h.workspace(nil)
	h.ok("pane.send_text", map[string]any{"pane_id": pane, "text": "build started\n"})
	res := h.ok("pane.wait_for_output", map[string]any{"pane_id": pane, "source": "recent", "match": map[string]any{"type": "substring", "value": "started"}})
	if res["matched_line"] != "build started" || str(res, "read", "source") != "recent_unwrapped" {
		t.Errorf("already-present text = %v, want an immediate match read as recent_unwrapped", res)
	}
	if code, _ := h.fail("pane.wait_for_output", map[string]any{"pane_id": pane, "source": "recent", "match": map[string]any{"type": "regex", "value": "("}}); code != "invalid_regex" {
		t.Errorf("bad regex = %s", code)
	}

	s := h.subscribe(sub("pane.output_matched", "pane_id", pane, "source", "recent", "match", map[string]any{"type": "regex", "value": `^ok \d+$`}))
	if err := h.srv.WaitParked(ctxT(t), "events.subscribe", 1); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.WriteOutput(pane, "ok 42"); err != nil {
		t.Fatal(err)
	}
	ev := s.event()
	if _, tagged := ev.Data["type"]; ev.Event != "pane.output_matched" || tagged || ev.Data["matched_line"] != "ok 42" {
		t.Errorf("got %s, want an untagged pane.output_matched line", ev.raw)
	}
}
