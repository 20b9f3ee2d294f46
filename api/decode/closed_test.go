package decode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func TestClosedKey(t *testing.T) {
	for key, want := range map[string]string{
		"url": msgClosedURL, "baseURL": msgClosedURL, "ANTHROPIC_BASE_URL": msgClosedURL, "uri": msgClosedURL,
		"endpoint": msgClosedURL, "credential": msgClosedURL, "credentials": msgClosedURL, "credentialEnv": msgClosedURL,
		"token": msgClosedURL, "authToken": msgClosedURL, "secret": msgClosedURL, "password": msgClosedURL,
		"apikey": msgClosedURL, "api_key": msgClosedURL, "APIKey": msgClosedURL, "x-api-key": msgClosedURL,
		"header": msgClosedHeader, "Headers": msgClosedHeader, "extraHeaders": msgClosedHeader,
		"command": msgClosedCommand, "cmd": msgClosedCommand, "argv": msgClosedCommand, "args": msgClosedCommand,
		"env": msgClosedEnv, "ENV": msgClosedEnv, "environment": msgClosedEnv, "envVars": msgClosedEnv,
		// Every real Member spec field, and the legacy key, are allowed.
		"profile": "", "mcpTarget": "", "kind": "", "tenantId": "", "transport": "", "workspace": "",
		"cwd": "", "prompt": "", "paused": "", "mcpTransport": "", "mode": "",
		"worktree": "", "repo": "", "branch": "", "cleanup": "",
		// Words that merely contain a flagged word are not flagged.
		"envelope": "", "argument_count": "", "commander": "",
	} {
		if got := closedKey("spec."+key, key); got != want {
			t.Errorf("closedKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// spec.worktree.base is a git ref, let through by its path; "base" is an
// endpoint word anywhere else (api_base).
func TestClosedKey_OwnFieldsByPathOnly(t *testing.T) {
	for path, want := range map[string]string{
		"spec.worktree.base":  "",
		"spec.base":           msgClosedURL,
		"spec.mcpTarget.base": msgClosedURL,
		"worktree.base":       msgClosedURL,
	} {
		if got := closedKey(path, "base"); got != want {
			t.Errorf("closedKey(%q, base) = %q, want %q", path, got, want)
		}
	}
}

// TestCheckClosedMemberSpec checks the rule on a spec as it arrives over
// MCP or REST: decoded JSON, nested maps and lists.
func TestCheckClosedMemberSpec(t *testing.T) {
	var spec map[string]any
	if err := json.Unmarshal([]byte(`{
		"profile": "codex",
		"mcpTarget": {"kind": "tenant", "tenantId": "acme", "url": "https://x.example"},
		"env": {"A": "b"},
		"options": [{"headers": {}}, {"fine": {"cmd": "sh"}}],
		"prompt": "the url is https://x.example and env is fine in a value"
	}`), &spec); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"spec.env: " + msgClosedEnv,
		"spec.mcpTarget.url: " + msgClosedURL,
		"spec.options[0].headers: " + msgClosedHeader,
		"spec.options[1].fine.cmd: " + msgClosedCommand,
	}
	if diff := cmp.Diff(want, errStrings(CheckClosedMemberSpec("spec", spec))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if errs := CheckClosedMemberSpec("spec", map[string]any{"profile": "codex", "transport": "stdio"}); errs.Err() != nil {
		t.Errorf("clean spec: %v", errs)
	}
}

func TestError_Format(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{File: "m.yaml", Line: 7, Field: "spec.transport", Msg: "bad"}, "m.yaml:7: spec.transport: bad"},
		{Error{File: "m.yaml", Line: 3, Msg: "invalid YAML: x"}, "m.yaml:3: invalid YAML: x"},
		{Error{File: "m.yaml", Msg: "read: denied"}, "m.yaml: read: denied"},
		{Error{Field: "spec.env", Msg: "no"}, "spec.env: no"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if (ErrorList{}).Err() != nil {
		t.Errorf("empty ErrorList.Err() != nil")
	}
	l := ErrorList{{File: "a", Line: 1, Msg: "x"}, {File: "b", Line: 2, Msg: "y"}}
	if got := l.Err().Error(); got != "a:1: x\nb:2: y" {
		t.Errorf("ErrorList.Error() = %q", got)
	}
}

// A Member's spec.worktree decodes with its base (a git ref, let through by
// its path), and its problems are located by file and line like any other.
func TestFile_Worktree(t *testing.T) {
	const doc = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: builder}
spec:
  profile: codex
  worktree:
    repo: /srv/api
    branch: agents/builder
    base: origin/main
`
	objs, errs := File("m.yaml", []byte(doc))
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("File = %v, %v", objs, errs)
	}
	if w := objs[0].(*v1alpha1.Member).Spec.Worktree; *w != (v1alpha1.MemberWorktree{Repo: "/srv/api", Branch: "agents/builder", Base: "origin/main", Cleanup: v1alpha1.CleanupNever}) {
		t.Errorf("worktree decoded as %+v", w)
	}
	bad := strings.Replace(doc, "origin/main", "https://evil.example/x", 1) + "  cwd: /srv\n  base: main\n"
	_, errs = File("m.yaml", []byte(bad))
	want := []string{
		"m.yaml:6: spec.worktree: spec.worktree and spec.cwd exclude each other: the member works in its worktree; remove one",
		`m.yaml:9: spec.worktree.base: invalid ref "https://evil.example/x": starts or ends with "/", or holds "//"`,
		"m.yaml:11: spec.base: " + msgClosedURL,
	}
	if diff := cmp.Diff(want, errStrings(errs)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
