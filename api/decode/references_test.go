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

// TestCheckWorktrees: a branch of a repository claimed twice — by two
// members' own spec.worktree, or by one of them through its profile — is an
// error on the later member naming the first and where it is written;
// another branch, another repository or a member that opts out with cwd is
// fine.
func TestCheckWorktrees(t *testing.T) {
	const profiles = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: agents}
spec:
  harness: codex
  worktree: {repo: /srv/api, branchPrefix: agents}
---
apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: plain}
spec: {harness: codex}
`
	member := func(name, profile, extra string) string {
		return "---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: " + profile + "\n" + extra
	}
	own := func(repo, branch string) string {
		return "  worktree:\n    repo: " + repo + "\n    branch: " + branch + "\n"
	}
	files := []FileResult{
		Manifest("profiles.yaml", []byte(profiles)),
		Manifest("a.yaml", []byte(member("alpha", "plain", own("/srv/api", "feature")))),
		Manifest("b.yaml", []byte(member("beta", "plain", own("/srv/api/", "feature"))+ // the same repository
			member("gamma", "plain", own("/srv/web", "feature"))+ // another repository
			member("delta", "plain", own("/srv/api", "agents/eps")))),
		Manifest("c.yaml", []byte(member("eps", "agents", "")+ // agents/eps of /srv/api, like delta
			member("zeta", "agents", "  cwd: /srv\n")+ // opts out
			member("eta", "agents", "")+
			member("orphan", "missing", ""))),
	}
	for _, f := range files {
		if len(f.Errors) > 0 {
			t.Fatalf("%s: %v", f.Path, f.Errors)
		}
	}
	byName := map[string]*v1alpha1.Profile{}
	for _, o := range files[0].Objects {
		byName[o.GetName()] = o.(*v1alpha1.Profile)
	}
	got := errStrings(CheckWorktrees(files, func(name string) *v1alpha1.Profile { return byName[name] }))
	want := []string{
		`b.yaml:9: spec.worktree.branch: branch "feature" of repository /srv/api is claimed by member "alpha" too (a.yaml:9); two members never share a worktree: give each a branch of its own`,
		`c.yaml:6: spec.profile: branch "agents/eps" of repository /srv/api (profile "agents" gives it to member "eps") is claimed by member "delta" too (b.yaml:27); two members never share a worktree: give each a branch of its own`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
