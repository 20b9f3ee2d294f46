package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/mcp"
)

// TestInbox_ShowsWaitsAndAcknowledges: a reply nobody waited for is in the
// primary's mailbox; `fleetd inbox` prints it until `--ack` retires it;
// `--wait` returns at once when a message is there and exits 1 when none
// comes in time; a worker deleted with a task still open leaves a
// worker_gone notice.
func TestInbox_ShowsWaitsAndAcknowledges(t *testing.T) {
	t.Parallel()
	f := startSimFleet(t)
	if code, stdout, stderr := f.runArgs(t, "inbox"); code != 0 || stdout != "No messages.\n" {
		t.Fatalf("fleetd inbox on an empty mailbox: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := f.runArgs(t, "send", "reviewer", "--no-wait", "run the checks"); code != 0 || !strings.HasPrefix(stdout, "queued for reviewer") {
		t.Fatalf("fleetd send --no-wait: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr := f.runArgs(t, "inbox", "--wait", "--timeout", "30s")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "FROM") || !strings.Contains(lines[0], "KIND") ||
		!strings.HasPrefix(lines[1], "reviewer") || !strings.Contains(lines[1], " reply ") || !strings.HasSuffix(lines[1], "echo: run the checks") {
		t.Fatalf("fleetd inbox --wait: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// Not acknowledged: shown again, now as JSON, and acknowledged.
	code, stdout, stderr = f.runArgs(t, "inbox", "--ack", "-o", "json")
	var page mcp.PollOutput
	if err := json.Unmarshal([]byte(stdout), &page); code != 0 || err != nil {
		t.Fatalf("fleetd inbox --ack -o json: exit %d, %v, stdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	if len(page.Messages) != 1 || page.Messages[0].From != "reviewer" || page.Messages[0].Kind != "reply" || page.Messages[0].Content != "echo: run the checks" {
		t.Fatalf("fleetd inbox -o json: %+v", page)
	}
	if code, stdout, _ := f.runArgs(t, "inbox"); code != 0 || stdout != "No messages.\n" {
		t.Errorf("fleetd inbox after --ack: exit %d, stdout %q", code, stdout)
	}
	if code, stdout, stderr := f.runArgs(t, "inbox", "--wait", "--timeout", "100ms"); code != 1 || stdout != "" || stderr != "fleetd inbox: no message within 100ms\n" {
		t.Errorf("fleetd inbox --wait on an empty mailbox: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// A task its worker never took: deleting the worker at once (its
	// agent is blocked, so a plain delete would wait for it) leaves a
	// worker_gone notice for the turn.
	if err := f.info.Sim.SetAgentStatus(f.paneOf(t, "reviewer"), "blocked"); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := f.runArgs(t, "send", "reviewer", "--no-wait", "never typed"); code != 0 {
		t.Fatalf("fleetd send --no-wait to a blocked worker: exit %d; stderr:\n%s", code, stderr)
	}
	if code, _, stderr := f.runArgs(t, "delete", "member", "reviewer", "--now"); code != 0 {
		t.Fatalf("fleetd delete: exit %d; stderr:\n%s", code, stderr)
	}
	code, stdout, stderr = f.runArgs(t, "inbox", "--wait", "--timeout", "30s", "--ack")
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "reviewer") || !strings.Contains(lines[1], " worker_gone ") || !strings.Contains(lines[1], "reviewer is gone") {
		t.Fatalf("fleetd inbox after the delete: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	if code, _, stderr := f.runArgs(t, "inbox", "extra"); code != 2 {
		t.Errorf("fleetd inbox extra: exit %d, stderr %q", code, stderr)
	}
}
