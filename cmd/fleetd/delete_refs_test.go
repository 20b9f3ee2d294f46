package main

import (
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// TestDelete_ByTerminalAndSessionID: `fleetd delete member` takes what the
// README says it takes — besides a name, the member's terminal id and
// session id — and prints the member's name.
func TestDelete_ByTerminalAndSessionID(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
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
`}, func(c *daemon.Config) { c.SimReadyDelay = time.Millisecond })
	byName := map[string]v1alpha1.Member{}
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			byName[m.Name] = m
		}
		return byName["alpha"].Status.TerminalID != "" && byName["beta"].Status.SessionID != "" && byName["beta"].Status.Phase == v1alpha1.PhaseReady
	})
	if err != nil {
		t.Fatalf("members never Ready: %v", err)
	}
	for _, tt := range []struct{ ref, want string }{
		{byName["alpha"].Status.TerminalID, "member/alpha deleted\n"},
		{byName["beta"].Status.SessionID, "member/beta deleted\n"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"delete", "member", tt.ref}, f.client...)...)
		if code != 0 || stdout != tt.want {
			t.Errorf("delete member %s: exit %d, stdout %q, stderr %q; want %q", tt.ref, code, stdout, stderr, tt.want)
		}
	}
}
