package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
)

const zeroDurationsProfile = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec:
  harness: claude
  startupTimeout: 0s
  toolTimeout: 0s
`

// TestDurations_ZeroIsAnError: a timeout written as 0s is an error —
// in validate, and in the store serve reads (a bridge_spawn of a member
// of that Profile finds no Profile rather than one quietly defaulted) —
// never "the default", which only leaving the field out gives.
func TestDurations_ZeroIsAnError(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{"profiles.yaml": zeroDurationsProfile})
	file := filepath.Join(dir, "profiles.yaml")
	want := []string{
		file + ":6: spec.startupTimeout: 0s out of range; want more than 3s and at most 5m0s (0s is not the default: leave the field out for 1m0s)",
		file + ":7: spec.toolTimeout: 0s out of range; want more than 0s (0s is not the default: leave the field out for 15m0s)",
	}
	code, stdout, stderr := runCLI(t, "validate", dir)
	if code != 1 || stdout != strings.Join(want, "\n")+"\n" || stderr != "fleetd validate: 2 problems in "+dir+"\n" {
		t.Errorf("validate: exit %d, stdout %q, stderr %q; want exit 1, %q", code, stdout, stderr, want)
	}

	st, err := dirstore.New(dir, &dirstore.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if len(snap.Profiles) != 0 {
		t.Errorf("serve's store loaded the profile: %+v", snap.Profiles)
	}
	if got := snap.Errors.Error(); !strings.Contains(got, want[0]) || !strings.Contains(got, want[1]) {
		t.Errorf("serve's store reports %q, want both of %q", got, want)
	}
}

// TestDurations_ServeFlags: every duration flag of serve refuses a zero or
// negative value (0 would quietly be the default) with exit 2;
// --sim-ready-delay takes 0 (ready at once).
func TestDurations_ServeFlags(t *testing.T) {
	t.Parallel()
	var flags []string
	for _, line := range strings.Split(newServeCmd().Flags().FlagUsages(), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "duration" {
			flags = append(flags, strings.TrimPrefix(f[0], "--"))
		}
	}
	if len(flags) < 7 {
		t.Fatalf("found %d duration flags in serve's usage: %q", len(flags), flags)
	}
	for _, name := range flags {
		values := []string{"-1s"}
		if name != "sim-ready-delay" {
			values = append(values, "0", "0s")
		}
		for _, v := range values {
			code, stdout, stderr := runCLI(t, "serve", "--"+name, v)
			if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "fleetd serve: --"+name+" ") {
				t.Errorf("serve --%s %s: exit %d, stdout %q, stderr %q; want a usage error", name, v, code, stdout, stderr)
			}
		}
	}
}
