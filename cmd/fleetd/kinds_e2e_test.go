package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
)

// exampleManifests reads the example fleet, manifests/ (the files fleetd
// serve reads there): name → content.
func exampleManifests(t *testing.T) map[string]string {
	t.Helper()
	paths, err := decode.ManifestPaths(filepath.Join("..", "..", "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = string(b)
	}
	return files
}

// fleetdProcess runs the fleetd binary against the running fleetd, as a
// process of its own: exit code, stdout and stderr.
func (f *liveFleetd) fleetdProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return execFleetd(t, append(args, f.client...)...)
}

// `fleetd apply -f manifests/` — the example directory itself, Profiles,
// Tenant and Members — on the fleetd `make run` starts (serving that very
// directory) applies everything as unchanged and leaves every file as it
// was; diff finds nothing to change. Issue 23: apply refused the example
// directory because it holds Profiles and a Tenant.
func TestApply_TheExampleDirectoryOnTheFleetdThatServesIt(t *testing.T) {
	t.Parallel()
	files := exampleManifests(t)
	f := startFleetd(t, files)
	examples := filepath.Join("..", "..", "manifests")

	code, stdout, stderr := f.fleetdProcess(t, "apply", "-f", examples)
	want := "profile/claude unchanged\nprofile/codex unchanged\ntenant/acme unchanged\n" +
		"member/acme-triage unchanged\nmember/builder unchanged\nmember/docs-writer unchanged\nmember/reviewer unchanged\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Fatalf("fleetd apply -f manifests/: exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", code, stdout, want, stderr)
	}
	if code, stdout, stderr := f.fleetdProcess(t, "diff", "-f", examples); code != 0 || stdout != "" {
		t.Errorf("fleetd diff -f manifests/: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if diff := cmp.Diff(files, readTree(t, f.manifests)); diff != "" {
		t.Errorf("the served directory changed (-want +got):\n%s", diff)
	}
}

const mixedProfiles = `# What the team's members run.
apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec:
  harness: claude   # Claude Code
---
apiVersion: fleetd.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec: {url: https://fleet.acme.example/mcp, credentialEnv: ACME_FLEETD_TOKEN}
`

const mixedMembers = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: triage}
spec:
  profile: claude
  mcpTarget: {kind: tenant, tenantId: acme}
`

// apply, diff and delete -f take a directory of Members, Profiles and
// Tenants on the directory store: apply writes the Profile and Tenant
// before the Members that reference them, each to a file of its own,
// without defaults; diff compares every kind; delete refuses a Profile or
// Tenant a remaining Member references, and removes Members first. Issue
// 23: all three refused such a directory.
func TestApplyDiffDelete_MixedDirectory(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, nil)
	team := writeTree(t, map[string]string{"members.yaml": mixedMembers, "profiles.yaml": mixedProfiles})
	run := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, stdout, stderr := f.fleetdProcess(t, args...)
		if code != wantCode || stdout != wantOut || !strings.Contains(stderr, wantErr) || wantErr == "" && stderr != "" {
			t.Fatalf("fleetd %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr containing %q",
				strings.Join(args, " "), code, stdout, stderr, wantCode, wantOut, wantErr)
		}
	}

	code, stdout, _ := f.fleetdProcess(t, "diff", "-f", team)
	if code != 1 || !strings.HasPrefix(stdout, "--- live/profile/claude\n+++ desired/profile/claude\n") || !strings.Contains(stdout, "+++ desired/tenant/acme\n") ||
		!strings.Contains(stdout, "+  credentialEnv: ACME_FLEETD_TOKEN\n") || !strings.Contains(stdout, "+++ desired/member/triage\n") {
		t.Fatalf("diff of objects fleetd does not have: exit %d, stdout:\n%s", code, stdout)
	}

	run(0, "profile/claude created\ntenant/acme created\nmember/reviewer created\nmember/triage created\n", "", "apply", "-f", team)
	wantFiles := map[string]string{
		"profile-claude.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: claude\nspec:\n  harness: claude\n",
		"tenant-acme.yaml":    "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: acme\nspec:\n  url: https://fleet.acme.example/mcp\n  credentialEnv: ACME_FLEETD_TOKEN\n",
		"reviewer.yaml":       "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: reviewer\nspec:\n  profile: claude\n",
		"triage.yaml":         "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: triage\nspec:\n  profile: claude\n  mcpTarget:\n    kind: tenant\n    tenantId: acme\n",
	}
	if diff := cmp.Diff(wantFiles, readTree(t, f.manifests)); diff != "" {
		t.Fatalf("the manifests directory after apply (-want +got):\n%s", diff)
	}
	run(0, "profile/claude unchanged\ntenant/acme unchanged\nmember/reviewer unchanged\nmember/triage unchanged\n", "", "apply", "-f", team)
	run(0, "", "", "diff", "-f", team)
	// get -o yaml of Profiles and Tenants is a List that apply takes back.
	for _, kind := range []string{"profiles", "tenants"} {
		_, list, _ := f.run(t, "", "get", kind, "-o", "yaml")
		want := map[string]string{"profiles": "profile/claude unchanged\n", "tenants": "tenant/acme unchanged\n"}[kind]
		if code, stdout, stderr := f.run(t, list, "apply", "-f", "-"); code != 0 || stdout != want {
			t.Errorf("get %s -o yaml | apply -f -: exit %d, stdout %q, stderr:\n%s", kind, code, stdout, stderr)
		}
	}

	// A change to the Profile is written into its file, only that field.
	changed := filepath.Join(team, "profiles.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(mixedProfiles, "  harness: claude   # Claude Code\n", "  harness: claude   # Claude Code\n  args: [--model, opus]\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(1, "--- live/profile/claude\n+++ desired/profile/claude\n@@ -4,3 +4,6 @@\n   name: claude\n spec:\n   harness: claude\n+  args:\n+    - --model\n+    - opus\n", "", "diff", "-f", changed)
	run(0, "profile/claude configured\ntenant/acme unchanged\n", "", "apply", "-f", changed)
	if got, want := readTree(t, f.manifests)["profile-claude.yaml"], wantFiles["profile-claude.yaml"]+"  args:\n    - --model\n    - opus\n"; got != want {
		t.Errorf("profile-claude.yaml after the change:\n%s\nwant:\n%s", got, want)
	}

	// The Profile and Tenant alone: the members still reference them.
	run(1, "", "fleetd delete: profile/claude: conflict: delete Profile/claude: referenced by member/reviewer (spec.profile), member/triage (spec.profile); delete those members",
		"delete", "-f", changed)
	if _, ok := readTree(t, f.manifests)["tenant-acme.yaml"]; !ok {
		t.Fatal("a refused delete removed the tenant's file")
	}
	run(0, "member/reviewer deleted\nmember/triage deleted\ntenant/acme deleted\nprofile/claude deleted\n", "", "delete", "-f", team)
	if diff := cmp.Diff(map[string]string{}, readTree(t, f.manifests)); diff != "" {
		t.Errorf("the manifests directory after delete -f (-want +got):\n%s", diff)
	}
}
