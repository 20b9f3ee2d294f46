package main

import (
	"context"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// TestDelete_ByTerminalAndSessionID: `fleetd delete member` takes what the
// README says it takes — besides a name, the member's terminal id and
// session id — and prints the member's name.
func TestDelete_ByTerminalAndSessionID(t *testing.T) {
	manifests := writeTree(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: alpha}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: beta}
spec: {profile: claude}
`})
	stateDir := t.TempDir()
	t.Setenv("FLEETD_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{ManifestsDir: manifests, StateDir: stateDir, Listen: "127.0.0.1:0", Sim: true,
			SimReadyDelay: time.Millisecond, SimValidator: validated.Schema(), Ready: func(i daemon.Info) { ready <- i }})
	}()
	var info daemon.Info
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("fleetd serve ended before listening: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleetd serve: %v", err)
		}
	}()
	byName := map[string]v1alpha1.Member{}
	err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			byName[m.Name] = m
		}
		return byName["alpha"].Status.TerminalID != "" && byName["beta"].Status.SessionID != "" && byName["beta"].Status.Phase == v1alpha1.PhaseReady
	})
	if err != nil {
		t.Fatalf("members never Ready: %v", err)
	}
	client := []string{"--server", info.URL, "--state-dir", stateDir}
	for _, tt := range []struct{ ref, want string }{
		{byName["alpha"].Status.TerminalID, "member/alpha deleted\n"},
		{byName["beta"].Status.SessionID, "member/beta deleted\n"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"delete", "member", tt.ref}, client...)...)
		if code != 0 || stdout != tt.want {
			t.Errorf("delete member %s: exit %d, stdout %q, stderr %q; want %q", tt.ref, code, stdout, stderr, tt.want)
		}
	}
}
