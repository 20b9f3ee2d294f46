package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// run runs the CLI with stdin against the fleetd.
func (f *liveFleetd) run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIIn(t, stdin, append(args, f.client...)...)
}

func (f *liveFleetd) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.manifests, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeFile writes contents to a new file in a temporary directory and
// returns its path.
func writeFile(t *testing.T, name, contents string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(contents), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const fleetProfile = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: codex}
spec: {harness: codex}
`

// handWrittenReviewer is an operator's file: comments, an order of its
// own, a block prompt, and a second document.
const handWrittenReviewer = `# The reviewer reads every change before it lands.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer
  labels:
    team: core   # who to ask
spec:
  workspace: api          # the herdr workspace
  profile: claude
  prompt: |
    Review every change.

    Be kind.
---
# A second member in the same file.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: coder}
spec: {profile: codex}
`

// TestApply_KeepsTheOperatorsFile applies Members that live in a
// hand-written manifest: an equal definition leaves the file's bytes alone
// and prints unchanged, a change edits only the changed field (comments,
// order, the other document kept) and no default is ever written.
func TestApply_KeepsTheOperatorsFile(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"profiles.yaml": fleetProfile, "team.yaml": handWrittenReviewer})

	// The same reviewer, written differently and with its defaults
	// spelled out, and as `get -o yaml` prints it.
	same := writeFile(t, "reviewer.yaml", `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer, labels: {team: core}}
spec:
  profile: claude
  workspace: api
  transport: streamable-http
  mcpTarget: {kind: resident}
  prompt: "Review every change.\n\nBe kind.\n"
`)
	for _, args := range [][]string{{"apply", "-f", same}} {
		code, stdout, stderr := f.run(t, "", args...)
		if code != 0 || stdout != "member/reviewer unchanged\n" {
			t.Fatalf("fleetd %v: exit %d, stdout %q; stderr:\n%s", args, code, stdout, stderr)
		}
	}
	_, yamlOut, stderr := f.run(t, "", "get", "members", "reviewer", "-o", "yaml")
	if code, stdout, _ := f.run(t, yamlOut, "apply", "-f", "-"); code != 0 || stdout != "member/reviewer unchanged\n" {
		t.Fatalf("get -o yaml | apply -f -: exit %d, stdout %q; get's stderr:\n%s", code, stdout, stderr)
	}
	if diff := cmp.Diff(handWrittenReviewer, f.read(t, "team.yaml")); diff != "" {
		t.Fatalf("unchanged apply touched the file (-want +got):\n%s", diff)
	}

	changed := writeFile(t, "reviewer.yaml", `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer, labels: {team: core, tier: two}}
spec: {profile: claude, workspace: web, prompt: "Review every change.\n\nBe kind.\n"}
`)
	code, stdout, stderr := f.run(t, "", "apply", "-f", changed)
	if code != 0 || stdout != "member/reviewer configured\n" {
		t.Fatalf("apply of a change: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	want := `# The reviewer reads every change before it lands.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer
  labels:
    team: core   # who to ask
    tier: two
spec:
  workspace: web          # the herdr workspace
  profile: claude
  prompt: |
    Review every change.

    Be kind.
---
# A second member in the same file.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: coder}
spec: {profile: codex}
`
	if diff := cmp.Diff(want, f.read(t, "team.yaml")); diff != "" {
		t.Errorf("apply of a change (-want +got):\n%s", diff)
	}

	// A new member's file holds what it says, not the defaults.
	fresh := writeFile(t, "triage.yaml", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: triage}\nspec: {profile: codex, transport: streamable-http}\n")
	if code, stdout, stderr := f.run(t, "", "apply", "-f", fresh); code != 0 || stdout != "member/triage created\n" {
		t.Fatalf("apply of a new member: exit %d, stdout %q; stderr:\n%s", code, stdout, stderr)
	}
	if diff := cmp.Diff("apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: triage\nspec:\n  profile: codex\n", f.read(t, "triage.yaml")); diff != "" {
		t.Errorf("new member's file (-want +got):\n%s", diff)
	}
}
