package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testPrimaryToken = "primary-test-token"

// restFleetd imitates the documented REST write contract of a running
// fleetd: POST /members answers by member name (201 created, 200 with the
// result, or an error body), DELETE /members/{ref} knows a fixed set of
// members, and every request needs the primary token.
type restFleetd struct {
	url      string
	stateDir string

	mu       sync.Mutex
	requests []string         // "METHOD PATH" in order
	bodies   []map[string]any // POSTed Members
}

// postAnswers maps a member name to the status and body POST answers.
var postAnswers = map[string]struct {
	status int
	body   string
}{
	"reviewer": {201, `{"result":"created","member":{"name":"reviewer","profile":"claude","phase":"Pending"}}`},
	"coder":    {200, `{"result":"configured","member":{"name":"coder","profile":"claude","phase":"Ready"}}`},
	"triage":   {200, `{"result":"unchanged","member":{"name":"triage","profile":"codex","phase":"Ready"}}`},
	"outside":  {403, `{"error":{"code":"subscription_boundary","message":"tenant \"acme\" is not connected"}}`},
	"broken":   {422, `{"error":{"code":"invalid_spec","message":"spec.profile: profile \"nope\" not found"}}`},
}

func newRESTFleetd(t *testing.T) *restFleetd {
	t.Helper()
	f := &restFleetd{stateDir: writeTree(t, map[string]string{"primary.token": testPrimaryToken + "\n"})}
	t.Setenv("FLEETD_TOKEN", "")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /members", func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			writeTestJSON(w, 422, `{"error":{"code":"invalid_spec","message":"not JSON"}}`)
			return
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, m)
		f.mu.Unlock()
		name, _ := m["metadata"].(map[string]any)["name"].(string)
		a, ok := postAnswers[name]
		if !ok {
			t.Errorf("POST of unexpected member %q", name)
			writeTestJSON(w, 500, `{"error":{"code":"internal","message":"unexpected"}}`)
			return
		}
		writeTestJSON(w, a.status, a.body)
	})
	for _, path := range []string{"/profiles", "/tenants"} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var obj map[string]any
			if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
				writeTestJSON(w, 422, `{"error":{"code":"invalid_spec","message":"not JSON"}}`)
				return
			}
			f.mu.Lock()
			f.bodies = append(f.bodies, obj)
			f.mu.Unlock()
			switch name, _ := obj["metadata"].(map[string]any)["name"].(string); name {
			case "claude", "acme":
				writeTestJSON(w, 201, `{"result":"created","kind":"`+obj["kind"].(string)+`","name":"`+name+`"}`)
			case "keyed":
				writeTestJSON(w, 403, `{"error":{"code":"subscription_boundary","message":"spec.env.ANTHROPIC_BASE_URL: names an endpoint"}}`)
			default:
				writeTestJSON(w, 200, `{"result":"unchanged","kind":"`+obj["kind"].(string)+`","name":"`+name+`"}`)
			}
		})
		mux.HandleFunc("DELETE "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) {
			switch name := r.PathValue("name"); name {
			case "claude":
				writeTestJSON(w, 409, `{"error":{"code":"conflict","message":"delete Profile/claude: referenced by member/coder (spec.profile); delete those members or change what they reference first: object in use"}}`)
			case "codex", "acme":
				writeTestJSON(w, 200, `{"result":"deleted","name":"`+name+`"}`)
			default:
				writeTestJSON(w, 404, `{"error":{"code":"not_found","message":"not found"}}`)
			}
		})
	}
	mux.HandleFunc("DELETE /members/{ref}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("ref") {
		case "reviewer", "w1:p2":
			writeTestJSON(w, 200, `{"result":"deleted","member":{"name":"reviewer","profile":"claude","phase":"Terminating"}}`)
		case "busy":
			writeTestJSON(w, 200, `{"result":"deleted","member":{"name":"busy","profile":"claude","phase":"Ready","agentStatus":"working"}}`)
		default:
			writeTestJSON(w, 404, `{"error":{"code":"not_found","message":"member \"`+r.PathValue("ref")+`\" not found"}}`)
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		req := r.Method + " " + r.URL.Path
		if r.Method == http.MethodDelete && r.URL.RawQuery != "" {
			req += "?" + r.URL.RawQuery
		}
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+testPrimaryToken {
			writeTestJSON(w, 401, `{"error":{"code":"unauthorized","message":"missing or unknown bearer token"}}`)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func writeTestJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func (f *restFleetd) sent() ([]string, []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...), append([]map[string]any(nil), f.bodies...)
}

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.code
	default:
		errOut.WriteString("fleetd: " + err.Error() + "\n")
		code = 1
	}
	return code, out.String(), errOut.String()
}

const threeMembers = `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: coder, labels: {team: core}}
spec: {profile: claude, workspace: api}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: triage}
spec: {profile: codex}
status: {phase: Ready}
`

func TestApply(t *testing.T) {
	for _, tt := range []struct {
		name               string
		file               string // written to members.yaml, unless stdin
		stdin              bool
		wantCode           int
		wantOut, wantErr   string
		wantPosted         []string // KIND/NAME POSTed, in order
		wantErrContains    []string // when wantErr is not exact
		wantNoRequestAtAll bool
		noFile             bool // leave -f out
		dir                bool // -f names the directory holding members.yaml
		noManifest         bool // the file is members.txt, which apply -f DIR skips
	}{
		{name: "created, configured and unchanged", file: threeMembers,
			wantOut:    "member/reviewer created\nmember/coder configured\nmember/triage unchanged\n",
			wantPosted: []string{"Member/reviewer", "Member/coder", "Member/triage"}},
		{name: "a directory", file: threeMembers, dir: true,
			wantOut:    "member/reviewer created\nmember/coder configured\nmember/triage unchanged\n",
			wantPosted: []string{"Member/reviewer", "Member/coder", "Member/triage"}},
		{name: "from stdin", file: threeMembers, stdin: true,
			wantOut:    "member/reviewer created\nmember/coder configured\nmember/triage unchanged\n",
			wantPosted: []string{"Member/reviewer", "Member/coder", "Member/triage"}},
		{name: "refusals are reported and the rest applied", wantCode: 1,
			file: "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: outside}\nspec: {profile: claude}\n---\n" +
				"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: broken}\nspec: {profile: nope}\n---\n" +
				"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: reviewer}\nspec: {profile: claude}\n",
			wantOut: "member/reviewer created\n",
			wantErr: "fleetd apply: member/outside: subscription_boundary: tenant \"acme\" is not connected\n" +
				"fleetd apply: member/broken: invalid_spec: spec.profile: profile \"nope\" not found\n",
			wantPosted: []string{"Member/outside", "Member/broken", "Member/reviewer"}},
		{name: "invalid file sends nothing", wantCode: 1, wantNoRequestAtAll: true,
			file: "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: reviewer}\nspec: {profile: claude}\n---\n" +
				"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder}\nspec:\n  profile: claude\n  transport: http\n",
			wantErrContains: []string{"members.yaml:11: spec.transport: ", "fleetd apply: nothing was applied"}},
		{name: "Profiles and Tenants are applied before the Members",
			file: threeMembers + "---\napiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec: {url: https://acme.example/mcp, credentialEnv: ACME_TOKEN}\n" +
				"---\napiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude}\n" +
				"---\napiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: codex}\nspec: {harness: codex}\n",
			wantOut:    "profile/claude created\nprofile/codex unchanged\ntenant/acme created\nmember/reviewer created\nmember/coder configured\nmember/triage unchanged\n",
			wantPosted: []string{"Profile/claude", "Profile/codex", "Tenant/acme", "Member/reviewer", "Member/coder", "Member/triage"}},
		{name: "a refused Profile is reported and the rest applied", wantCode: 1,
			file: "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: keyed}\nspec: {harness: claude, env: {ANTHROPIC_BASE_URL: https://proxy}}\n---\n" +
				"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: reviewer}\nspec: {profile: claude}\n",
			wantOut:    "member/reviewer created\n",
			wantErr:    "fleetd apply: profile/keyed: subscription_boundary: spec.env.ANTHROPIC_BASE_URL: names an endpoint\n",
			wantPosted: []string{"Profile/keyed", "Member/reviewer"}},
		{name: "a List, as get -o yaml prints several members, status ignored",
			file: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: reviewer, uid: u-1}\n  spec: {profile: claude}\n  status: {phase: Ready}\n" +
				"- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: coder}\n  spec: {profile: claude}\n---\n" +
				"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: triage}\nspec: {profile: codex}\n",
			wantOut:    "member/reviewer created\nmember/coder configured\nmember/triage unchanged\n",
			wantPosted: []string{"Member/reviewer", "Member/coder", "Member/triage"}},
		{name: "a problem in a List item is located at its line", wantCode: 1, wantNoRequestAtAll: true,
			file: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: reviewer}\n  spec: {profile: claude}\n" +
				"- apiVersion: fleetd.dev/v1alpha1\n  kind: Member\n  metadata: {name: coder}\n  spec:\n    profile: claude\n    transport: http\n",
			wantErrContains: []string{"members.yaml:13: spec.transport: ", "fleetd apply: nothing was applied"}},
		{name: "empty file", wantCode: 1, wantNoRequestAtAll: true, file: "# nothing\n",
			wantErr: "members.yaml: no Members, Profiles or Tenants to apply\nfleetd apply: nothing was applied\n"},
		{name: "a directory without manifests", wantCode: 1, wantNoRequestAtAll: true, dir: true, noManifest: true,
			wantErr: "DIR: no Members, Profiles or Tenants to apply\nfleetd apply: nothing was applied\n"},
		{name: "no -f is a usage error", wantCode: 2, wantNoRequestAtAll: true, noFile: true,
			wantErrContains: []string{"fleetd apply: -f FILE is required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newRESTFleetd(t)
			name := "members.yaml"
			if tt.noManifest {
				name = "members.txt"
			}
			dir := writeTree(t, map[string]string{name: tt.file})
			args := []string{"apply", "--server", f.url, "--state-dir", f.stateDir}
			stdin := ""
			switch {
			case tt.noFile:
			case tt.stdin:
				args, stdin = append(args, "-f", "-"), tt.file
			case tt.dir:
				args = append(args, "-f", dir)
			default:
				args = append(args, "-f", filepath.Join(dir, "members.yaml"))
			}
			code, stdout, stderr := runCLIIn(t, stdin, args...)
			stderr = strings.ReplaceAll(stderr, dir+string(filepath.Separator), "")
			stderr = strings.ReplaceAll(stderr, dir, "DIR")
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if stdout != tt.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.wantOut)
			}
			if tt.wantErrContains == nil && stderr != tt.wantErr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, tt.wantErr)
			}
			for _, s := range tt.wantErrContains {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not contain %q:\n%s", s, stderr)
				}
			}
			requests, bodies := f.sent()
			if tt.wantNoRequestAtAll && len(requests) > 0 {
				t.Errorf("requests sent: %v", requests)
			}
			var posted []string
			for _, b := range bodies {
				if b["apiVersion"] != "fleetd.dev/v1alpha1" || b["kind"] == nil {
					t.Errorf("POSTed body without its type: %v", b)
				}
				if _, ok := b["status"]; ok {
					t.Errorf("POSTed body carries status: %v", b)
				}
				posted = append(posted, b["kind"].(string)+"/"+b["metadata"].(map[string]any)["name"].(string))
			}
			if diff := cmp.Diff(tt.wantPosted, posted); diff != "" {
				t.Errorf("POSTed members (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApply_SendsTheDecodedMember(t *testing.T) {
	f := newRESTFleetd(t)
	dir := writeTree(t, map[string]string{"m.yaml": "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder, labels: {team: core}}\nspec: {profile: claude, workspace: api}\n"})
	if code, _, stderr := runCLIIn(t, "", "apply", "-f", filepath.Join(dir, "m.yaml"), "--server", f.url, "--state-dir", f.stateDir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, bodies := f.sent()
	if len(bodies) != 1 {
		t.Fatalf("bodies = %v", bodies)
	}
	meta := bodies[0]["metadata"].(map[string]any)
	spec := bodies[0]["spec"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"team": "core"}, meta["labels"]); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if spec["profile"] != "claude" || spec["workspace"] != "api" {
		t.Errorf("spec = %v", spec)
	}
}

func TestApply_UnknownToken(t *testing.T) {
	f := newRESTFleetd(t)
	if err := os.WriteFile(filepath.Join(f.stateDir, "primary.token"), []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := writeTree(t, map[string]string{"m.yaml": threeMembers})
	code, stdout, stderr := runCLIIn(t, "", "apply", "-f", filepath.Join(dir, "m.yaml"), "--server", f.url, "--state-dir", f.stateDir)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "fleetd apply: member/reviewer: unauthorized: missing or unknown bearer token") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}

func TestDeleteMember(t *testing.T) {
	for _, tt := range []struct {
		name             string
		args             []string
		wantCode         int
		wantOut, wantErr string
		wantRequests     []string
	}{
		{"by name", []string{"member", "reviewer"}, 0, "member/reviewer deleted\n", "", []string{"DELETE /members/reviewer"}},
		{"by pane id prints the name", []string{"members", "w1:p2"}, 0, "member/reviewer deleted\n", "", []string{"DELETE /members/w1:p2"}},
		{"unknown", []string{"member", "ghost"}, 1, "", "fleetd delete: member \"ghost\" not found\n", []string{"DELETE /members/ghost"}},
		{"now", []string{"member", "reviewer", "--now"}, 0, "member/reviewer deleted\n", "", []string{"DELETE /members/reviewer?now=true"}},
		{"a busy agent's tab closes once it is idle", []string{"member", "busy"}, 0,
			"member/busy deleted (its agent is working: the tab closes once it is idle; --now closes it at once)\n", "", []string{"DELETE /members/busy"}},
		{"a busy agent, now", []string{"member", "busy", "--now"}, 0, "member/busy deleted\n", "", []string{"DELETE /members/busy?now=true"}},
		{"several, one unknown: the others are deleted", []string{"member", "reviewer", "ghost", "busy"}, 1,
			"member/reviewer deleted\nmember/busy deleted (its agent is working: the tab closes once it is idle; --now closes it at once)\n",
			"fleetd delete: member \"ghost\" not found\n", []string{"DELETE /members/reviewer", "DELETE /members/ghost", "DELETE /members/busy"}},
		{"other resource", []string{"profile", "claude"}, 2, "", "", nil},
		{"no name", []string{"member"}, 2, "", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newRESTFleetd(t)
			code, stdout, stderr := runCLI(t, append(append([]string{"delete"}, tt.args...), "--server", f.url, "--state-dir", f.stateDir)...)
			if code != tt.wantCode || stdout != tt.wantOut {
				t.Errorf("exit %d, stdout %q; want %d, %q; stderr:\n%s", code, stdout, tt.wantCode, tt.wantOut, stderr)
			}
			if tt.wantCode != 2 && stderr != tt.wantErr {
				t.Errorf("stderr %q, want %q", stderr, tt.wantErr)
			}
			if tt.wantCode == 2 && !strings.Contains(stderr, "Usage: fleetd delete member NAME") {
				t.Errorf("usage error without usage line:\n%s", stderr)
			}
			requests, _ := f.sent()
			if diff := cmp.Diff(tt.wantRequests, requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
