package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// TestServe_SecondServeNamesTheLockHolder: a second `fleetd serve` on a
// state directory in use says who holds it — even when its --listen
// address is taken too, which is what a second serve with the same flags
// meets.
func TestServe_SecondServeNamesTheLockHolder(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	lock, err := statedir.At(state).Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, stdout, stderr := runCLI(t, "serve", "--herdr=sim", "--manifests", t.TempDir(), "--state-dir", state, "--listen", ln.Addr().String())
	want := "fleetd: state directory is in use by another fleetd: " + state + " is held by pid " + strconv.Itoa(os.Getpid()) +
		"; stop that fleetd or use another --state-dir\n"
	if code != 1 || stderr != want || stdout != "" {
		t.Errorf("second serve: exit %d, stdout %q, stderr %q; want exit 1, %q", code, stdout, stderr, want)
	}
}

// TestServe_ManifestsDirectoryMustExist: a --manifests that is missing or
// not a directory stops serve at start (it used to serve an empty fleet
// and say so in one log line).
func TestServe_ManifestsDirectoryMustExist(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "absent")
	file := filepath.Join(writeTree(t, map[string]string{"fleet.yaml": ""}), "fleet.yaml")
	for _, tt := range []struct{ name, dir, want string }{
		{"missing", missing, "fleetd: manifests directory: open " + missing + ": no such file or directory; create it, or point --manifests at your manifests\n"},
		{"a file", file, "fleetd: manifests directory: " + file + " is not a directory; point --manifests at the directory holding your manifests\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "serve", "--herdr=sim", "--manifests", tt.dir, "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0")
			if code != 1 || stderr != tt.want || stdout != "" {
				t.Errorf("serve --manifests %s: exit %d, stdout %q, stderr %q; want exit 1, %q", tt.dir, code, stdout, stderr, tt.want)
			}
		})
	}
}

// startServe runs `fleetd serve args...` until the test ends and returns
// its stdout and stderr as lines.
func startServe(t *testing.T, args ...string) (stdout, stderr *syncbuf.Lines) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncbuf.Lines{C: make(chan string, 256), Drop: true}, &syncbuf.Lines{C: make(chan string, 1024), Drop: true}
	cmd := newServeCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return stdout, stderr
}

// waitLine returns the next line of w that contains s.
func waitLine(t *testing.T, w *syncbuf.Lines, s string) string {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case line := <-w.C:
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout.C:
			t.Fatalf("no line containing %q", s)
		}
	}
}

// TestServe_BannerCommandsRunAsPrinted runs `make run`'s serve (the
// simulated herdr, the example fleet) and then every command its banner
// suggests, exactly as printed.
func TestServe_BannerCommandsRunAsPrinted(t *testing.T) {
	t.Setenv("ACME_FLEETD_TOKEN", "sim-demo-credential")
	state := t.TempDir()
	manifests, repo := copyExamples(t)
	out, _ := startServe(t, "--herdr=sim", "--sim-ready-delay", "10ms", "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0")
	waitLine(t, out, "In a second terminal, try:")
	var commands []string
	for line := waitLine(t, out, ""); strings.HasPrefix(line, "  "); line = waitLine(t, out, "") {
		commands = append(commands, strings.TrimPrefix(line, "  "))
	}
	if line, want := waitLine(t, out, "works in a git worktree"), "(builder works in a git worktree of "+repo+" on branch agents/builder:"; !strings.HasPrefix(line, want) {
		t.Errorf("banner says %q, want the worktree member named: %q", line, want)
	}
	exe, err := fleetdExecutable()
	if err != nil {
		t.Fatal(err)
	}
	if len(commands) != 3 {
		t.Fatalf("banner suggests %q, want get, describe and send", commands)
	}
	wantOut := []string{"docs-writer", "Name:         docs-writer", "echo: hello\n"}
	for i, c := range commands {
		words := strings.Fields(c)
		if words[0] != "fleetd" && words[0] != exe {
			t.Errorf("%q: runs %q, which is neither fleetd nor this binary", c, words[0])
		}
		if strings.ContainsAny(c, "<>") {
			t.Errorf("%q has a placeholder", c)
		}
		code, stdout, stderr := runCLI(t, words[1:]...)
		if code != 0 || !strings.Contains(stdout, wantOut[i]) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0 and %q", c, code, stdout, stderr, wantOut[i])
		}
	}
}

// TestServe_HerdrUnreachable: serve without a herdr warns, and `get` and
// `describe` show the members Unknown (HerdrUnavailable), not Pending or
// Ready with no reason; --log-level debug shows each herdr call and each
// reconcile's decision.
func TestServe_HerdrUnreachable(t *testing.T) {
	t.Parallel()
	manifests := writeTree(t, map[string]string{"fleet.yaml": `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: alpha}
spec: {profile: claude}
`})
	state := t.TempDir()
	out, logs := startServe(t, "--herdr-socket", filepath.Join(t.TempDir(), "no-herdr.sock"), "--manifests", manifests,
		"--state-dir", state, "--listen", "127.0.0.1:0", "--log-level", "debug")
	_, rest, _ := strings.Cut(waitLine(t, out, "fleetd is serving"), " on ")
	url, _, _ := strings.Cut(rest, " ")
	waitLine(t, logs, `level=DEBUG msg="herdr call" method=ping result=unavailable`)
	warn := waitLine(t, logs, "herdr is not reachable")
	if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "no-herdr.sock") {
		t.Errorf("warning %q: want a WARN naming the socket", warn)
	}
	// --log-level debug shows the reconcile's decision, after the status
	// it wrote.
	waitLine(t, logs, `level=DEBUG msg=reconciled member=alpha phase="" ready=Unknown reason=HerdrUnavailable`)
	client := []string{"--server", url, "--state-dir", state}
	code, stdout, stderr := runCLI(t, append([]string{"get", "members"}, client...)...)
	if code != 0 || !strings.Contains(stdout, "alpha   Unknown (HerdrUnavailable)") {
		t.Errorf("get members: exit %d, stdout %q, stderr %q; want alpha Unknown (HerdrUnavailable)", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, append([]string{"describe", "member", "alpha"}, client...)...)
	if code != 0 || !strings.Contains(stdout, "Ready           Unknown   HerdrUnavailable") || !regexp.MustCompile(`Phase: +Unknown \(HerdrUnavailable\)`).MatchString(stdout) {
		t.Errorf("describe member: exit %d, stdout %q, stderr %q; want Phase Unknown (HerdrUnavailable) and Ready Unknown HerdrUnavailable", code, stdout, stderr)
	}
}
