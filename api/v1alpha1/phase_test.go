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
		{"update waits for idle", MemberStatus{Phase: PhaseReady, Conditions: append(ready(ConditionTrue, "AgentReady"),
			Condition{Type: ConditionUpToDate, Status: ConditionFalse, Reason: ReasonWaitingForIdle})}, PhaseUpdating},
		{"update waits, herdr gone", MemberStatus{Phase: PhaseReady, Conditions: append(ready(ConditionUnknown, "HerdrUnavailable"),
			Condition{Type: ConditionUpToDate, Status: ConditionFalse, Reason: ReasonWaitingForIdle})}, "Unknown (HerdrUnavailable)"},
		{"up to date", MemberStatus{Phase: PhaseReady, Conditions: append(ready(ConditionTrue, "AgentReady"),
			Condition{Type: ConditionUpToDate, Status: ConditionTrue, Reason: ReasonAsExpected})}, PhaseReady},
		{"terminating while an update waited", MemberStatus{Phase: PhaseTerminating, Conditions: append(ready(ConditionFalse, ReasonTerminating),
			Condition{Type: ConditionUpToDate, Status: ConditionFalse, Reason: ReasonWaitingForIdle})}, PhaseTerminating},
	} {
		m := Member{Status: tt.st}
		if got := m.DisplayPhase(); got != tt.want {
			t.Errorf("%s: DisplayPhase() = %q, want %q", tt.name, got, tt.want)
		}
	}
}
