package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMember_SetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   MemberSpec
		want MemberSpec
	}{
		{
			name: "empty",
			in:   MemberSpec{Profile: "p"},
			want: MemberSpec{Profile: "p", MCPTarget: &MCPTarget{Kind: TargetResident}, Transport: TransportStreamableHTTP, Workspace: "fleetd"},
		},
		{
			name: "set values are kept",
			in:   MemberSpec{MCPTarget: &MCPTarget{Kind: TargetTenant, TenantID: "a"}, Transport: TransportStdio, Workspace: "api"},
			want: MemberSpec{MCPTarget: &MCPTarget{Kind: TargetTenant, TenantID: "a"}, Transport: TransportStdio, Workspace: "api"},
		},
		{
			name: "an empty mcpTarget is not filled in",
			in:   MemberSpec{MCPTarget: &MCPTarget{}},
			want: MemberSpec{MCPTarget: &MCPTarget{}, Transport: TransportStreamableHTTP, Workspace: "fleetd"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Member{Spec: tt.in}
			m.SetDefaults()
			if diff := cmp.Diff(tt.want, m.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			m.SetDefaults()
			if diff := cmp.Diff(tt.want, m.Spec); diff != "" {
				t.Errorf("second SetDefaults changed the spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfile_SetDefaults(t *testing.T) {
	p := &Profile{Spec: ProfileSpec{Harness: "codex"}}
	p.SetDefaults()
	want := ProfileSpec{Harness: "codex", RestartPolicy: RestartAlways, StartupTimeout: Duration{60 * time.Second}, ToolTimeout: Duration{15 * time.Minute}, Resume: ResumeAuto,
		TerminationGracePeriod: Duration{10 * time.Minute}}
	if diff := cmp.Diff(want, p.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	set := ProfileSpec{Harness: "codex", RestartPolicy: RestartNever, StartupTimeout: Duration{10 * time.Second}, ToolTimeout: Duration{-time.Second}, Resume: ResumeNever,
		TerminationGracePeriod: Duration{time.Minute}}
	p = &Profile{Spec: set}
	p.SetDefaults()
	if diff := cmp.Diff(set, p.Spec); diff != "" {
		t.Errorf("SetDefaults overwrote set values (-want +got):\n%s", diff)
	}
}
