package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// asFleetdEnv makes the test binary run fleetd's main (see TestMain).
const asFleetdEnv = "FLEETD_TEST_AS_FLEETD"

// execFleetd runs fleetd as its own process — this test binary, which
// TestMain turns into fleetd — and returns its exit code and output.
func execFleetd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asFleetdEnv+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run fleetd %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// TestProcess_ExitCodes: the exit codes and messages the in-process tests
// check through run are the process's own.
func TestProcess_ExitCodes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args       []string
		code       int
		wantStderr string
	}{
		{[]string{"serve", "manifests/"}, 2, "fleetd serve: unexpected argument \"manifests/\"; serve takes no arguments: a file or directory is given with --manifests\nDid you mean: fleetd serve --manifests manifests/\n"},
		{[]string{"--bogus"}, 2, "fleetd: unknown flag: --bogus\nUsage: fleetd [flags]\n"},
		{[]string{"get"}, 2, "fleetd get: missing the resource type (members|profiles|tenants|nodes|events)\nUsage: fleetd get members|profiles|tenants|nodes|events [NAME] [flags]\n"},
		{[]string{"validate", "../../manifests"}, 0, ""},
		{[]string{"validate", "/nonexistent-dir"}, 1, "fleetd validate: /nonexistent-dir: no such file or directory\n"},
	} {
		code, _, stderr := execFleetd(t, tt.args...)
		if code != tt.code || stderr != tt.wantStderr {
			t.Errorf("fleetd %q: exit %d, stderr %q; want exit %d, %q", tt.args, code, stderr, tt.code, tt.wantStderr)
		}
	}
}
