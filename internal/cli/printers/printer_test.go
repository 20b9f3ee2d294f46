package printers

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

var (
	printNow     = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	printCreated = printNow.Add(-3*time.Hour - 10*time.Minute)
)

func sampleMembers() []v1alpha1.Member {
	return []v1alpha1.Member{
		{
			ObjectMeta: v1alpha1.ObjectMeta{Name: "acme-triage", UID: "6f1c", Generation: 2, CreationTimestamp: &printCreated,
				Labels: map[string]string{"team": "support", "tier": "b"}},
			Spec: v1alpha1.MemberSpec{Profile: "codex", MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "acme"},
				Transport: v1alpha1.TransportStreamableHTTP, Workspace: "fleetd"},
			Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseDegraded, AgentStatus: "unknown", Restarts: 4,
				ObservedGeneration: 2, LastError: "agent exited", SessionID: "2b7e-..",
				ResumedSession: &v1alpha1.AgentSession{Source: "herdr", Agent: "codex", Kind: v1alpha1.AgentSessionKindID, Value: "0199a1b2"},
				Conditions: []v1alpha1.Condition{
					{Type: "Ready", Status: "False", Reason: "CrashLoop", Message: "agent exited 4 times", LastTransitionTime: printNow.Add(-5 * time.Minute)},
				},
				Plan: []v1alpha1.PlanRow{{Server: "fleetd", Target: "tenant", Transport: "streamable-http", URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"}}},
		},
		{
			ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer", CreationTimestamp: &printCreated},
			Spec:       v1alpha1.MemberSpec{Profile: "claude", Transport: v1alpha1.TransportStdio, Workspace: "api"},
			Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "idle", PaneID: "w1:p2", TerminalID: "term_1a2b",
				SessionID: "0d8f-..", NodeName: "laptop"},
		},
	}
}

// printMembers prints members as `fleetd get members -o output` does;
// single is a get by name.
func printMembers(w io.Writer, members []v1alpha1.Member, output string, single bool, now time.Time) error {
	f, err := ParseFormat(output)
	if err != nil {
		return err
	}
	p := Printer{Kind: v1alpha1.KindMember, Plural: "members", Format: f, Now: now}
	objs := make([]Object, len(members))
	for i := range members {
		objs[i] = &members[i]
	}
	if single {
		return p.PrintOne(w, objs[0])
	}
	return p.PrintList(w, objs)
}

func TestPrintMembers(t *testing.T) {
	for _, tt := range []struct {
		name, output string
		members      []v1alpha1.Member
		single       bool
	}{
		{"table", "", sampleMembers(), false},
		{"wide", "wide", sampleMembers(), false},
		{"yaml", "yaml", sampleMembers()[1:], true},
		{"json", "json", sampleMembers()[1:], false},
		{"yaml-list", "yaml", sampleMembers(), false},
		{"empty", "", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printMembers(&buf, tt.members, tt.output, tt.single, printNow); err != nil {
				t.Fatal(err)
			}
			golden(t, "get-members-"+tt.name+".golden", buf.Bytes())
		})
	}
}

func TestDescribeMember(t *testing.T) {
	m := sampleMembers()[0]
	events := []v1alpha1.Event{
		{Time: printNow.Add(-20 * time.Minute), Type: v1alpha1.EventNormal, Reason: "Created", Message: "tab w1:t3 created"},
		{Time: printNow.Add(-5 * time.Minute), Type: v1alpha1.EventWarning, Reason: "BackOff", Message: "restarting in 40s", Count: 4},
	}
	var buf bytes.Buffer
	if err := DescribeMember(&buf, &m, events, printNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "describe-member.golden", buf.Bytes())
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:      "0s",
		45 * time.Second:  "45s",
		119 * time.Second: "119s",
		12 * time.Minute:  "12m",
		5 * time.Hour:     "5h",
		72 * time.Hour:    "3d",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestDescribeMember_Worktree: a member on a worktree shows its spec and,
// once read, where the worktree is, the branch against its base, what is
// not committed and the last commit — its subject on one line, escaped.
func TestDescribeMember_Worktree(t *testing.T) {
	m := sampleMembers()[1]
	m.Spec.Cwd = ""
	m.Spec.Worktree = &v1alpha1.MemberWorktree{Repo: "/srv/api", Branch: "agents/reviewer", Cleanup: v1alpha1.CleanupOnDelete}
	m.Status.Worktree = &v1alpha1.WorktreeStatus{Path: "/srv/api.worktrees/agents/reviewer", Branch: "agents/reviewer",
		Head: "0123456789abcdef0123456789abcdef01234567", Dirty: 1, Ahead: 1, LastCommit: "fix \x1b[31mred\x1b[0m\nparser"}
	var buf bytes.Buffer
	if err := DescribeMember(&buf, &m, nil, printNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "describe-member-worktree.golden", buf.Bytes())
	var wide bytes.Buffer
	if err := (Printer{Kind: v1alpha1.KindMember, Plural: "members", Format: Format{name: "wide"}, Now: printNow}).PrintOne(&wide, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(wide.String(), "BRANCH") || !strings.Contains(wide.String(), " agents/reviewer ") {
		t.Errorf("get -o wide shows no branch:\n%s", wide.String())
	}
}
