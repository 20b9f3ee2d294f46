package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// rolloutProfile is the profile of the rollout tests as its operator wrote
// it, comments included; args are its model.
func rolloutProfile(model string, extra ...string) string {
	s := `# Claude for the review team.
apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata:
  name: claude
spec:
  harness: claude     # Claude Code
  args: ["--model", "` + model + `"]
`
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

const rolloutMembers = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: alpha}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: bravo}
spec: {profile: claude}
`

// want runs the CLI against f and checks its exit code, that stdout is
// wantOut (or, with a trailing "…", starts with it; with a leading one,
// ends with it) and that stderr holds wantErr (or is empty when wantErr is
// ""). wantProcess does the same with fleetd as a process of its own, the
// binary's exit code and output: each subcommand is run so once.
func (f *liveFleetd) want(t *testing.T, wantCode int, wantOut, wantErr string, args ...string) string {
	t.Helper()
	code, stdout, stderr := f.runArgs(t, args...)
	return checkRun(t, args, code, stdout, stderr, wantCode, wantOut, wantErr)
}

func (f *liveFleetd) wantProcess(t *testing.T, wantCode int, wantOut, wantErr string, args ...string) string {
	t.Helper()
	code, stdout, stderr := f.fleetdProcess(t, args...)
	return checkRun(t, args, code, stdout, stderr, wantCode, wantOut, wantErr)
}

func checkRun(t *testing.T, args []string, code int, stdout, stderr string, wantCode int, wantOut, wantErr string) string {
	t.Helper()
	prefix, isPrefix := strings.CutSuffix(wantOut, "…")
	suffix, isSuffix := strings.CutPrefix(wantOut, "…")
	outOK := stdout == wantOut || isPrefix && strings.HasPrefix(stdout, prefix) || isSuffix && strings.HasSuffix(stdout, suffix)
	if code != wantCode || !outOK || (wantErr == "" && stderr != "") || !strings.Contains(stderr, wantErr) {
		t.Fatalf("fleetd %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr holding %q",
			strings.Join(args, " "), code, stdout, stderr, wantCode, wantOut, wantErr)
	}
	return stdout
}

// panes reads the members' panes.
func (f *liveFleetd) panes(t *testing.T) map[string]string {
	t.Helper()
	_, out, _ := f.fleetdProcess(t, "get", "members", "-o", "json")
	var list struct{ Items []v1alpha1.Member }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("get members -o json: %v\n%s", err, out)
	}
	panes := map[string]string{}
	for _, m := range list.Items {
		panes[m.Name] = m.Status.PaneID
	}
	return panes
}

// Every `fleetd rollout` subcommand through the binary on the directory
// store, as an operator would use them one after the other: status of a
// settled profile and of one that is changing (lines until done, exit 0),
// history with change causes and one revision's spec, undo (the manifest
// file edited in place, comments kept; the revision renumbered; one that
// matches skipped; one not kept an error), pause (nothing replaced,
// status says paused; pausing again an error), resume, restart of a
// profile and of a member, and a rollout a failed replacement stopped
// (status exits 1). Issue 21 item 4.
func TestRollout_EverySubcommandThroughTheBinary(t *testing.T) {
	f := startFleetd(t, map[string]string{"profiles.yaml": rolloutProfile("sonnet"), "members.yaml": rolloutMembers},
		func(c *daemon.Config) { c.SimReadyDelay = 300 * time.Millisecond })
	f.waitReady(t, "alpha", "bravo")

	f.wantProcess(t, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n1         created\n", "", "rollout", "history", "profile/claude")
	f.wantProcess(t, 0, "profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude")
	f.want(t, 0, "member \"alpha\" successfully rolled out\n", "", "rollout", "status", "member", "alpha", "--watch=false")
	f.wantProcess(t, 1, "", "fleetd rollout status: profile \"nope\" not found (not_found)", "rollout", "status", "profile/nope")

	// A change rolls out while alpha works on a task: status follows it
	// to its end, alpha's agent replaced once its turn is over and its
	// reply delivered.
	before := f.panes(t)
	replied := make(chan string, 1)
	go func() { _, out, _ := f.runArgs(t, "send", "alpha", "sleep 3 the report"); replied <- out }()
	if err := f.info.WaitFor(f.ctx, func(ms []v1alpha1.Member) bool {
		return slices.ContainsFunc(ms, func(m v1alpha1.Member) bool { return m.Name == "alpha" && m.Status.AgentStatus == "working" })
	}); err != nil {
		t.Fatalf("alpha never worked on the task: %v", err)
	}
	changed := strings.Replace(rolloutProfile("opus"), "  name: claude\n", "  name: claude\n  annotations: {fleetd.dev/change-cause: try opus}\n", 1)
	f.want(t, 0, "profile/claude configured\n", "", "apply", "-f", writeFile(t, "p.yaml", changed))
	out := f.wantProcess(t, 0, "Waiting for profile \"claude\" rollout to finish: 0 of 2 members updated; alpha waits for its agent to be idle (the agent is working…", "",
		"rollout", "status", "profile/claude")
	if !strings.HasSuffix(out, "\nprofile \"claude\" successfully rolled out\n") {
		t.Errorf("rollout status of a change ends:\n%s", out)
	}
	if reply := <-replied; reply != "echo: the report\n" {
		t.Errorf("alpha's reply to the task it worked on during the change: %q", reply)
	}
	after := f.panes(t)
	for name, pane := range before {
		if after[name] == pane {
			t.Errorf("%s still runs in pane %s after the profile changed", name, pane)
		}
	}
	f.want(t, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n1         created\n2         try opus\n", "", "rollout", "history", "profile/claude")
	out = f.want(t, 0, "profile/claude with revision #1\n…", "", "rollout", "history", "profile/claude", "--revision=1")
	if !strings.Contains(out, "Change cause:  created\n") || !strings.Contains(out, "  - sonnet\n") {
		t.Errorf("history --revision=1:\n%s", out)
	}

	// Undo writes revision 1's spec back into the file, comments kept.
	f.wantProcess(t, 0, "profile/claude rolled back\n", "", "rollout", "undo", "profile/claude")
	if got := f.read(t, "profiles.yaml"); !strings.Contains(got, "- sonnet\n") || !strings.Contains(got, "# Claude for the review team.") ||
		!strings.Contains(got, "harness: claude     # Claude Code") {
		t.Errorf("profiles.yaml after undo:\n%s", got)
	}
	f.want(t, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude")
	f.want(t, 0, "profile/claude\nREVISION  CHANGE-CAUSE\n2         try opus\n3         created\n", "", "rollout", "history", "profile/claude")
	f.want(t, 0, "profile/claude skipped rollback (current profile already matches revision 3)\n", "", "rollout", "undo", "profile/claude", "--to-revision=3")
	f.wantProcess(t, 1, "", "fleetd rollout undo: revision 9 of profile/claude not found", "rollout", "undo", "profile/claude", "--to-revision=9")

	// Pause holds a change; resume lets it through.
	f.wantProcess(t, 0, "profile/claude paused\n", "", "rollout", "pause", "profile/claude")
	if got := f.read(t, "profiles.yaml"); !strings.Contains(got, "rollout:\n    paused: true\n") {
		t.Errorf("profiles.yaml after pause:\n%s", got)
	}
	f.wantProcess(t, 1, "", "fleetd rollout pause: profile \"claude\" is already paused (conflict)", "rollout", "pause", "profile/claude")
	before = f.panes(t)
	f.want(t, 0, "profile/claude configured\n", "", "apply", "-f", writeFile(t, "p.yaml", rolloutProfile("haiku", "rollout: {paused: true}")))
	f.want(t, 0, "Waiting for profile \"claude\" rollout to finish: 0 of 2 members updated (paused: `fleetd rollout resume profile/claude` goes on)...\n", "",
		"rollout", "status", "profile/claude", "--watch=false")
	f.want(t, 0, "Waiting for member \"alpha\" rollout to finish: it waits for its turn in its profile's rollout (paused: `fleetd rollout resume profile/claude` goes on)...\n", "",
		"rollout", "status", "member/alpha", "--watch=false")
	if now := f.panes(t); now["alpha"] != before["alpha"] || now["bravo"] != before["bravo"] {
		t.Errorf("panes while paused %v; want %v kept", now, before)
	}
	f.wantProcess(t, 0, "profile/claude resumed\n", "", "rollout", "resume", "profile/claude")
	if got := f.read(t, "profiles.yaml"); strings.Contains(got, "rollout") {
		t.Errorf("profiles.yaml after resume still has a rollout setting:\n%s", got)
	}
	f.want(t, 1, "", "fleetd rollout resume: profile \"claude\" is not paused (conflict)", "rollout", "resume", "profile/claude")
	f.want(t, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude", "--timeout=1m")

	// Restarts: a profile's members one turn at a time, a member's now.
	before = f.panes(t)
	f.wantProcess(t, 0, "profile/claude restarted\n", "", "rollout", "restart", "profile/claude")
	if got := f.read(t, "profiles.yaml"); !strings.Contains(got, "fleetd.dev/restartedAt:") {
		t.Errorf("profiles.yaml after restart has no restartedAt:\n%s", got)
	}
	f.want(t, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude")
	mid := f.panes(t)
	f.want(t, 0, "member/alpha restarted\n", "", "rollout", "restart", "member/alpha", "--now")
	f.want(t, 0, "…member \"alpha\" successfully rolled out\n", "", "rollout", "status", "member/alpha")
	last := f.panes(t)
	if mid["alpha"] == before["alpha"] || mid["bravo"] == before["bravo"] || last["alpha"] == mid["alpha"] || last["bravo"] != mid["bravo"] {
		t.Errorf("panes before %v, after the profile's restart %v, after alpha's %v", before, mid, last)
	}

	// A replacement that fails stops the rollout: status exits 1.
	broken := strings.Replace(rolloutProfile("opus"), "harness: claude ", "harness: nosuchagent ", 1)
	f.want(t, 0, "profile/claude configured\n", "", "apply", "-f", writeFile(t, "p.yaml", broken))
	f.wantProcess(t, 1, "…", "did not become Ready after its replacement", "rollout", "status", "profile/claude")
	f.want(t, 0, "profile/claude rolled back\n", "", "rollout", "undo", "profile/claude")
	f.want(t, 0, "…profile \"claude\" successfully rolled out\n", "", "rollout", "status", "profile/claude", "--timeout=1m")
}

// Usage errors exit 2 with the problem and the usage line.
func TestRollout_UsageErrors(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"no object", []string{"rollout", "status"}, 2, "fleetd rollout status: missing the resource type (profile/NAME|member/NAME)\nUsage: fleetd rollout status profile/NAME|member/NAME [flags]\n"},
		{"a tenant", []string{"rollout", "history", "tenant/acme"}, 2, "fleetd rollout history: unknown resource type \"tenant\"; rollouts are of profiles and members\nUsage: fleetd rollout history profile/NAME|member/NAME [flags]\n"},
		{"a member's pause", []string{"rollout", "pause", "member/alpha"}, 2, "fleetd rollout pause: rollout pause is for profiles: a member's own update has no rollout to stop\nUsage: fleetd rollout pause profile/NAME [flags]\n"},
		{"no name", []string{"rollout", "undo", "profile"}, 2, "fleetd rollout undo: missing the name: want profile/NAME or member/NAME, got \"profile\"\nUsage: fleetd rollout undo profile/NAME|member/NAME [flags]\n"},
	})
}
