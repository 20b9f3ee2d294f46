package daemon

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// TestFirstPrompts_DeliveredIntoThePane: the daemon wires the first-prompt
// controller (package messaging) to the members and the core, so that a
// member's spec.prompt is typed into its pane once it is Ready.
func TestFirstPrompts_DeliveredIntoThePane(t *testing.T) {
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
