package decode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(objs []v1alpha1.Object) []string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetObjectKind()+"/"+o.GetName())
	}
	return s
}

// TestDir_DuplicatesAcrossFilesNameBoth checks that one kind and name
// defined in two files is an error naming both files and lines, and that
// neither definition is used.
func TestDir_DuplicatesAcrossFilesNameBoth(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": member("profile: codex"),
		"b.yml":  "# same member again\n" + member("profile: claude") + "---\n" + tenant("url: https://a.example", "credentialEnv: A"),
		// Same name, other kind: not a duplicate.
		"c.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: reviewer}\nspec: {harness: codex}\n",
	})
	r, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml")
	want := []string{b + `:5: metadata.name: duplicate Member "reviewer"; already defined at ` + a + `:4`}
	if diff := cmp.Diff(want, errStrings(r.Errors())); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Tenant/acme", "Profile/reviewer"}, names(r.Objects())); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestDir_DuplicatesInOneFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{"m.yaml": member("profile: a") + "---\n" + member("profile: b")})
	r, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "m.yaml")
	want := []string{p + `:11: metadata.name: duplicate Member "reviewer"; already defined at ` + p + `:4`}
	if diff := cmp.Diff(want, errStrings(r.Errors())); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if got := r.Objects(); len(got) != 0 {
		t.Errorf("objects = %v, want none", names(got))
	}
}

// TestDir_ReadsOnlyManifestsSortedAndReportsAll checks file selection,
// order, and that errors of every file come back sorted by file and line.
// A directory named like a manifest (sub.yaml) is not read into, and is
// reported rather than left out in silence.
func TestDir_ReadsOnlyManifestsSortedAndReportsAll(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"b.yaml":          member("profile: a", "transport: http"),
		"a.yaml":          tenant("url: ftp://x", "credentialEnv: A"),
		"c.yaml":          profile("harness: codex"),
		".hidden.yaml":    "broken: [",
		"x.yaml~":         "broken: [",
		"#x.yaml#":        "broken: [",
		"notes.txt":       "broken: [",
		"sub/d.yaml":      "broken: [",
		"sub.yaml/e.yaml": "broken: [",
	})
	r, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range r.Files {
		paths = append(paths, filepath.Base(f.Path))
	}
	if diff := cmp.Diff([]string{"a.yaml", "b.yaml", "c.yaml", "sub.yaml"}, paths); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	want := []string{
		filepath.Join(dir, "a.yaml") + `:6: spec.url: invalid value "ftp://x"; want an absolute http or https URL`,
		filepath.Join(dir, "b.yaml") + `:7: spec.transport: unknown value "http"; want stdio or streamable-http`,
		filepath.Join(dir, "sub.yaml") + `: not a regular file but a directory; skipped: fleetd reads only regular files and symbolic links to them`,
	}
	if diff := cmp.Diff(want, errStrings(r.Errors())); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Profile/codex-fast"}, names(r.Objects())); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestDir_Unreadable(t *testing.T) {
	if _, err := Dir(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Errorf("Dir of a missing directory: no error")
	}
}

func TestCheckDuplicates_WithoutLines(t *testing.T) {
	m := func() v1alpha1.Object { return &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}} }
	got := CheckDuplicates([]FileResult{{Path: "x.yaml", Objects: []v1alpha1.Object{m()}}, {Path: "y.yaml", Objects: []v1alpha1.Object{m()}}})
	want := []string{`y.yaml: metadata.name: duplicate Member "a"; already defined at x.yaml`}
	if diff := cmp.Diff(want, errStrings(got)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestIsManifestFile(t *testing.T) {
	for name, want := range map[string]bool{
		"a.yaml": true, "a.yml": true, "A.YAML": true, "dir/a.yaml": true, "a.b.yaml": true,
		".a.yaml": false, ".yaml": false, "a.yaml~": false, "#a.yaml#": false, ".#a.yaml": false,
		"a.yaml.swp": false, ".a.yaml.swp": false, "a.json": false, "a.yaml.bak": false, "yaml": false, "": false,
	} {
		if got := IsManifestFile(name); got != want {
			t.Errorf("IsManifestFile(%q) = %v, want %v", name, got, want)
		}
	}
}

// ManifestPaths selects by name only: what a name is (a directory, a link
// to one, a dangling link) is ReadManifest's to judge and report.
func TestManifestPaths_ListsEveryManifestName(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml":          "",
		"b.yml":           "",
		"notes.txt":       "",
		".hidden.yaml":    "",
		"sub.yaml/x.yaml": "",
	})
	for link, target := range map[string]string{
		"link-file.yaml": "a.yaml",
		"link-dir.yaml":  "sub.yaml",
		"dangling.yaml":  "missing.yaml",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ManifestPaths(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range []string{"a.yaml", "b.yml", "dangling.yaml", "link-dir.yaml", "link-file.yaml", "sub.yaml"} {
		want = append(want, filepath.Join(dir, name))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths mismatch (-want +got):\n%s", diff)
	}
	if _, err := ManifestPaths(filepath.Join(dir, "nope")); err == nil {
		t.Error("no error listing a missing directory")
	}
}

// Every field a check across objects asks the line of — a Member's
// metadata.name, each of its references (v1alpha1.Member.References) and
// its worktree's field (WorktreeField) — is located on the line it is
// written; a field no check asks is not kept, and is answered as one left
// out: by its nearest kept ancestor, or the document.
func TestManifest_LocatesWhatTheChecksAsk(t *testing.T) {
	const doc = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: alpha
  labels: {team: docs}
spec:
  profile: codex
  mcpTarget:
    kind: tenant
    tenantId: globex
  nodeSelector:
    zone: a
  worktree:
    repo: /srv/api
    branch: feature
`
	f := Manifest("m.yaml", []byte(doc))
	if len(f.Errors) > 0 || len(f.Objects) != 1 {
		t.Fatalf("Manifest = %d objects, errors %v", len(f.Objects), f.Errors)
	}
	m := f.Objects[0].(*v1alpha1.Member)
	fields := []string{"metadata.name", m.WorktreeField()}
	for _, ref := range m.References() {
		fields = append(fields, ref.Field)
	}
	if len(fields) != 4 {
		t.Fatalf("fields asked = %v; want a name, a worktree and two references", fields)
	}
	lines := strings.Split(doc, "\n")
	for _, field := range fields {
		key := field[strings.LastIndexByte(field, '.')+1:] + ":"
		got := f.Line(0, field)
		if got < 1 || !strings.HasPrefix(strings.TrimSpace(lines[got-1]), key) {
			t.Errorf("Line(%q) = %d, want the line of its key %q", field, got, key)
		}
	}
	for field, want := range map[string]int{"spec.nodeSelector[zone]": 6, "metadata.labels": 3, "spec.worktree.repo": 13} {
		if got := f.Line(0, field); got != want {
			t.Errorf("Line(%q) = %d, want %d (its nearest kept ancestor)", field, got, want)
		}
	}
}
