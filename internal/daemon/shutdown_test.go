package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// stopHook is a log handler that runs check at the daemon's "fleetd
// stopped" record, synchronously and in the daemon's own flow: after serve
// returned and before the state directory is released.
type stopHook struct{ check func() }

func (h *stopHook) Enabled(context.Context, slog.Level) bool { return true }
func (h *stopHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stopHook) WithGroup(string) slog.Handler            { return h }
func (h *stopHook) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "fleetd stopped") {
		h.check()
	}
	return nil
}

// isOpen reports whether this process has path open.
func isOpen(t *testing.T, path string) bool {
	t.Helper()
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to see open files: %v", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == want {
			return true
		}
	}
	return false
}

// TestRun_ReleasesTheStateDirectoryLast: the state directory stays locked
// until every part has stopped — the messaging core has closed its journal,
// the listener and the simulated herdr are gone — and is free for the next
// fleetd once Run returns.
func TestRun_ReleasesTheStateDirectoryLast(t *testing.T) {
	t.Parallel()
	state := statedir.At(t.TempDir())
	journal := filepath.Join(state.Messages(), messaging.JournalFile)
	var (
		info     Info
		stopped  bool
		problems []string
	)
	hook := &stopHook{check: func() {
		stopped = true
		if lock, err := state.Lock(); !errors.Is(err, statedir.ErrLocked) {
			problems = append(problems, fmt.Sprintf("state directory free before Run returned: Lock() = %v", err))
			lock.Unlock()
		}
		if isOpen(t, journal) {
			problems = append(problems, "the messaging journal is still open")
		}
		if c, err := net.Dial("tcp", strings.TrimPrefix(info.URL, "http://")); err == nil {
			c.Close()
			problems = append(problems, "the listener still accepts connections")
		}
		if c, err := net.Dial("unix", info.HerdrSocket); err == nil {
			c.Close()
			problems = append(problems, "the simulated herdr still accepts connections")
		}
	}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ManifestsDir: t.TempDir(), StateDir: state.Root(), Listen: "127.0.0.1:0", Sim: true,
			Logger: slog.New(hook), Ready: func(i Info) { ready <- i }})
	}()
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	// While fleetd runs, each check above would find what it looks for.
	if !isOpen(t, journal) {
		t.Fatal("the messaging journal is not open while fleetd runs")
	}
	if _, err := state.Lock(); !errors.Is(err, statedir.ErrLocked) {
		t.Fatalf("Lock while fleetd runs = %v, want ErrLocked", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !stopped {
		t.Fatal(`Run logged no "fleetd stopped" record before releasing the state directory`)
	}
	for _, p := range problems {
		t.Errorf("when fleetd stopped, %s", p)
	}
	lock, err := state.Lock()
	if err != nil {
		t.Fatalf("after Run returned: %v", err)
	}
	lock.Unlock()
}
