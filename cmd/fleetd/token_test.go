package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetd token prints the primary token only to its owner: to a terminal
// with how to use it on another machine, into a pipe or a file only with
// --show (the bare token, nothing else), never from a state directory
// others may write or that holds none; and it says when the fleetd at
// --server does not take the token.
func TestToken_PrintsThePrimaryTokenOnlyToItsOwner(t *testing.T) {
	t.Parallel()
	f := startForConfig(t)
	token := readPrimaryToken(t, f.stateDir)
	terminal := func(stateDir string) (string, string, error) {
		var out, errOut bytes.Buffer
		o := &tokenOptions{terminal: func(io.Writer) bool { return true }}
		o.ioStreams = ioStreams{out: &out, errOut: &errOut}
		o.server, o.stateDir = f.info.URL, stateDir
		err := o.Run(context.Background())
		return out.String(), errOut.String(), err
	}

	code, stdout, stderr := runCLI(t, "token", "--state-dir", f.stateDir, "--server", f.info.URL)
	if code != 1 || strings.Contains(stdout, token) || !strings.Contains(stderr, "not a terminal") || !strings.Contains(stderr, "--show") {
		t.Errorf("token into a pipe: exit %d, stdout %q, stderr %q; want exit 1, no token, a word on --show", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "token", "--show", "--state-dir", f.stateDir, "--server", f.info.URL)
	if code != 0 || stdout != token+"\n" || stderr != "" {
		t.Errorf("token --show: exit %d, stdout %q, stderr %q; want exit 0 and the bare token", code, stdout, stderr)
	}
	// Into a pipe with no fleetd named: the bare token, no word on a
	// default address where nothing may run.
	if os.Getenv("FLEETD_SERVER") == "" {
		code, stdout, stderr = runCLI(t, "token", "--show", "--state-dir", f.stateDir)
		if code != 0 || stdout != token+"\n" || stderr != "" {
			t.Errorf("token --show without --server: exit %d, stdout %q, stderr %q; want exit 0 and the bare token alone", code, stdout, stderr)
		}
	}
	out, errOut, err := terminal(f.stateDir)
	if err != nil || !strings.Contains(out, token) || !strings.Contains(out, "export FLEETD_TOKEN='"+token+"'") ||
		!strings.Contains(out, "accepts it") || errOut != "" {
		t.Errorf("token to a terminal: %v, out:\n%s\nerr: %s", err, out, errOut)
	}

	// Another state directory's token, which that fleetd does not take.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "primary.token"), []byte("another-token-0123456789abcdefghijklmnopqrstuv\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := terminal(other); err != nil || strings.Contains(out, "accepts it") || !strings.Contains(errOut, "refuses the token") {
		t.Errorf("a token the fleetd refuses: %v, out:\n%s\nerr: %s", err, out, errOut)
	}
	// No token here: the node that minted the fleet's has it.
	code, stdout, stderr = runCLI(t, "token", "--show", "--state-dir", t.TempDir(), "--server", f.info.URL)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "node that minted it") {
		t.Errorf("token without a token file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A state directory others may write is not trusted.
	if err := os.Chmod(other, 0o770); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "token", "--show", "--state-dir", other, "--server", f.info.URL)
	if code != 1 || stdout != "" || !strings.Contains(stderr, other) {
		t.Errorf("token from a group-writable state directory: exit %d, stdout %q, stderr %q; want exit 1 naming it", code, stdout, stderr)
	}
}
