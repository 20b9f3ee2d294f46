package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// TestServe_PrimaryPaneFlag runs `fleetd serve --primary-pane` against a
// fake herdr holding the user's own agent pane and checks that fleetd
// follows that pane's agent status (a per-pane status subscription of its
// own: the member controllers never subscribe to panes they do not own).
func TestServe_PrimaryPaneFlag(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hc := herdr.New(&herdr.Options{SocketPath: srv.SocketPath()})
	ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "me"})
	if err != nil {
		t.Fatal(err)
	}
	pane := ws.RootPane.PaneID
	if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "boss", Kind: "claude", PaneID: pane}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	manifests := writeTree(t, map[string]string{"profiles.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"})

	out := &syncbuf.Lines{C: make(chan string, 16), Drop: true}
	cmd := newServeCmd()
	cmd.SetArgs([]string{"--manifests", manifests, "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--herdr-socket", srv.SocketPath(), "--primary-pane", pane, "--log-level", "error"})
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(serveCtx) }()
	select {
	case line := <-out.C:
		if !strings.HasPrefix(line, "fleetd is serving") {
			t.Fatalf("first line %q, want fleetd is serving", line)
		}
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	case <-ctx.Done():
		t.Fatal("serve never said it was serving")
	}

	want := fmt.Sprintf(`{"type":%q,"pane_id":%q}`, herdr.SubPaneAgentStatusChanged, pane)
	for n := 1; ; n++ {
		if err := srv.WaitCalls(ctx, "events.subscribe", n); err != nil {
			t.Fatalf("fleetd never subscribed to the primary pane's status (%s): %v", want, err)
		}
		if subscribedTo(srv, want) {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func subscribedTo(srv *herdrsim.Server, sub string) bool {
	for _, r := range srv.Requests() {
		if r.Method == "events.subscribe" && strings.Contains(string(r.Params), sub) {
			return true
		}
	}
	return false
}

func TestSizeFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"64MiB", 64 << 20, true}, {"512KiB", 512 << 10, true}, {"2GiB", 2 << 30, true},
		{"0", 0, false}, {"-1MiB", 0, false}, {"64MB", 0, false}, {"lots", 0, false}, {"9223372036854775807GiB", 0, false},
	} {
		var s sizeFlag
		err := s.Set(tc.in)
		if (err == nil) != tc.ok || (tc.ok && int64(s) != tc.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tc.in, s, err, tc.want, tc.ok)
		}
	}
	if s := sizeFlag(64 << 20); s.String() != "64MiB" {
		t.Errorf("String() = %q, want 64MiB", s.String())
	}
}

func TestServe_UnsafeStateDirectoryExits1(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(state, 0o700) })
	code, _, stderr := runCLI(t, "serve", "--herdr=sim", "--manifests", t.TempDir(), "--state-dir", state, "--listen", "127.0.0.1:0")
	want := "fleetd: unsafe state directory: " + state + " has mode 0777: writable by group or others; fix: chmod 700 " + state + "\n"
	if code != 1 || stderr != want {
		t.Fatalf("serve on a world-writable state directory: exit %d, stderr %q; want exit 1, %q", code, stderr, want)
	}
}
