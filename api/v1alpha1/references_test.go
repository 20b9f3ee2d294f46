package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMember_References(t *testing.T) {
	tests := []struct {
		name   string
		target *MCPTarget
		want   []Reference
	}{
		{"resident by default", nil, []Reference{{"spec.profile", KindProfile, "codex"}}},
		{"resident named", &MCPTarget{Kind: TargetResident}, []Reference{{"spec.profile", KindProfile, "codex"}}},
		{"tenant", &MCPTarget{Kind: TargetTenant, TenantID: "acme"}, []Reference{
			{"spec.profile", KindProfile, "codex"}, {"spec.mcpTarget.tenantId", KindTenant, "acme"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Member{Spec: MemberSpec{Profile: "codex", MCPTarget: tt.target}}
			if diff := cmp.Diff(tt.want, m.References()); diff != "" {
				t.Errorf("References() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if NotFoundReason(KindTenant) != ReasonTenantNotFound || NotFoundReason(KindProfile) != ReasonProfileNotFound {
		t.Error("NotFoundReason does not map Profile and Tenant to their reasons")
	}
}
