package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadMembers_ListsFilesAndStdin(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "list.yaml")
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: a}\n  spec: {profile: claude}\n  status: {phase: Ready}\n" +
		"---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: b}\nspec: {profile: codex}\n"
	if err := os.WriteFile(file, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	stdin := strings.NewReader("apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: c}\nspec: {profile: claude}\n")
	members, err := ReadMembers(stdin, []string{file, "-"}, "apply")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.Kind+"/"+m.Name+":"+m.Spec.Profile+":"+m.Status.Phase)
	}
	if diff := cmp.Diff([]string{"Member/a:claude:", "Member/b:codex:", "Member/c:claude:"}, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
}

func TestReadMembers_ProblemsAreLocatedAndNothingIsReturned(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "list.yaml")
	// The second item's transport is on line 13 of the file.
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: a}\n  spec: {profile: claude}\n" +
		"- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: b}\n  spec:\n    profile: claude\n    transport: http\n"
	profile := filepath.Join(dir, "profile.yaml")
	for name, text := range map[string]string{file: list, profile: "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	members, err := ReadMembers(nil, []string{file, profile}, "diff")
	if members != nil || err == nil {
		t.Fatalf("got %d members, error %v; want none and an error", len(members), err)
	}
	for _, want := range []string{file + ":13: spec.transport: ", profile + `: Profile "claude": fleetd diff takes only Members`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestReadMembers_StdinIsBounded(t *testing.T) {
	big := strings.NewReader("# " + strings.Repeat("x", MaxInputBytes))
	if _, err := ReadMembers(big, []string{"-"}, "apply"); err == nil || !strings.Contains(err.Error(), "standard input is larger than") {
		t.Errorf("ReadMembers of %d bytes of stdin = %v, want a size error", MaxInputBytes+2, err)
	}
}
