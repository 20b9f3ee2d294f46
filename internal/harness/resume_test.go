package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/google/go-cmp/cmp"
)

const sessionUUID = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"

func session(agent, kind, value string) v1alpha1.AgentSession {
	return v1alpha1.AgentSession{Source: "herdr:" + agent, Agent: agent, Kind: kind, Value: value}
}

func TestResumeArgs_KnownHarnesses(t *testing.T) {
	tests := []struct {
		harness string
		s       v1alpha1.AgentSession
		want    []string
	}{
		{"claude", session("claude", "id", sessionUUID), []string{"--resume", sessionUUID}},
		{"claude-code", session("claude", "id", sessionUUID), []string{"--resume", sessionUUID}},
		{"claude", session("claude-code", "id", "plain_id.1"), []string{"--resume", "plain_id.1"}},
		{"codex", session("codex", "id", sessionUUID), []string{"resume", sessionUUID}},
		{"Codex", session("codex", "id", sessionUUID), []string{"resume", sessionUUID}},
	}
	for _, tt := range tests {
		got, err := ResumeArgs(tt.harness, tt.s)
		if err != nil {
			t.Errorf("ResumeArgs(%q, %+v): %v", tt.harness, tt.s, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ResumeArgs(%q, %+v) (-want +got):\n%s", tt.harness, tt.s, diff)
		}
	}
}

// Every refusal wraps launch.ErrCannotResume and says why; nothing that
// could be read as an option or break a terminal reaches argv.
func TestResumeArgs_Refuses(t *testing.T) {
	tests := []struct {
		name    string
		harness string
		s       v1alpha1.AgentSession
		want    string
	}{
		{"generic harness", "gemini", session("gemini", "id", sessionUUID), `no resume command for harness "gemini"`},
		{"qwen", "qwen", session("qwen", "id", sessionUUID), `no resume command for harness "qwen"`},
		{"transcript path", "claude", session("claude", "path", "/home/u/.claude/projects/x/"+sessionUUID+".jsonl"), `claude resumes by session id, herdr reported a session of kind "path"`},
		{"unknown kind", "codex", session("codex", "", sessionUUID), `of kind ""`},
		{"other agent", "codex", session("claude", "id", sessionUUID), `belongs to agent kind "claude", the profile's harness is "codex"`},
		{"no agent", "claude", session("", "id", sessionUUID), `belongs to agent kind ""`},
		{"empty", "claude", session("claude", "id", ""), "session id is empty"},
		{"option", "claude", session("claude", "id", "--dangerously-skip-permissions"), `starts with '-'`},
		{"short option", "codex", session("codex", "id", "-c"), `starts with '-'`},
		{"newline", "claude", session("claude", "id", "abc\nrm -rf ~"), `holds U+000A`},
		{"escape", "claude", session("claude", "id", "abc\x1b[2J"), `holds U+001B`},
		{"space", "codex", session("codex", "id", "abc def"), `holds U+0020`},
		{"bidi override", "claude", session("claude", "id", "abc\u202edef"), `holds U+202E`},
		{"not UTF-8", "claude", session("claude", "id", "abc\xff"), `is not UTF-8`},
		{"too long", "claude", session("claude", "id", strings.Repeat("a", MaxSessionValue+1)), "257 bytes long, more than 256"},
		{"source with escapes", "claude", v1alpha1.AgentSession{Source: "hook\x1b]0;x\a", Agent: "claude", Kind: "id", Value: sessionUUID}, `the session's source "hook\x1b]0;x\a" holds U+001B`},
		{"agent too long", "claude", v1alpha1.AgentSession{Agent: strings.Repeat(" ", 300) + "claude", Kind: "id", Value: sessionUUID}, "the session's agent is 306 bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := ResumeArgs(tt.harness, tt.s)
			if err == nil {
				t.Fatalf("ResumeArgs = %q, want an error", args)
			}
			if !errors.Is(err, launch.ErrCannotResume) {
				t.Errorf("error %v does not wrap launch.ErrCannotResume", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestResumeArgs_LongestValueAccepted(t *testing.T) {
	v := strings.Repeat("a", MaxSessionValue)
	if _, err := ResumeArgs("claude", session("claude", "id", v)); err != nil {
		t.Errorf("a %d-byte id: %v", len(v), err)
	}
}

func TestLauncher_PrepareResumeAppendsTheResumeCommand(t *testing.T) {
	tests := []struct {
		harness  string
		wantTail []string
	}{
		{"claude", []string{"--resume", sessionUUID}},
		{"codex", []string{"resume", sessionUUID}},
	}
	for _, tt := range tests {
		t.Run(tt.harness, func(t *testing.T) {
			f := newFixture(t, nil)
			m, p := testMember(v1alpha1.TargetResident, ""), testProfile(tt.harness)
			fresh, err := f.l.Prepare(context.Background(), m, p, f.tenants)
			if err != nil {
				t.Fatal(err)
			}
			if fresh.Resumed != nil {
				t.Errorf("a fresh start says it resumed %+v", fresh.Resumed)
			}
			s := session(tt.harness, "id", sessionUUID)
			spec, err := f.l.PrepareResume(context.Background(), m, p, f.tenants, s)
			if err != nil {
				t.Fatal(err)
			}
			// The same launch as a fresh start, plus the resume command at the end.
			if diff := cmp.Diff(append(fresh.Args, tt.wantTail...), spec.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&s, spec.Resumed); diff != "" {
				t.Errorf("resumed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(fresh.Plan, spec.Plan); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if spec.Token == "" || spec.Token == fresh.Token || spec.Env[TokenEnv] == "" {
				t.Errorf("a resumed launch has token %q (fresh %q): want its own", spec.Token, fresh.Token)
			}
		})
	}
}

// A session that cannot be resumed is refused before anything is written
// or minted, so the caller's fresh start is the only launch.
func TestLauncher_PrepareResumeRefusesWithoutSideEffects(t *testing.T) {
	never := testProfile("claude")
	never.Spec.Resume = v1alpha1.ResumeNever
	tests := []struct {
		name string
		p    *v1alpha1.Profile
		s    v1alpha1.AgentSession
		want string
	}{
		{"profile resume Never", never, session("claude", "id", sessionUUID), `profile "p" has resume: Never`},
		{"generic harness", testProfile("opencode"), session("opencode", "id", sessionUUID), `no resume command for harness "opencode"`},
		{"option injection", testProfile("claude"), session("claude", "id", "--print"), `starts with '-'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			spec, err := f.l.PrepareResume(context.Background(), testMember(v1alpha1.TargetResident, ""), tt.p, f.tenants, tt.s)
			if !errors.Is(err, launch.ErrCannotResume) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("PrepareResume = %v, %v; want launch.ErrCannotResume saying %q", spec, err, tt.want)
			}
			if !strings.Contains(err.Error(), `member "reviewer"`) {
				t.Errorf("error %q does not name the member", err)
			}
			if f.reg.mints != 0 {
				t.Errorf("a refused resume minted %d tokens", f.reg.mints)
			}
			if _, err := os.Stat(filepath.Join(f.stateDir, "harness", "reviewer")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused resume wrote the member's harness directory (stat: %v)", err)
			}
		})
	}
}
