package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// describe names each object as kind/name plus what identifies its
// definition here.
func describe(objs []v1alpha1.Object) []string {
	var out []string
	for _, o := range objs {
		s := o.GetObjectKind() + "/" + o.GetName()
		switch o := o.(type) {
		case *v1alpha1.Member:
			s += ":" + o.Kind + ":" + o.Spec.Profile + ":" + o.Status.Phase
		case *v1alpha1.Profile:
			s += ":" + o.Kind + ":" + o.Spec.Harness
		case *v1alpha1.Tenant:
			s += ":" + o.Kind + ":" + o.Spec.CredentialEnv
		}
		out = append(out, s)
	}
	return out
}

func TestRead_ListsFilesAndStdin(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "list.yaml")
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: a}\n  spec: {profile: claude}\n  status: {phase: Ready}\n" +
		"---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: codex}\n" +
		"---\napiVersion: fleetd.dev/v1alpha1\nkind: ProfileList\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Profile\n  metadata: {name: claude, uid: u-1}\n  spec: {harness: claude}\n"
	if err := os.WriteFile(file, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := strings.NewReader("apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: https://acme.example/mcp, credentialEnv: ACME_TOKEN}\n")
	objs, err := Read(stdin, []string{file, "-"}, "apply")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Member/a:Member:claude:", "Member/b:Member:codex:", "Profile/claude:Profile:claude", "Tenant/acme:Tenant:ACME_TOKEN"}
	if diff := cmp.Diff(want, describe(objs)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestRead_ProblemsAreLocatedAndNothingIsReturned(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "list.yaml")
	// The second item's transport is on line 13 of the file.
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: a}\n  spec: {profile: claude}\n" +
		"- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: b}\n  spec:\n    profile: claude\n    transport: http\n"
	profile := filepath.Join(dir, "profile.yaml")
	for name, text := range map[string]string{file: list, profile: "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec:\n  harness: claude\n  restartPolicy: Sometimes\n"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := Read(nil, []string{file, profile}, "diff")
	if objs != nil || err == nil {
		t.Fatalf("got %d objects, error %v; want none and an error", len(objs), err)
	}
	for _, want := range []string{file + ":13: spec.transport: ", profile + ":6: spec.restartPolicy: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestRead_NothingToDo(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(nil, []string{empty}, "delete"); err == nil || err.Error() != empty+": no Members, Profiles or Tenants to delete" {
		t.Errorf("Read of a file without objects = %v", err)
	}
}

func TestRead_StdinIsBounded(t *testing.T) {
	big := strings.NewReader("# " + strings.Repeat("x", MaxInputBytes))
	if _, err := Read(big, []string{"-"}, "apply"); err == nil || !strings.Contains(err.Error(), "standard input is larger than") {
		t.Errorf("Read of %d bytes of stdin = %v, want a size error", MaxInputBytes+2, err)
	}
}

// Apply sends what a Member references first; delete removes the Members
// first; within a kind the input's order stays.
func TestForApplyAndForDelete(t *testing.T) {
	m := func(name string) v1alpha1.Object {
		return &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}
	}
	p := func(name string) v1alpha1.Object {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}
	}
	tn := func(name string) v1alpha1.Object {
		return &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: name}}
	}
	in := []v1alpha1.Object{m("triage"), tn("acme"), m("builder"), p("codex"), p("claude"), tn("beta")}
	names := func(objs []v1alpha1.Object) string {
		var s []string
		for _, o := range objs {
			s = append(s, strings.ToLower(o.GetObjectKind())+"/"+o.GetName())
		}
		return strings.Join(s, " ")
	}
	if got, want := names(ForApply(in)), "profile/codex profile/claude tenant/acme tenant/beta member/triage member/builder"; got != want {
		t.Errorf("ForApply: %s\nwant:       %s", got, want)
	}
	if got, want := names(ForDelete(in)), "member/triage member/builder tenant/acme tenant/beta profile/codex profile/claude"; got != want {
		t.Errorf("ForDelete: %s\nwant:        %s", got, want)
	}
	if got := names(in); got != "member/triage tenant/acme member/builder profile/codex profile/claude tenant/beta" {
		t.Errorf("the input was reordered: %s", got)
	}
}
