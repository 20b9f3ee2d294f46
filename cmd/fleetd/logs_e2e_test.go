package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// simFleet is a running `fleetd serve --herdr=sim` (in process) on a
// manifests directory with a claude Profile and one Member, reviewer, which
// is Ready.
type simFleet struct {
	info   daemon.Info
	client []string // --server and --state-dir of the CLI
}

func startSimFleet(t *testing.T) *simFleet {
	t.Helper()
	manifests := writeTree(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
`})
	stateDir := t.TempDir()
	t.Setenv("FLEETD_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{ManifestsDir: manifests, StateDir: stateDir, Listen: "127.0.0.1:0", Sim: true, SimValidator: validated.Schema(),
			Ready: func(i daemon.Info) { ready <- i }})
	}()
	var info daemon.Info
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("fleetd serve ended before listening: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleetd serve: %v", err)
		}
	})
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		return len(ms) == 1 && ms[0].Status.Phase == v1alpha1.PhaseReady
	}); err != nil {
		t.Fatalf("reviewer never became Ready: %v", err)
	}
	return &simFleet{info: info, client: []string{"--server", info.URL, "--state-dir", stateDir}}
}

// run runs the CLI against the fleet.
func (f *simFleet) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLI(t, append(args, f.client...)...)
}

// pane is reviewer's pane id.
func (f *simFleet) pane(t *testing.T) string {
	t.Helper()
	for _, p := range f.info.Sim.Panes() {
		if p.AgentName == "reviewer" {
			return p.ID
		}
	}
	t.Fatal("reviewer has no pane in the simulated herdr")
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
	f := startSimFleet(t)
	pane := f.pane(t)
	if err := f.info.Sim.WriteOutput(pane, "build started\n\x1b[1;32mok\x1b[0m 12 tests\x1b]52;c;cm0gLXJm\x07\nbuild done\n"); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := f.run(t, "logs", "reviewer", "--lines", "2")
	if code != 0 || stdout != "ok 12 tests\nbuild done\n" {
		t.Fatalf("fleetd logs reviewer --lines 2: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := f.run(t, "logs", "reviewer", "--tail", "1"); code != 0 || stdout != "build done\n" {
		t.Fatalf("fleetd logs reviewer --tail 1: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = f.run(t, "logs", pane, "--tail=-1")
	if code != 0 || !strings.HasSuffix(stdout, "build started\nok 12 tests\nbuild done\n") || strings.Contains(stdout, "\x1b") {
		t.Fatalf("fleetd logs %s: exit %d, stdout %q; stderr:\n%s", pane, code, stdout, stderr)
	}
	if code, _, stderr := f.run(t, "logs", "nobody"); code != 1 || stderr != "fleetd logs: member \"nobody\" not found\n" {
		t.Errorf("fleetd logs nobody: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := f.run(t, "logs", "reviewer", "--lines", "1001"); code != 2 || !strings.Contains(stderr, "--lines 1001") {
		t.Errorf("fleetd logs --lines 1001: exit %d, stderr %q", code, stderr)
	}

	out, errOut := newWatchedBuffer(), newWatchedBuffer()
	exited := make(chan int, 1)
	go func() {
		exited <- run(append([]string{"logs", "reviewer", "-f", "--lines", "1"}, f.client...), out, errOut)
	}()
	out.waitFor(t, "build done\n", 10*time.Second)
	if code, stdout, stderr := f.run(t, "send", "reviewer", "hello"); code != 0 || stdout != "echo: hello\n" {
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
	if code, _, stderr := f.run(t, "delete", "member", "reviewer"); code != 0 {
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
