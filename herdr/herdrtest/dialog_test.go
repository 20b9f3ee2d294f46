package herdrtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
)

// A LaunchDialog agent waits at its dialog as protocol 22 reports it —
// launch-pending, not ready, blocked, past its agent.start deadline — until
// a person answers it; then it is detected and ready.
func TestAgentLaunchDialogWaitsForAnAnswer(t *testing.T) {
	h := newHarness(t, &herdrtest.Options{ReadyDelay: time.Second,
		Behavior: herdrtest.Behavior{Launch: herdrtest.LaunchDialog, Dialog: "Do you trust the files in this folder?\n> Yes  No"}})
	_, pane := h.workspace(nil)
	h.ok("agent.start", map[string]any{"name": "w1", "kind": "claude", "pane_id": pane, "timeout_ms": 5000})
	h.clock.Step(time.Minute) // well past timeout_ms
	got := h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
	if got["launch_pending"] != true || got["interactive_ready"] != nil || got["agent_status"] != "blocked" {
		t.Fatalf("agent.get at the dialog = %v, want launch_pending, not ready, blocked", got)
	}
	read := h.ok("pane.read", map[string]any{"pane_id": pane, "source": "visible"})
	if text := str(read, "read", "text"); !strings.Contains(text, "Do you trust the files") {
		t.Errorf("screen %q lacks the dialog", text)
	}
	if err := h.srv.SetAgentStatus(pane, "idle"); err != nil {
		t.Fatal(err)
	}
	got = h.ok("agent.get", map[string]any{"target": "w1"})["agent"].(map[string]any)
	if got["launch_pending"] != nil || got["interactive_ready"] != true || got["agent_status"] != "idle" {
		t.Fatalf("agent.get after the answer = %v, want interactive_ready idle", got)
	}
}
