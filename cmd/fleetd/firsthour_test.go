package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/mcp"
)

// The first hour of a new user (issue 25), each point through the fleetd
// binary as its own process, typed the way a user types it.

// proc is fleetd run as its own process that keeps running: its output
// line by line as it comes.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr chan string // closed at the end of the stream
	mu             sync.Mutex
	all            strings.Builder // both streams, for failure messages
	done           chan struct{}   // closed once the process exited
	err            error           // cmd.Wait's, once done
}

// startProc starts fleetd args as a process that the test stops (SIGKILL)
// at its end unless it ended before.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv is startProc with env (NAME=VALUE) added to the test's
// environment: a parallel test cannot set its own (t.Setenv).
func startProcEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asFleetdEnv+"=1"), env...)
	return startCmd(t, cmd)
}

// startCmd starts cmd and reads its output line by line; the test kills
// it (its whole process group when it leads one) at its end unless it
// ended before.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stdout: make(chan string, 1024), stderr: make(chan string, 4096), done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	for _, s := range []struct {
		r  io.Reader
		ch chan string
	}{{out, p.stdout}, {errOut, p.stderr}} {
		readers.Go(func() {
			defer close(s.ch)
			lines := bufio.NewScanner(s.r)
			for lines.Scan() {
				p.mu.Lock()
				p.all.WriteString(lines.Text() + "\n")
				p.mu.Unlock()
				select {
				case s.ch <- lines.Text():
				default: // nobody reads this stream: keep the text in all
				}
			}
		})
	}
	go func() {
		readers.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if a := cmd.SysProcAttr; a != nil && a.Setpgid {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		} else {
			_ = cmd.Process.Kill()
		}
		<-p.done
	})
	return p
}

// output is everything the process printed so far.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

// waitFor returns the first line of ch from now on that matches re.
func (p *proc) waitFor(t *testing.T, ch chan string, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("fleetd %q ended without a line matching %s; it printed:\n%s", p.cmd.Args[1:], re, p.output())
			}
			if rx.MatchString(line) {
				return line
			}
		case <-timeout.C:
			t.Fatalf("fleetd %q printed no line matching %s in a minute:\n%s", p.cmd.Args[1:], re, p.output())
		}
	}
}

// interrupt sends Ctrl-C and returns the exit code.
func (p *proc) interrupt(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("fleetd %q did not stop on Ctrl-C:\n%s", p.cmd.Args[1:], p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// claudeProfile is a Profile named claude, a document of a manifest.
const claudeProfile = "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n"

// memberDoc is a Member document with spec written in YAML's flow style.
func memberDoc(name, spec string) string {
	return "---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec: " + spec + "\n"
}

// firstHourFleet is claude and one member of it, reviewer.
var firstHourFleet = claudeProfile + memberDoc("reviewer", "{profile: claude}")

// TestFirstHour_PortInUseSaysHowToPickAnother: 1. a taken port is an error
// that says how to pick another address, with no INFO "stopped" line
// before it as if fleetd had started.
func TestFirstHour_PortInUseSaysHowToPickAnother(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	code, stdout, stderr := execFleetd(t, "serve", "--herdr=sim", "--manifests", writeTree(t, map[string]string{"f.yaml": firstHourFleet}),
		"--state-dir", t.TempDir(), "--listen", addr)
	want := regexp.MustCompile(`^fleetd serve: ` + regexp.QuoteMeta(addr) + ` is in use by another program \(another fleetd\?\): pick a free address with --listen, ` +
		`e\.g\. --listen (127\.0\.0\.1:\d+) \(make run LISTEN=(127\.0\.0\.1:\d+)\)\n$`)
	m := want.FindStringSubmatch(stderr)
	if code != 1 || stdout != "" || m == nil || m[1] != m[2] || m[1] == addr {
		t.Errorf("serve on a taken port: exit %d, stdout %q, stderr %q; want exit 1 and only %s", code, stdout, stderr, want)
	}
}

// TestFirstHour_SimStopsHonestlyAndRestartsFromZero: 7. on --herdr=sim the
// stop message promises no adoption (the simulated herdr stops with
// fleetd), and a restart of the demo creates its members afresh instead
// of counting a restart of each.
func TestFirstHour_SimStopsHonestlyAndRestartsFromZero(t *testing.T) {
	t.Parallel()
	manifests, state := writeTree(t, map[string]string{"f.yaml": firstHourFleet}), t.TempDir()
	for run := range 2 {
		p := startProc(t, "serve", "--herdr=sim", "--sim-ready-delay", "10ms", "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0")
		banner := p.waitFor(t, p.stdout, `^fleetd is serving `)
		url := regexp.MustCompile(`on (http://\S+) `).FindStringSubmatch(banner)[1]
		p.waitFor(t, p.stderr, `msg="member phase changed" member=reviewer from=Starting to=Ready`)
		code, stdout, stderr := execFleetd(t, "get", "members", "--server", url, "--state-dir", state)
		if row := `(?m)^reviewer\s+Ready\s+\S+\s+w\d+:p\d+\s+0\s`; code != 0 || !regexp.MustCompile(row).MatchString(stdout) {
			t.Errorf("run %d: get members: exit %d, stdout:\n%s\nstderr %s; want reviewer Ready with 0 restarts", run+1, code, stdout, stderr)
		}
		if code := p.interrupt(t); code != 0 {
			t.Errorf("run %d: Ctrl-C: exit %d", run+1, code)
		}
		out := p.output()
		if !strings.Contains(out, "fleetd stopped, and the simulated herdr with it: its agents are gone; the next start creates them again\n") || strings.Contains(out, "adopted") {
			t.Errorf("run %d: the stop says:\n%s\nwant the simulated herdr's agents gone, no adoption", run+1, out)
		}
		if strings.Contains(out, "recreating (restart") {
			t.Errorf("run %d counted a restart:\n%s", run+1, out)
		}
	}
}

// TestFirstHour_ATypoInANewManifestIsVisible: 4. a new manifest with a typo
// defines nothing; get says so on the error stream (its output stays what
// -o asked for), and describe, get and send of the member it declares name
// the file and its errors.
func TestFirstHour_ATypoInANewManifestIsVisible(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"f.yaml": firstHourFleet,
		"typo.yaml":   "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: typo}\nspec: {profile: claude, transport: http}\n",
		"broken.yaml": "kind: Member\nmetadata: {name: [\n"})
	f.waitReady(t, "reviewer")
	dir, err := filepath.Abs(f.manifests)
	if err != nil {
		t.Fatal(err)
	}
	note := "2 manifests have errors: run `fleetd validate " + dir + "`\n"
	for _, args := range [][]string{{"get", "members"}, {"get", "members", "-o", "name"}, {"get", "profiles"}} {
		code, stdout, stderr := execFleetd(t, append(args, f.client...)...)
		if code != 0 || stderr != note || strings.Contains(stdout, "typo") {
			t.Errorf("fleetd %s: exit %d, stdout %q, stderr %q; want exit 0 and %q on stderr", strings.Join(args, " "), code, stdout, stderr, note)
		}
	}
	typoErr := "  " + filepath.Join(dir, "typo.yaml") + `:4: spec.transport: unknown value "http"; want stdio or streamable-http` + "\n"
	for _, verb := range [][]string{{"describe", "member", "typo"}, {"get", "members", "typo"}, {"send", "typo", "hello"}} {
		code, stdout, stderr := execFleetd(t, append(verb, f.client...)...)
		want := "fleetd " + verb[0] + `: no member with name, pane id, terminal id or session id "typo"; ` +
			"`fleetd get members --server " + f.info.URL + " --state-dir " + f.stateDir + "` lists them\n" +
			filepath.Join(dir, "typo.yaml") + " declares member typo but has 1 error, so fleetd has not created it; once the file is fixed fleetd reads it again:\n" + typoErr
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("fleetd %s: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", strings.Join(verb, " "), code, stdout, stderr, want)
		}
	}
	// A syntax error cannot say what it declares: the file named after the
	// member is named.
	code, _, stderr := execFleetd(t, append([]string{"describe", "member", "broken"}, f.client...)...)
	if code != 1 || !strings.Contains(stderr, "\n"+filepath.Join(dir, "broken.yaml")+" declares member broken but has 1 error") {
		t.Errorf("describe member broken: exit %d, stderr:\n%s\nwant broken.yaml named", code, stderr)
	}
}

// TestFirstHour_GetEvents: 4. `fleetd get events` lists every member's
// recent events, --for member/NAME one's, -o json an EventList, and -w
// follows them as they happen.
func TestFirstHour_GetEvents(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"f.yaml": firstHourFleet + memberDoc("tester", "{profile: claude}")})
	f.waitReady(t, "reviewer", "tester")
	code, stdout, stderr := execFleetd(t, append([]string{"get", "events"}, f.client...)...)
	rows := regexp.MustCompile(`(?m)^\d+s\s+Normal\s+Started\s+member/(reviewer|tester)\s+agent claude started in pane w\d+:p\d+ \(tab w\d+:t\d+\)$`).FindAllString(stdout, -1)
	if code != 0 || !regexp.MustCompile(`^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE\n`).MatchString(stdout) || len(rows) != 2 {
		t.Errorf("get events: exit %d, stdout:\n%s\nstderr %s; want a table with both members' Started", code, stdout, stderr)
	}
	code, stdout, _ = execFleetd(t, append([]string{"get", "events", "--for", "member/tester", "-o", "json"}, f.client...)...)
	var list mcp.EventList
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || list.Kind != "EventList" || len(list.Items) == 0 {
		t.Fatalf("get events --for member/tester -o json: exit %d, %v:\n%s", code, err, stdout)
	}
	for _, e := range list.Items {
		if e.Member != "tester" {
			t.Errorf("--for member/tester listed an event of %s", e.Member)
		}
	}
	code, _, stderr = execFleetd(t, append([]string{"get", "events", "--for", "pod/x"}, f.client...)...)
	if code != 2 || !strings.Contains(stderr, "--for pod/x: want member/NAME") {
		t.Errorf("--for pod/x: exit %d, stderr %q; want a usage error", code, stderr)
	}

	w := startProc(t, append([]string{"get", "events", "-w", "--for", "member/newbie"}, f.client...)...)
	applied := writeTree(t, map[string]string{"newbie.yaml": memberDoc("newbie", "{profile: claude}")})
	// The watch is open once it answers; an event before that is in its
	// initial list anyway.
	if code, _, stderr := execFleetd(t, append([]string{"apply", "-f", applied}, f.client...)...); code != 0 {
		t.Fatalf("apply: exit %d, %s", code, stderr)
	}
	w.waitFor(t, w.stdout, `^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$`)
	w.waitFor(t, w.stdout, `^\d+s\s+Normal\s+Started\s+member/newbie\s+agent claude started`)
	w.interrupt(t) // Ctrl-C ends it, as it does get members -w
}

// TestFirstHour_KindMissingAndFlagTypos: 6. `describe reviewer` says the
// kind is missing and suggests the command meant; a mistyped flag gets
// the flag meant.
func TestFirstHour_KindMissingAndFlagTypos(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"f.yaml": firstHourFleet})
	flags := " --server " + f.info.URL + " --state-dir " + f.stateDir
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "reviewer"}, "fleetd describe: missing the resource type: \"reviewer\" is not one of member, profile, tenant or node\n" +
			"Did you mean: fleetd describe member reviewer" + flags + "?\n"},
		{[]string{"describe", "claude"}, "fleetd describe: missing the resource type: \"claude\" is not one of member, profile, tenant or node\n" +
			"Did you mean: fleetd describe profile claude" + flags + "?\n"},
		{[]string{"describe", "nothing"}, "fleetd describe: missing the resource type: \"nothing\" is not one of member, profile, tenant or node\n" +
			"Usage: fleetd describe member|profile|tenant|node NAME [flags]\n"},
		{[]string{"get", "reviewer"}, "fleetd get: unknown resource type \"reviewer\"; fleetd serves: members, profiles, tenants, nodes or events\n" +
			"Did you mean: fleetd get members reviewer" + flags + "?\n"},
		{[]string{"get", "members", "--sever", "x"}, "fleetd get: unknown flag: --sever\nDid you mean --server?\n"},
		{[]string{"describe", "member", "reviewer", "--stat-dir", "x"}, "fleetd describe: unknown flag: --stat-dir\nDid you mean --state-dir?\n"},
	} {
		code, stdout, stderr := execFleetd(t, append(tt.args, f.client...)...)
		if code != 2 || stdout != "" || stderr != tt.want {
			t.Errorf("fleetd %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and:\n%s", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
		}
	}
}

// TestFirstHour_ValidateFilesAndDirectories: 6. validate takes a file,
// several, and files with directories, checked as one set; a reference a
// lone file leaves unresolved is a note, not a failure.
func TestFirstHour_ValidateFilesAndDirectories(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
		"profiles.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n",
		"member.yaml":   "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: reviewer}\nspec: {profile: claude}\n",
	})
	loose := writeTree(t, map[string]string{
		"typo.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: typo}\nspec: {profile: claude, transport: http}\n",
		"dup.yaml":  "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: reviewer}\nspec: {profile: claude}\n",
	})
	member, profiles := filepath.Join(dir, "member.yaml"), filepath.Join(dir, "profiles.yaml")
	typo, dup := filepath.Join(loose, "typo.yaml"), filepath.Join(loose, "dup.yaml")
	for _, tt := range []struct {
		name                 string
		args                 []string
		code                 int
		wantStdout, wantErrs string
	}{
		{"a file", []string{member}, 0, member + ": 1 object valid (1 Member)\n",
			"fleetd validate: note: " + member + `:4: spec.profile: no Profile "claude" in ` + member + "; add one, or fix the name\n"},
		{"two files", []string{member, profiles}, 0, member + ", " + profiles + ": 2 objects valid (1 Member, 1 Profile)\n", ""},
		{"a directory", []string{dir}, 0, dir + ": 2 objects valid (1 Member, 1 Profile)\n", ""},
		{"a directory and a file in it", []string{dir, member}, 0, dir + ", " + member + ": 2 objects valid (1 Member, 1 Profile)\n", ""},
		{"a file with a typo", []string{typo}, 1, typo + `:4: spec.transport: unknown value "http"; want stdio or streamable-http` + "\n",
			"fleetd validate: 1 problem in " + typo + "\n"},
		{"a directory and a file defining the same member", []string{dir, dup}, 1,
			dup + `:3: metadata.name: duplicate Member "reviewer"; already defined at ` + member + ":3\n", "fleetd validate: 1 problem in " + dir + ", " + dup + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := execFleetd(t, append([]string{"validate"}, tt.args...)...)
			if code != tt.code || stdout != tt.wantStdout || stderr != tt.wantErrs {
				t.Errorf("validate %q: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", tt.args, code, stdout, stderr, tt.code, tt.wantStdout, tt.wantErrs)
			}
		})
	}
}

// TestFirstHour_HintsNameCommandsThatReachThisFleetd: 5. what a command
// suggests next is a fleetd command, with the --server (and --state-dir)
// of a fleetd that is not at the defaults.
func TestFirstHour_HintsNameCommandsThatReachThisFleetd(t *testing.T) {
	t.Parallel()
	f := startFleetd(t, map[string]string{"f.yaml": firstHourFleet})
	f.waitReady(t, "reviewer")
	flags := " --server " + f.info.URL + " --state-dir " + f.stateDir
	code, stdout, stderr := execFleetd(t, append([]string{"send", "reviewer", "later", "--no-wait"}, f.client...)...)
	if want := "the reply will land in the primary's mailbox: fleetd inbox --wait" + flags + "\n"; code != 0 || !strings.HasSuffix(stdout, want) {
		t.Errorf("send --no-wait: exit %d, stdout %q, stderr %q; want it to end %q", code, stdout, stderr, want)
	}
	missing := writeTree(t, map[string]string{"ghost.yaml": memberDoc("ghost", "{profile: nope}")})
	code, _, stderr = execFleetd(t, append([]string{"apply", "-f", missing}, f.client...)...)
	if code != 1 || !strings.Contains(stderr, "`fleetd get profiles` lists the operator's profiles") || strings.Contains(stderr, "bridge_") {
		t.Errorf("apply of an unknown profile: exit %d, stderr %q; want the CLI command that lists profiles", code, stderr)
	}
}
