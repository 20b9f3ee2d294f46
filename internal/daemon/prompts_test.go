package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// TestFirstPrompts_DeliveredIntoThePane: the daemon wires the first-prompt
// controller (package messaging) to the members and the core, so that a
// member's spec.prompt is typed into its pane once it is Ready.
func TestFirstPrompts_DeliveredIntoThePane(t *testing.T) {
	t.Parallel()
	f := startFleet(t, `---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: starter}
spec: {profile: claude, prompt: "Review open PRs"}
`)
	if err := f.sim.WaitCalls(f.ctx, "agent.prompt", 1); err != nil {
		t.Fatal(err)
	}
	var pane string
	err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		if len(ms) == 1 {
			pane = ms[0].Status.PaneID
		}
		return pane != ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sim.WaitPrompts(f.ctx, pane, 1); err != nil {
		t.Fatal(err)
	}
	if got := f.sim.Prompts(pane); !cmp.Equal(got, []string{"Review open PRs"}) {
		t.Errorf("prompts typed = %q, want the spec's prompt once", got)
	}
}

// TestFirstPrompts_OwedAcrossAReplacement follows docs/manifests.md: a
// member's spec changes right after it first became Ready, before its
// first prompt could be typed (its agent was still busy), and its update
// strategy's maxWait ends before the agent is idle, so fleetd replaces it
// busy. The prompt was dropped with the old pane's queue; it is typed into
// the new pane, once, and never into the old one.
func TestFirstPrompts_OwedAcrossAReplacement(t *testing.T) {
	t.Parallel()
	eachProtocol(t, func(t *testing.T, protocol int) {
		const member = `---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: starter}
spec: {profile: claude, prompt: "Review open PRs"%s}
`
		queued := &logSignal{want: []byte(`msg="first prompt queued" member=starter`), ch: make(chan struct{})}
		// Agents start only when the test says so (SetAgentStatus).
		f := startFleetConfig(t, fmt.Sprintf(member, ""), Config{SimProtocol: protocol, SimReadyDelay: time.Hour,
			Messaging: &messaging.Options{PickupGrace: 10 * time.Minute}, Logger: slog.New(slog.NewTextHandler(queued, nil))})
		paneOf := func(what string, cond func(v1alpha1.Member) bool) string {
			t.Helper()
			var pane string
			err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
				if len(ms) == 1 && cond(ms[0]) {
					pane = ms[0].Status.PaneID
				}
				return pane != ""
			})
			if err != nil {
				t.Fatalf("waiting until %s: %v", what, err)
			}
			return pane
		}
		old := paneOf("starter has a pane", func(m v1alpha1.Member) bool { return m.Status.PaneID != "" })
		// Ready, but busy: the first prompt is queued, not typed.
		if err := f.sim.SetAgentStatus(old, "working"); err != nil {
			t.Fatal(err)
		}
		paneOf("starter Ready and working", func(m v1alpha1.Member) bool {
			return m.Status.Phase == v1alpha1.PhaseReady && m.Status.AgentStatus == "working"
		})
		select {
		case <-queued.ch:
		case <-f.ctx.Done():
			t.Fatal("the first prompt was never queued")
		}
		if err := os.WriteFile(filepath.Join(f.manifests, "profiles.yaml"), []byte(profileOnly+fmt.Sprintf(member, ", cwd: /srv, updateStrategy: {maxWait: 1s}")), 0o644); err != nil {
			t.Fatal(err)
		}
		next := paneOf("starter replaced", func(m v1alpha1.Member) bool {
			return m.Status.PaneID != "" && m.Status.PaneID != old && m.Generation == 2
		})
		if err := f.sim.SetAgentStatus(next, "idle"); err != nil {
			t.Fatal(err)
		}
		if err := f.sim.WaitPrompts(f.ctx, next, 1); err != nil {
			t.Fatalf("the first prompt never reached the new pane: %v", err)
		}
		if got := f.sim.Prompts(next); !cmp.Equal(got, []string{"Review open PRs"}) {
			t.Errorf("prompts typed into the new pane = %q, want the spec's prompt once", got)
		}
		if got := f.sim.Prompts(old); len(got) != 0 {
			t.Errorf("prompts typed into the replaced pane = %q, want none", got)
		}
	})
}

// logSignal is a log destination that closes ch at the first write
// containing want.
type logSignal struct {
	mu   sync.Mutex
	want []byte
	ch   chan struct{}
	seen bool
}

func (l *logSignal) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen && bytes.Contains(p, l.want) {
		l.seen = true
		close(l.ch)
	}
	return len(p), nil
}
