package rollout

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// A profile's status is its members counted and one Progressing condition:
// complete once every member is updated and Ready (even while paused),
// failed while a halt stops the rollout to the current target (not an
// older one), paused while spec.rollout.paused is set, rolling out
// otherwise.
func TestStatus_Progressing(t *testing.T) {
	p := profile("-m", "b")
	h := record(t, profile("-m", "a"), p)
	paused := p.DeepCopy()
	paused.Spec.Rollout = &v1alpha1.ProfileRollout{Paused: true}
	halted := h.Clone()
	halted.Halt = &Halt{Target: Target(p), Member: "bravo", Message: "agent exited"}
	stale := h.Clone()
	stale.Halt = &Halt{Target: Target(profile("-m", "a")), Member: "bravo", Message: "agent exited"}
	done := []MemberState{{Name: "alpha", Updated: true, Ready: true}, {Name: "bravo", Updated: true, Ready: true}}
	midway := []MemberState{{Name: "alpha", Updated: true, Ready: true}, {Name: "bravo", Ready: true, Replacing: true}}
	for _, tc := range []struct {
		name    string
		p       *v1alpha1.Profile
		members []MemberState
		h       History
		status  string
		reason  string
		says    string
	}{
		{"complete", p, done, h, v1alpha1.ConditionFalse, v1alpha1.ReasonRolloutComplete, "every member (2) runs revision 2 and is Ready"},
		{"complete while paused", paused, done, h, v1alpha1.ConditionFalse, v1alpha1.ReasonRolloutComplete, "every member (2)"},
		{"rolling out", p, midway, h, v1alpha1.ConditionTrue, v1alpha1.ReasonRollingOut, "1 of 2 members updated, 1 of them Ready, at most 1 replaced at a time; replacing bravo"},
		{"updated, not Ready yet", p, []MemberState{{Name: "alpha", Updated: true}}, h, v1alpha1.ConditionTrue, v1alpha1.ReasonRollingOut, "1 of 1 members updated, 0 of them Ready"},
		{"paused", paused, midway, h, v1alpha1.ConditionFalse, v1alpha1.ReasonRolloutPaused, "`fleetd rollout resume profile/codex` goes on"},
		{"failed", p, midway, halted, v1alpha1.ConditionFalse, v1alpha1.ReasonRolloutFailed, "member bravo did not become Ready after its replacement (agent exited)"},
		{"an older rollout's halt", p, midway, stale, v1alpha1.ConditionTrue, v1alpha1.ReasonRollingOut, "replacing bravo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Status(tc.p, tc.members, tc.h)
			if len(st.Conditions) != 1 {
				t.Fatalf("conditions %+v; want one", st.Conditions)
			}
			c := st.Conditions[0]
			if c.Type != v1alpha1.ConditionProgressing || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) {
				t.Errorf("Progressing = %s %s %q; want %s %s saying %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.says)
			}
			if st.Revision != 2 {
				t.Errorf("revision %d, want 2", st.Revision)
			}
		})
	}
}

// The members being replaced are named in order, whatever order the
// states came in (this node's members, then the others'): every node shows
// the same status and says the same in its messages.
func TestCount_ReplacingSortedWhateverTheOrderGiven(t *testing.T) {
	got := Count([]MemberState{
		{Name: "delta", Replacing: true}, {Name: "alpha", Updated: true, Ready: true},
		{Name: "charlie", Replacing: true}, {Name: "bravo", Replacing: true},
	})
	if want := []string{"bravo", "charlie", "delta"}; !slices.Equal(got.Replacing, want) {
		t.Errorf("Replacing = %v, want %v", got.Replacing, want)
	}
	if got.Members != 4 || got.Updated != 1 || got.Ready != 1 {
		t.Errorf("counts %+v, want 4 members, 1 updated, 1 Ready", got)
	}
}

// A member another node runs counts as its published status says.
func TestStateOf_ReadsThePublishedStatus(t *testing.T) {
	p := profile("-m", "b")
	m := v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "alpha"}}
	m.Status.Rollout, m.Status.ProfileTarget = "codex", Target(p)
	m.Status.Conditions = []v1alpha1.Condition{
		{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionTrue},
		{Type: v1alpha1.ConditionUpToDate, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForIdle},
	}
	if got := StateOf(m, p); got != (MemberState{Name: "alpha", Ready: true, Replacing: true}) {
		t.Errorf("StateOf = %+v", got)
	}
	other := p.DeepCopy()
	other.Name = "claude"
	if got := StateOf(m, other); got.Replacing {
		t.Errorf("replacing for another profile's rollout: %+v", got)
	}
	// A status written before the node saw the profile's change says
	// UpToDate; the agent's target says it runs the older profile.
	m.Status.Rollout, m.Status.Conditions = "", m.Status.Conditions[:1]
	m.Status.ProfileTarget = Target(profile("-m", "a"))
	if got := StateOf(m, p); got.Updated {
		t.Errorf("a member running the older profile counts as updated: %+v", got)
	}
}

// maxUnavailable resolves against the members: a count as it is, a percent
// rounded down, at least 1.
func TestMaxUnavailableOf(t *testing.T) {
	for _, tc := range []struct {
		v       *v1alpha1.IntOrPercent
		members int
		want    int
	}{
		{nil, 10, 1}, {&v1alpha1.IntOrPercent{Value: 3}, 10, 3}, {&v1alpha1.IntOrPercent{Value: 25, Percent: true}, 10, 2},
		{&v1alpha1.IntOrPercent{Value: 25, Percent: true}, 3, 1}, {&v1alpha1.IntOrPercent{Value: 100, Percent: true}, 3, 3},
	} {
		p := profile()
		p.Spec.Rollout = &v1alpha1.ProfileRollout{MaxUnavailable: tc.v}
		if got := p.MaxUnavailableOf(tc.members); got != tc.want {
			t.Errorf("maxUnavailable %v of %d members = %d, want %d", tc.v, tc.members, got, tc.want)
		}
	}
}

// What the agents run with is the target; how the profile rolls out, and
// what the agents do not run with, is not.
func TestTarget_OnlyWhatTheAgentsRunWith(t *testing.T) {
	base := Target(profile("-m", "a"))
	same := profile("-m", "a")
	same.Spec.Description, same.Spec.RestartPolicy = "other", v1alpha1.RestartNever
	same.Spec.Rollout = &v1alpha1.ProfileRollout{Paused: true}
	if Target(same) != base {
		t.Error("description, restartPolicy or spec.rollout changed the target")
	}
	restarted := profile("-m", "a")
	restarted.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: "2026-12-02T10:00:00Z"}
	if Target(profile("-m", "b")) == base || Target(restarted) == base {
		t.Error("args or restartedAt did not change the target")
	}
}
