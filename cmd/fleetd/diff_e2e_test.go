package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testerYAML = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: tester
spec:
  profile: codex
  workspace: api
  prompt: Run the test suite and report failures.
`

// TestDiffDryRunDelete drives diff, apply --dry-run, the get -o yaml |
// apply -f - round trip and delete -f against fleetd serve --herdr=sim,
// checking output, exit codes and the manifests directory.
func TestDiffDryRunDelete(t *testing.T) {
	f := startFleetd(t, map[string]string{"profiles.yaml": fleetProfile, "team.yaml": handWrittenReviewer,
		"stray.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: stray}\nspec: {harness: codex}\n"})
	tester := writeFile(t, "tester.yaml", testerYAML)
	check := func(t *testing.T, args []string, stdin string, wantCode int, wantOut, wantErr string) {
		t.Helper()
		code, stdout, stderr := f.run(t, stdin, args...)
		if code != wantCode {
			t.Errorf("fleetd %s: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, wantCode, stderr)
		}
		if diff := cmp.Diff(wantOut, stdout); diff != "" {
			t.Errorf("fleetd %s: stdout (-want +got):\n%s", strings.Join(args, " "), diff)
		}
		if diff := cmp.Diff(wantErr, stderr); diff != "" {
			t.Errorf("fleetd %s: stderr (-want +got):\n%s", strings.Join(args, " "), diff)
		}
	}
	noTesterFile := func(t *testing.T) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(f.manifests, "tester.yaml")); !os.IsNotExist(err) {
			t.Errorf("a dry run wrote tester.yaml (stat: %v)", err)
		}
	}

	// A member fleetd does not have: all new lines, exit 1.
	check(t, []string{"diff", "-f", tester}, "", 1, `--- live/member/tester
+++ desired/member/tester
@@ -0,0 +1,8 @@
+apiVersion: fleetd.dev/v1alpha1
+kind: Member
+metadata:
+  name: tester
+spec:
+  profile: codex
+  workspace: api
+  prompt: Run the test suite and report failures.
`, "")

	// Dry runs say what would happen and write nothing.
	check(t, []string{"apply", "-f", tester, "--dry-run=server"}, "", 0, "member/tester created (server dry run)\n", "")
	check(t, []string{"apply", "-f", tester, "--dry-run=client"}, "", 0, "member/tester created (dry run)\n", "")
	noTesterFile(t)
	missing := writeFile(t, "ghost.yaml", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: ghost}\nspec: {profile: nope}\n")
	check(t, []string{"apply", "-f", missing, "--dry-run=server"}, "", 1, "",
		"fleetd apply: member/ghost: invalid_spec: spec.profile: no Profile named \"nope\"; `fleetd get profiles` lists the operator's profiles\n")
	// The store's own checks run too: stray.yaml, the file a member named
	// stray would get, holds something else.
	stray := writeFile(t, "stray.yaml", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: stray}\nspec: {profile: codex}\n")
	if code, stdout, stderr := f.run(t, "", "apply", "-f", stray, "--dry-run=server"); code != 1 || stdout != "" ||
		!strings.Contains(stderr, "fleetd apply: member/stray: unavailable: write member stray: ") || !strings.Contains(stderr, "stray.yaml exists but does not define it") {
		t.Errorf("server dry run onto a taken file name: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	check(t, []string{"apply", "-f", tester, "--dry-run=maybe"}, "", 2, "",
		"fleetd apply: --dry-run: unknown value \"maybe\"; want none, server or client\nUsage: fleetd apply -f FILE|DIR|- [--dry-run=server|client] [flags]\n")

	// Applied, the same file shows no difference.
	check(t, []string{"apply", "-f", tester}, "", 0, "member/tester created\n", "")
	check(t, []string{"diff", "-f", tester}, "", 0, "", "")
	check(t, []string{"apply", "-f", tester, "--dry-run=client"}, "", 0, "member/tester unchanged (dry run)\n", "")

	// A change: the diff shows just it, a server dry run leaves the file.
	before := f.read(t, "tester.yaml")
	changed := writeFile(t, "tester.yaml", strings.Replace(testerYAML, "workspace: api", "workspace: qa", 1))
	check(t, []string{"diff", "-f", changed}, "", 1, `--- live/member/tester
+++ desired/member/tester
@@ -4,5 +4,5 @@
   name: tester
 spec:
   profile: codex
-  workspace: api
+  workspace: qa
   prompt: Run the test suite and report failures.
`, "")
	check(t, []string{"apply", "-f", changed, "--dry-run=server"}, "", 0, "member/tester configured (server dry run)\n", "")
	if got := f.read(t, "tester.yaml"); got != before {
		t.Errorf("a server dry run changed tester.yaml:\n%s", got)
	}

	// get -o yaml of several members is a List that apply takes back.
	code, list, stderr := f.run(t, "", "get", "members", "-o", "yaml")
	if code != 0 || !strings.HasPrefix(list, "apiVersion: v1\nitems:\n") || !strings.HasSuffix(list, "kind: List\n") || !strings.Contains(list, "status:") {
		t.Fatalf("get members -o yaml: exit %d, stderr %s, output:\n%s", code, stderr, list)
	}
	check(t, []string{"apply", "-f", "-"}, list, 0, "member/coder unchanged\nmember/reviewer unchanged\nmember/tester unchanged\n", "")
	check(t, []string{"diff", "-f", "-"}, list, 0, "", "")
	if diff := cmp.Diff(handWrittenReviewer, f.read(t, "team.yaml")); diff != "" {
		t.Errorf("the round trip touched team.yaml (-want +got):\n%s", diff)
	}

	// delete -f: what the files define; one not found is reported, the
	// rest are deleted.
	both := writeFile(t, "both.yaml", testerYAML+"---\n"+"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: ghost}\nspec: {profile: codex}\n")
	check(t, []string{"delete", "-f", both}, "", 1, "member/tester deleted\n", "fleetd delete: member \"ghost\" not found\n")
	check(t, []string{"delete", "-f", both, "--ignore-not-found"}, "", 0, "", "")
	if _, err := os.Stat(filepath.Join(f.manifests, "tester.yaml")); !os.IsNotExist(err) {
		t.Errorf("delete -f left tester.yaml (stat: %v)", err)
	}
	check(t, []string{"delete", "-f", both, "member", "x"}, "", 2, "",
		"fleetd delete: -f takes no resource or name arguments, got 2\nUsage: fleetd delete member NAME... | delete -f FILE|DIR|- [flags]\n")

	// Errors exit 2: invalid input, and no fleetd to compare with.
	bad := writeFile(t, "bad.yaml", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: bad}\nspec: {profile: codex, transport: http}\n")
	if code, _, stderr := f.run(t, "", "diff", "-f", bad); code != 2 || !strings.Contains(stderr, "bad.yaml:4: spec.transport: ") {
		t.Errorf("diff of an invalid file: exit %d, stderr:\n%s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "diff", "-f", tester, "--server", "http://127.0.0.1:1", "--state-dir", f.client[3]); code != 2 || !strings.Contains(stderr, "cannot reach fleetd") {
		t.Errorf("diff without fleetd: exit %d, stderr:\n%s", code, stderr)
	}
}
