package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fullMember() *Member {
	ts := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	return &Member{
		TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindMember},
		ObjectMeta: ObjectMeta{
			Name: "reviewer", Labels: map[string]string{"team": "api"}, Annotations: map[string]string{"a": "b"},
			UID: "u", Generation: 2, CreationTimestamp: &ts,
		},
		Spec: MemberSpec{Profile: "codex", MCPTarget: &MCPTarget{Kind: TargetTenant, TenantID: "acme"}, Transport: TransportStdio},
		Status: MemberStatus{
			Phase:          PhaseReady,
			Conditions:     []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: ts}},
			Plan:           []PlanRow{{Server: "fleetd", Target: TargetTenant, Transport: TransportStdio}},
			ResumedSession: &AgentSession{Agent: "codex", Kind: AgentSessionKindID, Value: "s-1"},
		},
	}
}

func fullProfile() *Profile {
	return &Profile{
		TypeMeta:   TypeMeta{APIVersion: GroupVersion, Kind: KindProfile},
		ObjectMeta: ObjectMeta{Name: "codex", Labels: map[string]string{"x": "y"}},
		Spec: ProfileSpec{
			Harness: "codex", Args: []string{"-m", "x"}, Env: map[string]string{"A": "1"},
			StartupTimeout: Duration{time.Minute},
		},
	}
}

func fullTenant() *Tenant {
	return &Tenant{
		TypeMeta:   TypeMeta{APIVersion: GroupVersion, Kind: KindTenant},
		ObjectMeta: ObjectMeta{Name: "acme", Annotations: map[string]string{"n": "m"}},
		Spec:       TenantSpec{URL: "https://a.example", CredentialEnv: "A"},
	}
}

// TestDeepCopy_SharesNothing mutates every map, slice and pointer of a
// copy and checks the original is unchanged.
func TestDeepCopy_SharesNothing(t *testing.T) {
	t.Run("Member", func(t *testing.T) {
		orig := fullMember()
		cp := orig.DeepCopy()
		if diff := cmp.Diff(orig, cp); diff != "" {
			t.Fatalf("copy differs (-orig +copy):\n%s", diff)
		}
		cp.Labels["team"] = "web"
		cp.Annotations["new"] = "x"
		*cp.CreationTimestamp = cp.CreationTimestamp.Add(time.Hour)
		cp.Spec.MCPTarget.TenantID = "other"
		cp.Status.Conditions[0].Reason = "Changed"
		cp.Status.Plan[0].URL = "https://changed.example"
		cp.Status.ResumedSession.Value = "s-2"
		if diff := cmp.Diff(fullMember(), orig); diff != "" {
			t.Errorf("original changed through its copy (-want +got):\n%s", diff)
		}
		if got := orig.DeepCopyObject().(*Member); got == orig || got.Spec.MCPTarget == orig.Spec.MCPTarget {
			t.Errorf("DeepCopyObject shares memory with the original")
		}
	})
	t.Run("Profile", func(t *testing.T) {
		orig := fullProfile()
		cp := orig.DeepCopy()
		if diff := cmp.Diff(orig, cp); diff != "" {
			t.Fatalf("copy differs (-orig +copy):\n%s", diff)
		}
		cp.Labels["x"] = "z"
		cp.Spec.Args[0] = "--changed"
		cp.Spec.Env["A"] = "2"
		cp.Spec.Env["B"] = "3"
		if diff := cmp.Diff(fullProfile(), orig); diff != "" {
			t.Errorf("original changed through its copy (-want +got):\n%s", diff)
		}
	})
	t.Run("Tenant", func(t *testing.T) {
		orig := fullTenant()
		cp := orig.DeepCopyObject().(*Tenant)
		cp.Annotations["n"] = "changed"
		cp.Spec.URL = "https://changed.example"
		if diff := cmp.Diff(fullTenant(), orig); diff != "" {
			t.Errorf("original changed through its copy (-want +got):\n%s", diff)
		}
	})
	t.Run("nil", func(t *testing.T) {
		if (*Member)(nil).DeepCopy() != nil || (*Profile)(nil).DeepCopy() != nil || (*Tenant)(nil).DeepCopy() != nil ||
			(*ObjectMeta)(nil).DeepCopy() != nil || (*MCPTarget)(nil).DeepCopy() != nil {
			t.Errorf("DeepCopy of nil is not nil")
		}
	})
	t.Run("nil maps stay nil", func(t *testing.T) {
		p := &Profile{}
		if cp := p.DeepCopy(); cp.Spec.Env != nil || cp.Spec.Args != nil || cp.Labels != nil {
			t.Errorf("DeepCopy turned nil maps or slices into empty ones: %+v", cp)
		}
	})
}
