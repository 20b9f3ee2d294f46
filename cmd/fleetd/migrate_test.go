package main

// The tests of `fleetd migrate`: they go away with it (this file,
// migrate.go and package internal/migrate, whose testdata holds the legacy
// example they run on).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMigrate_UsageAndDirectoryErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "absent")
	checkUsageErrors(t, []usageCase{
		{"migrate without a directory", []string{"migrate", "--dry-run"}, 2, "fleetd migrate: want exactly one directory, got 0 arguments\nUsage: fleetd migrate DIR"},
		{"migrate with an unknown flag", []string{"migrate", "-n", "."}, 2, "fleetd migrate: unknown shorthand flag: 'n' in -n\n"},
		{"migrate a missing directory", []string{"migrate", missing}, 1, "fleetd migrate: read manifests directory: open " + missing + ": no such file or directory\n"},
	})
}

func TestValidate_LegacyExamplePointsAtMigrate(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "validate", "../../internal/migrate/testdata/legacy")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s", code, stdout)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one problem per legacy member (2), got:\n%s", stdout)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, filepath.Join("../../internal/migrate/testdata/legacy", "fleet.yaml")+":") ||
			!strings.Contains(l, ": spec.mcpTransport: ") || !strings.Contains(l, "fleetd migrate") {
			t.Errorf("problem %q does not name file:line, spec.mcpTransport and fleetd migrate", l)
		}
	}
	if want := "fleetd validate: 2 problems in ../../internal/migrate/testdata/legacy\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
}

func TestMigrate_FixesTheLegacyExampleOnce(t *testing.T) {
	t.Parallel()
	dir := copyTree(t, "../../internal/migrate/testdata/legacy")
	original := readTree(t, dir)
	fleet := filepath.Join(dir, "fleet.yaml")

	code, stdout, stderr := runCLI(t, "migrate", dir, "--dry-run")
	if code != 0 || stderr != "" {
		t.Fatalf("dry run: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 3 ||
		!strings.HasPrefix(lines[0], fleet+":25: member acme-triage: spec.mcpTransport ") ||
		!strings.HasSuffix(lines[0], " → spec.mcpTarget {kind: tenant, tenantId: acme}, spec.transport streamable-http") ||
		lines[1] != fleet+":36: member builder: spec.mcpTransport {mode: resident} → removed (no spec.mcpTarget means resident)" ||
		lines[2] != "dry run: 2 members in 1 file would change; nothing was written" {
		t.Errorf("dry run printed:\n%s", stdout)
	}
	if diff := cmp.Diff(original, readTree(t, dir)); diff != "" {
		t.Fatalf("dry run changed files (-before +after):\n%s", diff)
	}
	if code, _, _ := runCLI(t, "validate", dir); code != 1 {
		t.Fatalf("validate before migration: exit %d, want 1", code)
	}

	code, stdout, stderr = runCLI(t, "migrate", dir)
	if code != 0 || stderr != "" {
		t.Fatalf("migrate: exit %d, stderr %q", code, stderr)
	}
	if want := "migrated 2 members in 1 file; check them with: fleetd validate " + dir + "\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("migrate printed:\n%s\nwant it to end with %q", stdout, want)
	}
	migrated := readTree(t, dir)
	if !strings.Contains(migrated["fleet.yaml"], "  # Work for acme, through its gateway.\n  mcpTarget:\n") {
		t.Errorf("the comment above the legacy field was not kept:\n%s", migrated["fleet.yaml"])
	}

	code, stdout, _ = runCLI(t, "validate", dir)
	if want := dir + ": 4 objects valid (2 Members, 1 Profile, 1 Tenant)\n"; code != 0 || stdout != want {
		t.Errorf("validate after migration: exit %d, stdout %q; want 0, %q", code, stdout, want)
	}

	code, stdout, _ = runCLI(t, "migrate", dir)
	if want := dir + ": nothing to migrate\n"; code != 0 || stdout != want {
		t.Errorf("second migrate: exit %d, stdout %q; want 0, %q", code, stdout, want)
	}
	if diff := cmp.Diff(migrated, readTree(t, dir)); diff != "" {
		t.Errorf("second migrate changed files (-first +second):\n%s", diff)
	}
}

func TestMigrate_RefusesWhatItCannotRewriteAndWritesNothing(t *testing.T) {
	t.Parallel()
	bad, err := os.ReadFile("../../internal/migrate/testdata/errors/unknown-mode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	good := readTree(t, "../../internal/migrate/testdata/legacy")["fleet.yaml"]
	dir := writeTree(t, map[string]string{"a-good.yaml": good, "b-bad.yaml": string(bad)})

	code, stdout, stderr := runCLI(t, "migrate", dir)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := filepath.Join(dir, "b-bad.yaml") + ":7: spec.mcpTransport.mode: unknown legacy mode"; !strings.HasPrefix(stdout, want) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("stdout = %q, want one problem starting %q", stdout, want)
	}
	if want := "fleetd migrate: 1 problem in " + dir + "; nothing was written\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	if got := readTree(t, dir); got["a-good.yaml"] != good || got["b-bad.yaml"] != string(bad) {
		t.Error("a file was written although migrate refused")
	}
}
