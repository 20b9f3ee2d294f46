package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

const getFleet = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude, description: reviews code, env: {REVIEW_MODE: strict}}
---
apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: codex}
spec: {harness: codex, restartPolicy: OnFailure}
---
apiVersion: fleetd.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec: {url: "https://fleet.acme.example/mcp", credentialEnv: ACME_FLEETD_TOKEN}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer, labels: {team: review}}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: tester, labels: {team: qa, tier: b}}
spec: {profile: codex}
`

// startGetFleetd serves getFleet and waits until the named members are
// Ready.
func startGetFleetd(t *testing.T, members ...string) *liveFleetd {
	t.Helper()
	f := startFleetd(t, map[string]string{"fleet.yaml": getFleet})
	f.waitReady(t, members...)
	return f
}

// run runs a client command against this fleetd.
func (f *liveFleetd) runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, append(args, f.client...)...)
}

func TestGet_SelectorsOutputsAndSortThroughTheCLI(t *testing.T) {
	t.Parallel()
	f := startGetFleetd(t, "reviewer", "tester")
	for _, tt := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string // substring
	}{
		{"name", []string{"get", "members", "-o", "name"}, 0, "member/reviewer\nmember/tester\n", ""},
		{"equals", []string{"get", "members", "-l", "team=qa", "-o", "name"}, 0, "member/tester\n", ""},
		{"not equals", []string{"get", "members", "-l", "team!=qa", "-o", "name"}, 0, "member/reviewer\n", ""},
		{"set and exists", []string{"get", "members", "-l", "team in (qa,review),tier", "-o", "name"}, 0, "member/tester\n", ""},
		{"notin and not exists", []string{"get", "members", "-l", "team notin (qa),!tier", "-o", "name"}, 0, "member/reviewer\n", ""},
		{"no match", []string{"get", "members", "-l", "team=nobody"}, 0, "No members found.\n", ""},
		{"bad selector", []string{"get", "members", "-l", "team in qa"}, 2, "", "-l: selector \"team in qa\", at byte 9: want ( after in or notin"},
		{"name and selector", []string{"get", "members", "tester", "-l", "team=qa"}, 2, "", "a name and -l cannot be combined"},
		{"jsonpath list", []string{"get", "members", "-o", "jsonpath={.items[*].metadata.name}"}, 0, "reviewer tester", ""},
		{"jsonpath quoted", []string{"get", "members", "-o", "jsonpath='{.kind}'"}, 0, "List", ""},
		{"jsonpath range", []string{"get", "members", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.team} {.status.phase}{"\n"}{end}`}, 0,
			"reviewer=review Ready\ntester=qa Ready\n", ""},
		{"jsonpath one", []string{"get", "members", "tester", "-o", "jsonpath={.spec.profile}"}, 0, "codex", ""},
		{"go-template", []string{"get", "members", "-o", "go-template={{range .items}}{{.metadata.name}}:{{.spec.profile}} {{end}}"}, 0, "reviewer:claude tester:codex ", ""},
		{"bad jsonpath", []string{"get", "members", "-o", "jsonpath={.items[?(@.x)]}"}, 2, "", "filters, slices and unions are not supported"},
		{"bad go-template", []string{"get", "members", "-o", "go-template={{.x"}, 2, "", "-o: template: output:1: unclosed action"},
		{"bad output", []string{"get", "members", "-o", "table"}, 2, "", `unknown output format "table"`},
		{"sort by label", []string{"get", "members", "--sort-by", ".metadata.labels.team", "-o", "name"}, 0, "member/tester\nmember/reviewer\n", ""},
		{"sort by braces", []string{"get", "members", "--sort-by", "{.spec.profile}", "-o", "name"}, 0, "member/reviewer\nmember/tester\n", ""},
		{"bad sort", []string{"get", "members", "--sort-by", "..x"}, 2, "", `--sort-by "..x": path "..x": recursive descent`},
		{"unknown resource", []string{"get", "pods"}, 2, "", `unknown resource type "pods"; fleetd serves: members, profiles, tenants, nodes or events`},
		{"unknown member", []string{"get", "members", "nobody"}, 1, "", `fleetd get: no member with name, pane id, terminal id or session id "nobody"; ` + "`fleetd get members --server"},
		{"watch a profile", []string{"get", "profiles", "-w"}, 2, "", "only members and events can be watched"},
		{"watch events without watch", []string{"get", "members", "--output-watch-events"}, 2, "", "--output-watch-events needs --watch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := f.runArgs(t, tt.args...)
			if code != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("fleetd %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q",
					strings.Join(tt.args, " "), code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// TestGet_MemberReferencesWorkInEveryCommand: get, describe and send take
// a member's pane id, terminal id or session id as well as its name.
func TestGet_MemberReferencesWorkInEveryCommand(t *testing.T) {
	t.Parallel()
	f := startGetFleetd(t, "reviewer", "tester")
	code, ids, stderr := f.runArgs(t, "get", "members", "reviewer", "-o", "jsonpath={.status.paneId} {.status.terminalId} {.status.sessionId}")
	refs := strings.Fields(ids)
	if code != 0 || len(refs) != 3 {
		t.Fatalf("reviewer's ids: exit %d, %q, stderr %s", code, ids, stderr)
	}
	for _, ref := range append(refs, "reviewer") {
		if code, stdout, stderr := f.runArgs(t, "get", "members", ref, "-o", "name"); code != 0 || stdout != "member/reviewer\n" {
			t.Errorf("get members %s: exit %d, stdout %q, stderr %s", ref, code, stdout, stderr)
		}
		code, stdout, stderr := f.runArgs(t, "describe", "member", ref)
		if code != 0 || !strings.HasPrefix(stdout, "Name:") || !strings.Contains(strings.SplitN(stdout, "\n", 2)[0], "reviewer") || !strings.Contains(stdout, "Events:") {
			t.Errorf("describe member %s: exit %d, stderr %s, stdout:\n%s", ref, code, stderr, stdout)
		}
		if code, stdout, stderr := f.runArgs(t, "send", ref, "hello"); code != 0 || stdout != "echo: hello\n" {
			t.Errorf("send %s hello: exit %d, stdout %q, stderr %s", ref, code, stdout, stderr)
		}
	}
	if code, _, stderr := f.runArgs(t, "describe", "member", "w9:p9"); code != 1 || !strings.Contains(stderr, `no member with name, pane id, terminal id or session id "w9:p9"`) {
		t.Errorf("describe member w9:p9: exit %d, stderr %q", code, stderr)
	}
}

func TestGet_ProfilesAndTenantsThroughTheCLI(t *testing.T) {
	t.Parallel()
	f := startGetFleetd(t)
	ws, ages, created := regexp.MustCompile(` +`), regexp.MustCompile(`\b\d+[smhd]\b`), regexp.MustCompile(`(?m)^Created:.*\n`)
	// Runs of spaces become one, ages "1s", the Created line goes.
	squeeze := func(s string) string {
		return created.ReplaceAllString(ages.ReplaceAllString(ws.ReplaceAllString(s, " "), "1s"), "")
	}
	for _, tt := range []struct {
		args       []string
		wantCode   int
		wantStdout string // squeezed
		wantStderr string
	}{
		{[]string{"get", "profiles"}, 0, "NAME HARNESS UP-TO-DATE RESTART RESUME AGE\nclaude claude 1/1 Always Auto 1s\ncodex codex 1/1 OnFailure Auto 1s\n", ""},
		{[]string{"get", "profile", "codex", "-o", "name"}, 0, "profile/codex\n", ""},
		{[]string{"get", "profiles", "-o", "jsonpath={.items[*].spec.harness}"}, 0, "claude codex", ""},
		{[]string{"get", "tenants"}, 0, "NAME URL CREDENTIAL ENV AGE\nacme https://fleet.acme.example/mcp ACME_FLEETD_TOKEN 1s\n", ""},
		{[]string{"get", "tenants", "-o", "name"}, 0, "tenant/acme\n", ""},
		{[]string{"describe", "tenant", "acme"}, 0, "Name: acme\nLabels: <none>\nAnnotations: <none>\nSpec:\n URL: https://fleet.acme.example/mcp\n Credential Env: ACME_FLEETD_TOKEN\n", ""},
		{[]string{"get", "profiles", "gpt"}, 1, "", "fleetd: Profile \"gpt\" not found (not_found)\n"},
		{[]string{"describe", "tenant", "globex"}, 1, "", "fleetd: Tenant \"globex\" not found (not_found)\n"},
		// The directory store has no nodes, and says so.
		{[]string{"get", "nodes"}, 1, "", "fleetd: nodes exist only with --store etcd: this fleetd keeps its desired state in a directory and runs every member on its own machine (not_found)\n"},
		{[]string{"describe", "node", "laptop"}, 1, "", "fleetd: nodes exist only with --store etcd: this fleetd keeps its desired state in a directory and runs every member on its own machine (not_found)\n"},
	} {
		code, stdout, stderr := f.runArgs(t, tt.args...)
		if code != tt.wantCode || squeeze(stdout) != tt.wantStdout || stderr != tt.wantStderr {
			t.Errorf("fleetd %s: exit %d, stderr %q, stdout:\n%s\nwant exit %d, stderr %q, stdout:\n%s",
				strings.Join(tt.args, " "), code, stderr, stdout, tt.wantCode, tt.wantStderr, tt.wantStdout)
		}
	}
	code, stdout, _ := f.runArgs(t, "describe", "profile", "claude")
	for _, want := range []string{"Harness: claude", "Description: reviews code", "Env: REVIEW_MODE (values: -o yaml)", "Restart Policy: Always"} {
		if code != 0 || !strings.Contains(squeeze(stdout), want) {
			t.Errorf("describe profile claude: exit %d, want %q in:\n%s", code, want, stdout)
		}
	}
	if strings.Contains(stdout, "strict") {
		t.Errorf("describe profile printed an env value:\n%s", stdout)
	}
}

// streamLines collects what a long-running command prints, line by line,
// for a test to wait on with a deadline.
type streamLines struct{ syncbuf.Lines }

// waitLine returns the first line matching re, failing the test at the
// deadline; the lines before it are returned too.
func (w *streamLines) waitLine(t *testing.T, deadline <-chan time.Time, re string) (string, []string) {
	t.Helper()
	pattern := regexp.MustCompile(re)
	var seen []string
	for {
		select {
		case line := <-w.C:
			if pattern.MatchString(line) {
				return line, seen
			}
			seen = append(seen, line)
		case <-deadline:
			t.Fatalf("no line matching %q in time; got:\n%s", re, strings.Join(seen, "\n"))
		}
	}
}

func TestGet_WatchPrintsTheTableThenEveryChange(t *testing.T) {
	t.Parallel()
	f := startGetFleetd(t, "reviewer", "tester")
	out := &streamLines{syncbuf.Lines{C: make(chan string, 1024)}}
	var errOut bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(append([]string{"get", "members", "-w", "--output-watch-events", "-l", "team!=qa"}, f.client...), out, &errOut)
	}()
	deadline := time.After(30 * time.Second)
	header, _ := out.waitLine(t, deadline, `^EVENT`)
	if diff := cmp.Diff([]string{"EVENT", "NAME", "PHASE", "AGENT", "PANE", "RESTARTS", "AGE"}, strings.Fields(header)); diff != "" {
		t.Fatalf("header (-want +got):\n%s", diff)
	}
	row, _ := out.waitLine(t, deadline, `^ADDED`)
	if fields := strings.Fields(row); len(fields) < 3 || fields[1] != "reviewer" || fields[2] != "Ready" {
		t.Fatalf("first row %q, want reviewer Ready (tester is not selected)", row)
	}
	// The change lines line up under the table's columns.
	nameCol := strings.Index(header, "NAME")

	coder := filepath.Join(t.TempDir(), "coder.yaml")
	if err := os.WriteFile(coder, []byte("apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder, labels: {team: core}}\nspec: {profile: claude}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := f.runArgs(t, "apply", "-f", coder); code != 0 {
		t.Fatalf("apply: exit %d, %s%s", code, stdout, stderr)
	}
	added, _ := out.waitLine(t, deadline, `^ADDED +coder `)
	if strings.Index(added, "coder") != nameCol {
		t.Errorf("change line %q does not line up with header %q", added, header)
	}
	out.waitLine(t, deadline, `^MODIFIED +coder +Ready `)
	if code, _, stderr := f.runArgs(t, "delete", "member", "coder"); code != 0 {
		t.Fatalf("delete: exit %d, %s", code, stderr)
	}
	_, before := out.waitLine(t, deadline, `^DELETED +coder `)
	for _, l := range before {
		if strings.Contains(l, "tester") {
			t.Errorf("a line about tester, which -l team!=qa leaves out: %q", l)
		}
	}

	f.stop() // fleetd ends the stream: the watch exits 1 saying so
	select { // a deadline of its own: a select on two ready channels picks either
	case code := <-exit:
		if code != 1 || !strings.Contains(errOut.String(), "ended the watch stream") {
			t.Errorf("watch after fleetd stopped: exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end when fleetd stopped")
	}
}

func TestCompletion_NamesFromTheRunningFleetd(t *testing.T) {
	t.Parallel()
	f := startGetFleetd(t)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"get", ""}, []string{"members", "profiles", "tenants", "nodes"}},
		{[]string{"get", "p"}, []string{"profiles"}},
		{[]string{"get", "members", ""}, []string{"reviewer", "tester"}},
		{[]string{"get", "members", "t"}, []string{"tester"}},
		{[]string{"get", "profiles", ""}, []string{"claude", "codex"}},
		{[]string{"describe", "tenant", ""}, []string{"acme"}},
		{[]string{"describe", "profile", "cl"}, []string{"claude"}},
		{[]string{"send", "r"}, []string{"reviewer"}},
		{[]string{"send", "reviewer", ""}, nil},
		{[]string{"delete", ""}, []string{"member"}},
		{[]string{"delete", "member", ""}, []string{"reviewer", "tester"}},
	} {
		// The word being completed comes last, after the flags.
		args := append([]string{"__complete"}, tt.args[:len(tt.args)-1]...)
		args = append(append(args, f.client...), tt.args[len(tt.args)-1])
		code, stdout, _ := runCLI(t, args...)
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		directive := lines[len(lines)-1]
		var got []string
		got = append(got, lines[:len(lines)-1]...)
		if code != 0 || directive != ":4" {
			t.Errorf("complete %q: exit %d, directive %q, want 0 and :4 (no file completion)", tt.args, code, directive)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("complete %q (-want +got):\n%s", tt.args, diff)
		}
	}

	// fleetd gone: no completions, no error, exit 0.
	f.stop()
	code, stdout, stderr := runCLI(t, append(append([]string{"__complete", "get", "members"}, f.client...), "")...)
	if code != 0 || stdout != ":4\n" || strings.Contains(stderr, "fleetd:") || strings.Contains(stderr, "cannot reach") {
		t.Errorf("complete with fleetd stopped: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
