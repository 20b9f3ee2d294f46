package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// startSimFleet serves a claude Profile and one Member, reviewer, and
// waits until reviewer is Ready.
func startSimFleet(t *testing.T) *liveFleetd {
	t.Helper()
	f := startFleetd(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
`})
	f.waitReady(t, "reviewer")
	return f
}

// paneOf is the pane of member's agent in the simulated herdr.
func (f *liveFleetd) paneOf(t *testing.T, member string) string {
	t.Helper()
	for _, p := range f.info.Sim.Panes() {
		if p.AgentName == member {
			return p.ID
		}
	}
	t.Fatalf("%s has no pane in the simulated herdr", member)
	return ""
}

// watchedBuffer is an io.Writer a test can wait on.
type watchedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{changed: make(chan struct{})} }

func (b *watchedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *watchedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor returns once the buffer holds want, or fails the test at the
// deadline.
func (b *watchedBuffer) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		got, ch := b.buf.String(), b.changed
		b.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %q within %s; got:\n%s", want, within, got)
		}
	}
}

// TestLogs_ReadsAndFollowsTheTerminal: `fleetd logs` prints the end of a
// member's screen (by name or pane id, --lines, escape sequences dropped)
// without scrolling the agent; `fleetd logs -f` prints the output of a turn
// as it appears and ends when the member is deleted.
func TestLogs_ReadsAndFollowsTheTerminal(t *testing.T) {
	t.Parallel()
	f := startSimFleet(t)
	pane := f.paneOf(t, "reviewer")
	if err := f.info.Sim.WriteOutput(pane, "build started\n\x1b[1;32mok\x1b[0m 12 tests\x1b]52;c;cm0gLXJm\x07\nbuild done\n"); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := f.runArgs(t, "logs", "reviewer", "--lines", "2")
	if code != 0 || stdout != "ok 12 tests\nbuild done\n" {
		t.Fatalf("fleetd logs reviewer --lines 2: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := f.runArgs(t, "logs", "reviewer", "--tail", "1"); code != 0 || stdout != "build done\n" {
		t.Fatalf("fleetd logs reviewer --tail 1: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = f.runArgs(t, "logs", pane, "--tail=-1")
	if code != 0 || !strings.HasSuffix(stdout, "build started\nok 12 tests\nbuild done\n") || strings.Contains(stdout, "\x1b") {
		t.Fatalf("fleetd logs %s: exit %d, stdout %q; stderr:\n%s", pane, code, stdout, stderr)
	}
	if code, _, stderr := f.runArgs(t, "logs", "nobody"); code != 1 || stderr != "fleetd logs: member \"nobody\" not found\n" {
		t.Errorf("fleetd logs nobody: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := f.runArgs(t, "logs", "reviewer", "--lines", "1001"); code != 2 || !strings.Contains(stderr, "--lines 1001") {
		t.Errorf("fleetd logs --lines 1001: exit %d, stderr %q", code, stderr)
	}

	out, errOut := newWatchedBuffer(), newWatchedBuffer()
	exited := make(chan int, 1)
	go func() {
		exited <- run(append([]string{"logs", "reviewer", "-f", "--lines", "1"}, f.client...), out, errOut)
	}()
	out.waitFor(t, "build done\n", 10*time.Second)
	if code, stdout, stderr := f.runArgs(t, "send", "reviewer", "hello"); code != 0 || stdout != "echo: hello\n" {
		t.Fatalf("fleetd send: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	out.waitFor(t, "echo: hello\n", 10*time.Second)
	// The prompt as the simulated agent's screen shows it, then its answer:
	// each line once, after the one line asked for.
	if got, want := out.String(), "build done\nhello\necho: hello\n"; got != want {
		t.Errorf("fleetd logs -f printed %q, want %q", got, want)
	}
	if st, _ := f.info.Sim.Pane(pane); st.HistoryScrolls != 0 {
		t.Errorf("reading the terminal scrolled the agent's history %d times", st.HistoryScrolls)
	}
	if code, _, stderr := f.runArgs(t, "delete", "member", "reviewer"); code != 0 {
		t.Fatalf("fleetd delete: exit %d; stderr:\n%s", code, stderr)
	}
	select {
	case code := <-exited:
		if code != 0 || errOut.String() != "fleetd logs: member reviewer was deleted\n" {
			t.Errorf("fleetd logs -f after the delete: exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fleetd logs -f still runs 10s after the member was deleted")
	}
}
