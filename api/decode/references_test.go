package decode

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// twoMembers is a file whose line numbers the tests below rely on.
const twoMembers = `# a comment first
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: ok}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: lost
spec:
  profile: codex
  mcpTarget:
    kind: tenant
    tenantId: globex
`

func TestFileResult_Line(t *testing.T) {
	f := Manifest("m.yaml", []byte(twoMembers))
	if len(f.Errors) > 0 || len(f.Objects) != 2 {
		t.Fatalf("Manifest = %d objects, errors %v", len(f.Objects), f.Errors)
	}
	for _, tt := range []struct {
		obj   int
		field string
		want  int
	}{
		{0, "metadata.name", 4},
		{0, "spec.profile", 5},
		{0, "spec.mcpTarget.tenantId", 5}, // defaulted, not written: its nearest written ancestor, spec
		{1, "metadata.name", 10},
		{1, "spec.profile", 12},
		{1, "spec.mcpTarget", 13},
		{1, "spec.mcpTarget.tenantId", 15},
		{1, "status.phase", 7}, // nothing of it written: the document
		{2, "metadata.name", 0},
		{-1, "metadata.name", 0},
	} {
		if got := f.Line(tt.obj, tt.field); got != tt.want {
			t.Errorf("Line(%d, %q) = %d, want %d", tt.obj, tt.field, got, tt.want)
		}
	}
	if hand := (&FileResult{Objects: f.Objects}); hand.Line(0, "metadata.name") != 0 {
		t.Errorf("a hand-made result located an object")
	}
}

func TestCheckReferences(t *testing.T) {
	files := []FileResult{Manifest("m.yaml", []byte(twoMembers))}
	defined := func(objs ...string) Defined {
		return func(kind, name string) bool {
			for _, o := range objs {
				if o == kind+"/"+name {
					return true
				}
			}
			return false
		}
	}
	for _, tt := range []struct {
		name    string
		defined Defined
		want    []string
	}{
		{"everything there", defined("Profile/claude", "Profile/codex", "Tenant/globex"), nil},
		{"nothing there", defined(), []string{
			`m.yaml:5: spec.profile: no Profile "claude" in DIR; add one, or fix the name`,
			`m.yaml:12: spec.profile: no Profile "codex" in DIR; add one, or fix the name`,
			`m.yaml:15: spec.mcpTarget.tenantId: no Tenant "globex" in DIR; add one, or fix the name`,
		}},
		{"a Profile of the tenant's name does not count", defined("Profile/claude", "Profile/codex", "Profile/globex", "Member/globex"), []string{
			`m.yaml:15: spec.mcpTarget.tenantId: no Tenant "globex" in DIR; add one, or fix the name`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, errStrings(CheckReferences(files, tt.defined, "DIR"))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	// Profiles and Tenants reference nothing; a resident Member no Tenant.
	other := FileResult{Path: "o.yaml", Objects: []v1alpha1.Object{
		&v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "p"}},
		&v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "r"}, Spec: v1alpha1.MemberSpec{Profile: "p",
			MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident}}},
	}}
	if errs := CheckReferences([]FileResult{other}, defined("Profile/p"), "DIR"); len(errs) > 0 {
		t.Errorf("errors = %v, want none", errs)
	}
}
