package migrate

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/yamledit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/rewrite")

// golden renders a File result as the text kept in NAME.golden: the
// changes, one per line, then the rewritten file.
func golden(changes []Change, out []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# changes\n")
	if len(changes) == 0 {
		b.WriteString("(none)\n")
	}
	for _, c := range changes {
		b.WriteString(c.String() + "\n")
	}
	b.WriteString("# result\n")
	b.Write(out)
	return b.Bytes()
}

func TestFile_RewritesGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/rewrite/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, changes, errs := File(in, data)
			if errs != nil {
				t.Fatalf("File: %v", errs)
			}
			got := golden(changes, out)
			goldenPath := strings.TrimSuffix(in, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test ./migrate -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("File(%s) mismatch (-want +got):\n%s", in, diff)
			}

			// A second run finds nothing and changes nothing.
			again, changes2, errs := File(in, out)
			if errs != nil || len(changes2) != 0 || !bytes.Equal(again, out) {
				t.Errorf("second run: changes %v, errors %v, output changed: %v", changes2, errs, !bytes.Equal(again, out))
			}
		})
	}
}

func TestFile_NoLegacyFieldReturnsInputUnchanged(t *testing.T) {
	data := []byte("kind: Member\nmetadata: {name: a}\nspec:\n  profile: p\n---\nkind: Profile\nspec:\n  mcpTransport: {mode: remote-http, tenantId: x}\n")
	out, changes, errs := File("m.yaml", data)
	if errs != nil || len(changes) != 0 || !bytes.Equal(out, data) {
		t.Fatalf("File = %q, %v, %v; want the input, no changes, no errors", out, changes, errs)
	}
}

func TestFile_KeepsCRLFLineEndings(t *testing.T) {
	in := "kind: Member\r\nmetadata: {name: a}\r\nspec:\r\n  profile: p\r\n  mcpTransport:\r\n    mode: remote-http\r\n    tenantId: acme\r\n  workspace: w\r\n"
	want := "kind: Member\r\nmetadata: {name: a}\r\nspec:\r\n  profile: p\r\n  mcpTarget:\r\n    kind: tenant\r\n    tenantId: acme\r\n  transport: streamable-http\r\n  workspace: w\r\n"
	out, _, errs := File("m.yaml", []byte(in))
	if errs != nil {
		t.Fatal(errs)
	}
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestFile_FileWithoutFinalNewline(t *testing.T) {
	in := "kind: Member\nmetadata: {name: a}\nspec:\n  profile: p\n  mcpTransport: {mode: remote-http, tenantId: acme}"
	want := "kind: Member\nmetadata: {name: a}\nspec:\n  profile: p\n  mcpTarget: {kind: tenant, tenantId: acme}\n  transport: streamable-http\n"
	out, _, errs := File("m.yaml", []byte(in))
	if errs != nil {
		t.Fatal(errs)
	}
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestFile_RefusesWhatItCannotRewriteFaithfully(t *testing.T) {
	const dir = "testdata/errors/"
	tests := []struct {
		file string
		want []string
	}{
		{"unknown-mode.yaml", []string{
			dir + `unknown-mode.yaml:7: spec.mcpTransport.mode: unknown legacy mode "remote-grpc"; want remote-http or resident (migrate this member by hand)`,
		}},
		{"empty-mode.yaml", []string{
			dir + `empty-mode.yaml:6: spec.mcpTransport.mode: unknown legacy mode ""; want remote-http or resident (migrate this member by hand)`,
		}},
		{"missing-tenant.yaml", []string{
			dir + "missing-tenant.yaml:6: spec.mcpTransport: mode remote-http needs a tenantId naming the Tenant; add it, then rerun fleetd migrate",
		}},
		{"both-shapes.yaml", []string{
			dir + "both-shapes.yaml:6: spec.mcpTarget: the member has both mcpTarget and the legacy mcpTransport (line 7); delete the one that is wrong, then rerun fleetd migrate",
		}},
		{"transport-stdio.yaml", []string{
			dir + `transport-stdio.yaml:7: spec.transport: is "stdio", but a tenant target only speaks streamable-http; fix it, then rerun fleetd migrate`,
		}},
		{"unknown-field.yaml", []string{
			dir + "unknown-field.yaml:9: spec.mcpTransport.url: unknown legacy field; the migration only knows mode and tenantId (migrate this member by hand)",
		}},
		{"anchor.yaml", []string{
			dir + "anchor.yaml:6: spec.mcpTransport: uses a YAML anchor or alias; expand it by hand, then rerun fleetd migrate",
		}},
		{"resident-tenant.yaml", []string{
			dir + "resident-tenant.yaml:8: spec.mcpTransport.tenantId: a resident member has no tenant; delete tenantId or set mode remote-http, then rerun fleetd migrate",
		}},
		{"syntax.yaml", []string{
			dir + "syntax.yaml:5: invalid YAML: mapping values are not allowed in this context",
		}},
		{"parser-line.yaml", []string{
			dir + "parser-line.yaml:6: invalid YAML: did not find expected ',' or '}'",
		}},
		{"duplicate.yaml", []string{
			dir + "duplicate.yaml:7: spec.mcpTransport: duplicate key (first at line 6); keep one, then rerun fleetd migrate",
		}},
		{"only-field.yaml", []string{
			dir + "only-field.yaml:5: spec.mcpTransport: is the only field of spec, which needs at least a profile; add one, then rerun fleetd migrate",
		}},
		{"block-scalar.yaml", []string{
			dir + `block-scalar.yaml:7: spec.mcpTransport: "remote-http" is written as a block scalar; migrate this member by hand`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(dir + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			out, changes, errs := File(dir+tt.file, data)
			if out != nil || changes != nil {
				t.Errorf("File returned output %q and changes %v alongside errors", out, changes)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// copyFixtures copies testdata files into a fresh directory with mode perm.
func copyFixtures(t *testing.T, perm os.FileMode, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, data, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, perm); err != nil { // umask-proof
			t.Fatal(err)
		}
	}
	return dir
}

// snapshot reads every file in dir: name → contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(data)
	}
	return files
}

// goldenResult returns the rewritten file kept in a fixture's golden file.
func goldenResult(t *testing.T, fixture string) string {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(fixture, ".yaml") + ".golden")
	if err != nil {
		t.Fatal(err)
	}
	_, result, ok := strings.Cut(string(data), "# result\n")
	if !ok {
		t.Fatalf("%s: golden has no result section", fixture)
	}
	return result
}

func TestDir_DryRunWritesNothingThenRunRewritesOnce(t *testing.T) {
	fixtures := []string{"testdata/rewrite/tenant-block.yaml", "testdata/rewrite/multi.yaml", "testdata/rewrite/clean.yaml"}
	dir := copyFixtures(t, 0o640, fixtures...)
	before := snapshot(t, dir)

	dry, err := Dir(dir, &Options{DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Fatalf("dry run changed files (-before +after):\n%s", diff)
	}
	// multi.yaml has four legacy members, tenant-block.yaml one.
	if len(dry) != 5 {
		t.Fatalf("dry run reported %d changes, want 5: %v", len(dry), dry)
	}

	changes, err := Dir(dir, nil)
	if err != nil {
		t.Fatalf("Dir: %v", err)
	}
	if diff := cmp.Diff(dry, changes); diff != "" {
		t.Errorf("real run reported other changes than the dry run (-dry +real):\n%s", diff)
	}
	want := map[string]string{}
	for _, f := range fixtures {
		want[filepath.Base(f)] = goldenResult(t, f)
	}
	after := snapshot(t, dir) // also proves no temporary file was left behind
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("files after migration (-want +got):\n%s", diff)
	}
	for name := range want {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != 0o640 {
			t.Errorf("%s: mode %v after migration, want 0640", name, got)
		}
	}

	again, err := Dir(dir, nil)
	if err != nil || len(again) != 0 {
		t.Fatalf("second run: changes %v, error %v; want none", again, err)
	}
	if diff := cmp.Diff(after, snapshot(t, dir)); diff != "" {
		t.Errorf("second run changed files (-first +second):\n%s", diff)
	}
}

func TestDir_AnyBadFileMeansNothingIsWritten(t *testing.T) {
	dir := copyFixtures(t, 0o644, "testdata/rewrite/tenant-flow.yaml", "testdata/errors/unknown-mode.yaml")
	before := snapshot(t, dir)
	changes, err := Dir(dir, nil)
	var list decode.ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("Dir = %v, %v; want one error", changes, err)
	}
	if want := filepath.Join(dir, "unknown-mode.yaml") + ":7: spec.mcpTransport.mode:"; !strings.HasPrefix(list[0].Error(), want) {
		t.Errorf("error %q does not start with %q", list[0], want)
	}
	if changes != nil {
		t.Errorf("changes %v reported although nothing was written", changes)
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
}

func TestDir_ReadsOnlyManifestFiles(t *testing.T) {
	legacy, err := os.ReadFile("testdata/rewrite/tenant-flow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{".hidden.yaml", "backup.yaml~", "#autosave.yaml#", "notes.txt", "sub/inner.yaml"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, legacy, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "member.yml"), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	changes, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].File != filepath.Join(dir, "member.yml") {
		t.Errorf("changes = %v; want exactly one, in member.yml", changes)
	}
	inner, err := os.ReadFile(filepath.Join(dir, "sub/inner.yaml"))
	if err != nil || !bytes.Equal(inner, legacy) {
		t.Errorf("a file in a subdirectory was touched (err %v)", err)
	}
}

// A name fleetd would read that is not a regular file is a problem, as in
// `fleetd validate` (decode.ReadManifest decides), and nothing is written.
func TestDir_ReportsADirectoryNamedLikeAManifest(t *testing.T) {
	legacy, err := os.ReadFile("testdata/rewrite/tenant-flow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "member.yml"), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Dir(dir, nil)
	want := filepath.Join(dir, "dir.yaml") + ": not a regular file but a directory; skipped"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Dir: %v; want an error starting %q", err, want)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "member.yml")); err != nil || !bytes.Equal(got, legacy) {
		t.Errorf("member.yml was rewritten despite the problem (err %v)", err)
	}
}

func TestDir_RewritesTheTargetOfASymlink(t *testing.T) {
	dir := copyFixtures(t, 0o600, "testdata/rewrite/tenant-flow.yaml")
	manifests := t.TempDir()
	link := filepath.Join(manifests, "triage.yaml")
	if err := os.Symlink(filepath.Join(dir, "tenant-flow.yaml"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(manifests, nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced (err %v)", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "tenant-flow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenResult(t, "testdata/rewrite/tenant-flow.yaml"); string(got) != want {
		t.Errorf("target = %q, want %q", got, want)
	}
}

func TestDir_MissingDirectoryIsAnError(t *testing.T) {
	if _, err := Dir(filepath.Join(t.TempDir(), "absent"), nil); err == nil {
		t.Fatal("Dir on a missing directory returned no error")
	}
}

func TestVerify_CatchesARewriteThatChangesMore(t *testing.T) {
	orig := "kind: Member\nspec:\n  profile: p\n  workspace: w\n"
	docs, err := yamledit.ParseDocuments([]byte(orig))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"kind: Member\nspec:\n  profile: p\n  workspace: x\n",
		"kind: Member\nspec:\n  profile: p\n",
		"kind: Member\nspec:\n  profile: p\n  workspace: w\n---\nkind: Member\n",
		"kind: Member\nspec:\n  profile: p\n  workspace: 1\n",
		"kind: Member\nspec: [profile, p]\n",
	} {
		if err := verify([]byte(bad), docs); err == nil {
			t.Errorf("verify(%q) found no difference", bad)
		}
	}
	if err := verify([]byte("# comment\nkind: Member\nspec: {profile: p,\n  workspace: \"w\"}\n"), docs); err != nil {
		t.Errorf("verify of a restyled but equal file: %v", err)
	}
}

func TestFile_KeepsCommentColumns(t *testing.T) {
	in := "kind: Member\nmetadata: {name: a}\nspec:\n  profile: p\n" +
		"  mcpTransport:     # which gateway\n" +
		"    mode: remote-http   # legacy\n" +
		"    tenantId: acme      # the tenant\n" +
		"---\nkind: Member\nmetadata: {name: b}\nspec:\n  profile: p\n" +
		"  mcpTransport: {mode: remote-http, tenantId: acme} # cramped\n"
	want := "kind: Member\nmetadata: {name: a}\nspec:\n  profile: p\n" +
		"  mcpTarget:        # which gateway\n" +
		"    kind: tenant        # legacy\n" +
		"    tenantId: acme      # the tenant\n" +
		"  transport: streamable-http\n" +
		"---\nkind: Member\nmetadata: {name: b}\nspec:\n  profile: p\n" +
		"  mcpTarget: {kind: tenant, tenantId: acme} # cramped\n" +
		"  transport: streamable-http\n"
	out, _, errs := File("m.yaml", []byte(in))
	if errs != nil {
		t.Fatal(errs)
	}
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
