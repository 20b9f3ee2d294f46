package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
)

// runCLI runs the fleetd command line as run does, with its output
// captured, and returns the exit code run would return.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeTree creates files (relative path → content) in a new directory.
func writeTree(t *testing.T, files map[string]string) string {
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

// readTree reads every regular file directly in dir: name → content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(data)
		}
	}
	return files
}

// copyTree copies the regular files directly in src into a new directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	return writeTree(t, readTree(t, src))
}

// demoRepo is the repository of the example fleet's worktree member, which
// `make run` creates (manifests/builder.yaml).
const demoRepo = "/tmp/fleetd-demo-repo"

// copyExamples copies the example fleet (manifests/*.yaml) into a new
// directory, its worktree member on a throwaway repository of the test's
// instead of make run's demoRepo.
func copyExamples(t *testing.T) (dir, repo string) {
	t.Helper()
	repo = gitrepotest.Repo(t)
	files := readTree(t, "../../manifests")
	for name, content := range files {
		files[name] = strings.ReplaceAll(content, demoRepo, repo)
	}
	return writeTree(t, files), repo
}

func TestValidate_ExampleManifestsAreValid(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "validate", "../../manifests")
	if code != 0 || stderr != "" {
		t.Fatalf("validate manifests: exit %d, stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	if want := "../../manifests: 7 objects valid (4 Members, 2 Profiles, 1 Tenant)\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
}

func TestValidate_ReportsUnresolvedReferencesAtTheirLines(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"profiles.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n",
		"members.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: ok}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: lost}
spec:
  profile: codex
  mcpTarget:
    kind: tenant
    tenantId: globex
`,
		"notes.txt": "not a manifest",
	})
	code, stdout, stderr := runCLI(t, "validate", dir)
	members := filepath.Join(dir, "members.yaml")
	want := members + `:10: spec.profile: no Profile "codex" in ` + dir + "; add one, or fix the name\n" +
		members + `:13: spec.mcpTarget.tenantId: no Tenant "globex" in ` + dir + "; add one, or fix the name\n"
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("stdout mismatch (-want +got):\n%s", diff)
	}
	if wantErr := "fleetd validate: 2 problems in " + dir + "\n"; stderr != wantErr {
		t.Errorf("stderr = %q, want %q", stderr, wantErr)
	}
}

// Two members on one branch of one repository — the second through its
// profile's worktree setting — are a problem of the later one, naming the
// first and its line.
func TestValidate_ReportsASharedWorktreeBranch(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"profiles.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: agents}\nspec:\n  harness: codex\n  worktree: {repo: /srv/api, branchPrefix: agents}\n",
		"a.yaml":        "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: first}\nspec:\n  profile: agents\n  worktree: {repo: /srv/api, branch: agents/second}\n",
		"b.yaml":        "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: second}\nspec: {profile: agents}\n",
	})
	code, stdout, _ := runCLI(t, "validate", dir)
	want := filepath.Join(dir, "b.yaml") + `:4: spec.profile: branch "agents/second" of repository /srv/api (profile "agents" gives it to member "second") is claimed by member "first" too (` +
		filepath.Join(dir, "a.yaml") + ":6); two members never share a worktree: give each a branch of its own\n"
	if code != 1 || stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant exit 1 and:\n%s", code, stdout, want)
	}
}

func TestValidate_PrintsDecodeProblemsInFileAndLineOrder(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"b.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec:\n  harness: claude\n  colour: blue\n",
		"a.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: m}\nspec:\n  profile: p\n  transport: carrier-pigeon\n",
	})
	code, stdout, _ := runCLI(t, "validate", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	wantPrefixes := []string{
		filepath.Join(dir, "a.yaml") + ":6: spec.transport: ",
		filepath.Join(dir, "b.yaml") + ":6: spec.colour: ",
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(wantPrefixes), stdout)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("problem %d = %q, want prefix %q", i, lines[i], p)
		}
	}
}

func TestValidate_EmptyDirectoryIsValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, stdout, _ := runCLI(t, "validate", dir)
	if want := dir + ": no objects (no manifest files, or only empty documents)\n"; code != 0 || stdout != want {
		t.Errorf("exit %d, stdout %q; want 0, %q", code, stdout, want)
	}
}

// usageCase is one command line that must fail with an exit code and a
// message on stderr, printing nothing on stdout.
type usageCase struct {
	name       string
	args       []string
	wantCode   int
	wantStderr string // prefix
}

func checkUsageErrors(t *testing.T, tests []usageCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d", code, tt.wantCode)
			}
			if !strings.HasPrefix(stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want prefix %q", stderr, tt.wantStderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestValidate_UsageAndDirectoryErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "absent")
	checkUsageErrors(t, []usageCase{
		{"validate without a directory", []string{"validate"}, 2, "fleetd validate: missing DIR|FILE...\nUsage: fleetd validate DIR|FILE..."},
		{"validate with an unknown flag", []string{"validate", "--strict", "."}, 2, "fleetd validate: unknown flag: --strict\n"},
		{"validate a missing directory", []string{"validate", missing}, 1, "fleetd validate: " + missing + ": no such file or directory\n"},
		{"validate a missing file among others", []string{"validate", "../../manifests", missing}, 1, "fleetd validate: " + missing + ": no such file or directory\n"},
	})
}
