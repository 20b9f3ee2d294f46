package v1alpha1

import "testing"

func TestMember_DisplayPhase(t *testing.T) {
	ready := func(status, reason string) []Condition {
		return []Condition{{Type: ConditionReady, Status: status, Reason: reason}}
	}
	for _, tt := range []struct {
		name string
		st   MemberStatus
		want string
	}{
		{"ready", MemberStatus{Phase: PhaseReady, Conditions: ready(ConditionTrue, "AgentReady")}, PhaseReady},
		{"herdr gone", MemberStatus{Phase: PhaseReady, Conditions: ready(ConditionUnknown, "HerdrUnavailable")}, "Unknown (HerdrUnavailable)"},
		{"node lost", MemberStatus{Phase: PhaseReady, Conditions: ready(ConditionUnknown, ReasonNodeLost)}, "Unknown (NodeLost)"},
		{"unknown without a reason", MemberStatus{Phase: PhaseStarting, Conditions: ready(ConditionUnknown, "")}, "Unknown"},
		{"not yet seen", MemberStatus{}, ""},
	} {
		m := Member{Status: tt.st}
		if got := m.DisplayPhase(); got != tt.want {
			t.Errorf("%s: DisplayPhase() = %q, want %q", tt.name, got, tt.want)
		}
	}
}
