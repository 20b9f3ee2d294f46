package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRun_ACleanCloneStaysClean is issue 25's "done when", as a new
// user does it: in a clean clone (the repository's tracked files, one
// commit) with the port make run would take in use, `make run
// LISTEN=127.0.0.1:PORT` serves; every command its banner suggests runs as
// printed; a member applied and one deleted change nothing git tracks, and
// the build is not stamped -dirty; Ctrl-C ends make without an error.
func TestMakeRun_ACleanCloneStaysClean(t *testing.T) {
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make is not installed")
		}
		t.Skip("make is not installed; `make run` cannot be tried")
	}
	if testing.Short() {
		t.Skip("-short: builds fleetd in a clone")
	}
	clone := cleanClone(t)
	// A port of its own, as a user whose 8080 is taken picks one (what
	// serve says on a taken port: TestFirstHour_PortInUseSaysHowToPickAnother).
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()

	state, repo := t.TempDir(), filepath.Join(t.TempDir(), "demo-repo")
	cmd := exec.Command(makeTool, "run", "LISTEN="+listen, "DEMO_REPO="+repo)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "FLEETD_SERVER=", "FLEETD_TOKEN=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C goes to the whole group, as a terminal's does
	// The banner is read from stdout alone: a line fleetd logs (stderr)
	// while it prints the banner must not land between its lines.
	p := startCmd(t, cmd)
	next := func() string {
		select {
		case l, ok := <-p.stdout:
			if !ok {
				t.Fatalf("make run ended early:\n%s", p.output())
			}
			return l
		case <-time.After(3 * time.Minute):
			t.Fatalf("make run printed nothing more for 3 minutes:\n%s", p.output())
		}
		return ""
	}
	for !strings.HasPrefix(next(), "In a second terminal, try:") {
	}
	var commands []string
	for l := next(); strings.HasPrefix(l, "  "); l = next() {
		commands = append(commands, strings.TrimSpace(l))
	}
	if banner := p.output(); !strings.Contains(banner, "fleetd is serving "+filepath.Join(clone, "bin", "manifests")+" on http://"+listen) {
		t.Errorf("the banner does not say it serves the scratch copy on %s:\n%s", listen, banner)
	}
	if len(commands) < 3 {
		t.Fatalf("banner suggests %q", commands)
	}
	run := func(line string) string {
		t.Helper()
		c := exec.Command("sh", "-c", line)
		c.Dir = clone
		c.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "FLEETD_SERVER=", "FLEETD_TOKEN=")
		res, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, res)
		}
		return string(res)
	}
	for _, c := range commands {
		if !strings.Contains(c, "--server http://"+listen) {
			t.Errorf("%q does not reach the fleetd on %s", c, listen)
		}
		run(c)
	}
	// What a user tries next from the banner's commands: apply a member,
	// delete one of the examples.
	fleetd, flags := filepath.Join(clone, "bin", "fleetd"), " --server http://"+listen
	run(`printf 'apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: extra}\nspec: {profile: claude}\n' | ` + fleetd + " apply -f -" + flags)
	run(fleetd + " delete member docs-writer" + flags)
	run(fleetd + " apply -f manifests/docs-writer.yaml" + flags) // a re-applied example
	if status := gitIn(t, clone, "status", "--porcelain"); status != "" {
		t.Errorf("git status after trying the banner's commands:\n%s", status)
	}
	if v := run(fleetd + " version"); strings.Contains(v, "dirty") {
		t.Errorf("the build is stamped dirty: %s", v)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("make run did not stop on Ctrl-C:\n%s", p.output())
	}
	err = p.err
	text := p.output()
	// make passes the interrupt on to itself once its recipe has ended (a
	// shell then prints nothing); what it must not do is report the
	// recipe as failed or interrupted.
	var ee *exec.ExitError
	if (err != nil && !(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT)) || strings.Contains(text, "make: ***") {
		t.Errorf("Ctrl-C: make ended with %v:\n%s", err, text)
	}
	if !strings.Contains(text, "fleetd stopped, and the simulated herdr with it") {
		t.Errorf("Ctrl-C: no stop message:\n%s", text)
	}
}

// cleanClone is a new repository holding the tracked files of this one
// (as the working tree has them), committed once: what `git clone` gives
// a new user, with this change in it.
func cleanClone(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimSpace(gitIn(t, "../..", "ls-files", "-z")), "\x00") {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("../..", name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join("../..", name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, dir, "init", "-q")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "-c", "user.name=test", "-c", "user.email=test@fleetd.invalid", "commit", "-q", "-m", "clone")
	return dir
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
