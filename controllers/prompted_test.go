package controllers

import (
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Prompted lists what Members lists with a first prompt — through a prompt
// added and one taken away, and a deleted member still Terminating (its
// agent works, so its tab waits): it is kept without a walk of the fleet,
// and must not drift from that.
func TestManager_PromptedIsMembersWithAPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, map[string]string{"profile.yaml": testProfile,
			"alpha.yaml": memberYAML("alpha", "prompt: review the diff"), "beta.yaml": memberYAML("beta")})
		e.start()
		same := func(when string, want ...string) {
			t.Helper()
			var fromMembers, prompted []string
			for _, m := range e.mgr.Members() {
				if m.Spec.Prompt != "" {
					fromMembers = append(fromMembers, m.Name+"/"+m.Status.Phase)
				}
			}
			for _, m := range e.mgr.Prompted() {
				prompted = append(prompted, m.Name+"/"+m.Status.Phase)
			}
			if diff := cmp.Diff(fromMembers, prompted); diff != "" {
				t.Errorf("%s: Prompted and Members with a prompt differ (-members +prompted):\n%s", when, diff)
			}
			if diff := cmp.Diff(want, prompted); diff != "" {
				t.Errorf("%s: Prompted (-want +got):\n%s", when, diff)
			}
		}
		e.waitFor("both Ready", allPhase(v1alpha1.PhaseReady, "alpha", "beta"))
		same("at the start", "alpha/Ready")

		e.write("alpha.yaml", memberYAML("alpha"))
		e.write("beta.yaml", memberYAML("beta", "prompt: write the tests"))
		e.waitFor("the prompts moved", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Spec.Prompt == "" && ms["beta"].Spec.Prompt != "" && ms["beta"].Status.Phase == v1alpha1.PhaseReady
		})
		same("after the prompt moved to beta", "beta/Ready")

		e.setStatus(e.mgr.Prompted()[0].Status.PaneID, "working")
		e.remove("beta.yaml")
		e.waitFor("beta Terminating", func(ms map[string]v1alpha1.Member) bool {
			return ms["beta"].Status.Phase == v1alpha1.PhaseTerminating
		})
		same("beta deleted, its agent working", "beta/Terminating")
	})
}
