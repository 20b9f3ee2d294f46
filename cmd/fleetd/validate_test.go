package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// validate reads the files fleetd serve reads and refuses the ones it
// refuses, with the same errors: a named pipe, a directory or a link to a
// device named like a manifest, and a file over --max-manifest-bytes, are
// problems (they used to be left out in silence, or read whole).
func TestValidate_ReportsFilesFleetdWillNotRead(t *testing.T) {
	t.Parallel()
	profile := "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"
	big := strings.Replace(profile, "{name: claude}", "{name: big}", 1) + "# " + strings.Repeat("x", 200) + "\n"
	dir := writeTree(t, map[string]string{"profile.yaml": profile, "big.yaml": big})
	at := func(name string) string { return filepath.Join(dir, name) }
	if err := syscall.Mkfifo(at("x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", at("z.yaml")); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(t, "validate", "--max-manifest-bytes", "150", dir)
		done <- result{code, stdout, stderr}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		// Release a validate stuck opening the pipe, then fail.
		if fd, err := syscall.Open(at("x.yaml"), syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = syscall.Close(fd)
		}
		t.Fatal("validate blocked on a named pipe")
	}
	const tail = "; skipped: fleetd reads only regular files and symbolic links to them"
	want := strings.Join([]string{
		at("big.yaml") + fmt.Sprintf(": file is %d bytes, over the limit of 150 bytes on a manifest file; skipped: split it, or raise --max-manifest-bytes", len(big)),
		at("sub.yaml") + ": not a regular file but a directory" + tail,
		at("x.yaml") + ": not a regular file but a named pipe (FIFO)" + tail,
		at("z.yaml") + ": a symbolic link to /dev/zero, which is a character device, not a regular file" + tail,
	}, "\n") + "\n"
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if wantErr := "fleetd validate: 4 problems in " + dir + "\n"; r.stderr != wantErr {
		t.Errorf("stderr = %q, want %q", r.stderr, wantErr)
	}

	// At the default limit (4 MiB) big.yaml is fine.
	code, stdout, _ := runCLI(t, "validate", dir)
	if code != 1 || strings.Contains(stdout, "big.yaml") {
		t.Errorf("at the default limit: exit %d, stdout:\n%s", code, stdout)
	}
}

func TestMaxManifestBytes_UsageErrors(t *testing.T) {
	t.Parallel()
	checkUsageErrors(t, []usageCase{
		{"validate with a zero limit", []string{"validate", "--max-manifest-bytes", "0", "."}, 2, "fleetd validate: invalid argument \"0\" for \"--max-manifest-bytes\" flag: want a positive number of bytes, optionally with KiB, MiB or GiB (e.g. 64MiB), got \"0\"\n"},
		{"validate with a word", []string{"validate", "--max-manifest-bytes", "lots", "."}, 2, "fleetd validate: invalid argument \"lots\" for \"--max-manifest-bytes\" flag: want a positive number of bytes, optionally with KiB, MiB or GiB (e.g. 64MiB), got \"lots\"\n"},
		{"validate with a decimal unit", []string{"validate", "--max-manifest-bytes", "4MB", "."}, 2, "fleetd validate: invalid argument \"4MB\" for \"--max-manifest-bytes\" flag: want a positive number of bytes, optionally with KiB, MiB or GiB (e.g. 64MiB), got \"4MB\"\n"},
		{"serve with a negative limit", []string{"serve", "--max-manifest-bytes", "-1"}, 2, "fleetd serve: invalid argument \"-1\" for \"--max-manifest-bytes\" flag: want a positive number of bytes, optionally with KiB, MiB or GiB (e.g. 64MiB), got \"-1\"\n"},
	})
}

// `fleetd serve --max-manifest-bytes` reaches the watcher: a file over the
// limit is skipped, and the log says which and why.
func TestServe_MaxManifestBytesFlag(t *testing.T) {
	t.Parallel()
	profile := "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n# " + strings.Repeat("x", 200) + "\n"
	manifests := writeTree(t, map[string]string{"profile.yaml": profile})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &syncbuf.Lines{C: make(chan string, 64), Drop: true}
	cmd := newServeCmd()
	cmd.SetArgs([]string{"--herdr=sim", "--manifests", manifests, "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--max-manifest-bytes", "150", "--log-level", "error"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(logs)
	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(serveCtx) }()
	want := fmt.Sprintf("%s: file is %d bytes, over the limit of 150 bytes on a manifest file", filepath.Join(manifests, "profile.yaml"), len(profile))
	for found := false; !found; {
		select {
		case line := <-logs.C:
			found = strings.Contains(line, want)
		case err := <-done:
			t.Fatalf("serve ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("serve never logged %q", want)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}
