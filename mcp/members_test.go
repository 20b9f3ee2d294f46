package mcp

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func TestDecodeSpawnArgs(t *testing.T) {
	tests := []struct {
		name     string
		args     map[string]any
		wantCode string
		wantMsg  string // substring of the error message
		want     *v1alpha1.MemberSpec
	}{
		{name: "minimal", args: map[string]any{"profile": "claude", "name": "w1"},
			want: &v1alpha1.MemberSpec{Profile: "claude", MCPTarget: &v1alpha1.MCPTarget{Kind: "resident"}, Transport: "streamable-http", Workspace: "fleetd"}},
		{name: "tenant target and prompt with a URL", args: map[string]any{"profile": "claude", "name": "w1",
			"mcpTarget": map[string]any{"kind": "tenant", "tenantId": "acme"}, "prompt": "read https://example.com/spec"},
			want: &v1alpha1.MemberSpec{Profile: "claude", MCPTarget: &v1alpha1.MCPTarget{Kind: "tenant", TenantID: "acme"},
				Transport: "streamable-http", Workspace: "fleetd", Prompt: "read https://example.com/spec"}},
		{name: "env", args: map[string]any{"profile": "claude", "env": map[string]any{"A": "b"}}, wantCode: "subscription_boundary", wantMsg: "env"},
		{name: "nested url key", args: map[string]any{"profile": "claude", "mcpTarget": map[string]any{"kind": "tenant", "url": "x"}}, wantCode: "subscription_boundary"},
		{name: "url value", args: map[string]any{"profile": "claude", "workspace": "http://evil"}, wantCode: "subscription_boundary"},
		{name: "credential variable", args: map[string]any{"profile": "claude", "ANTHROPIC_BASE_URL": "x"}, wantCode: "subscription_boundary"},
		{name: "variable reference", args: map[string]any{"profile": "claude", "workspace": "$ANTHROPIC_API_KEY"}, wantCode: "subscription_boundary"},
		{name: "command", args: map[string]any{"profile": "claude", "command": "rm"}, wantCode: "invalid_spec", wantMsg: "command"},
		{name: "unknown field", args: map[string]any{"profile": "claude", "colour": "red"}, wantCode: "invalid_spec", wantMsg: "colour: unknown field"},
		{name: "bad transport", args: map[string]any{"profile": "claude", "transport": "http"}, wantCode: "invalid_spec", wantMsg: "spec.transport"},
		{name: "bad name", args: map[string]any{"profile": "claude", "name": "Bad Name"}, wantCode: "invalid_spec", wantMsg: "metadata.name"},
		{name: "no profile", args: map[string]any{"name": "w1"}, wantCode: "invalid_spec", wantMsg: "spec.profile"},
		{name: "wait not a bool", args: map[string]any{"profile": "claude", "wait": "yes"}, wantCode: "invalid_argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := decodeSpawnArgs(jsonArgs(t, tt.args))
			if tt.wantCode != "" {
				te := fromCore(err)
				if err == nil || te.Code != tt.wantCode || !strings.Contains(te.Message, tt.wantMsg) {
					t.Fatalf("err = %v, want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*tt.want, req.member.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if !req.wait {
				t.Error("wait defaults to true")
			}
		})
	}
}

func TestDecodeSpawnArgs_GeneratedNameAndWait(t *testing.T) {
	req, err := decodeSpawnArgs(jsonArgs(t, map[string]any{"profile": "codex-fast-with-a-rather-long-name", "wait": false, "timeoutMs": float64(1500)}))
	if err != nil {
		t.Fatal(err)
	}
	if !v1alpha1.IsMemberName(req.member.Name) || !strings.HasPrefix(req.member.Name, "codex-fast-with-a-rather") {
		t.Errorf("generated name %q", req.member.Name)
	}
	if req.wait || req.timeout != 1500*time.Millisecond {
		t.Errorf("wait=%v timeout=%v, want false 1.5s", req.wait, req.timeout)
	}
}

// jsonArgs encodes tool arguments as a client sends them.
func jsonArgs(t *testing.T, args map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeSpawnArgs_RawArguments: the arguments are judged as sent, so a
// key named twice is refused, and a forbidden value hidden in the copy a
// map decoder would drop is still a boundary error.
func TestDecodeSpawnArgs_RawArguments(t *testing.T) {
	for _, tt := range []struct{ name, args, wantCode, wantMsg string }{
		{"no arguments", ``, "invalid_spec", "spec.profile"},
		{"null", `null`, "invalid_spec", "spec.profile"},
		{"not an object", `[1]`, "invalid_argument", "arguments"},
		{"harmless duplicate", `{"profile":"claude","workspace":"a","workspace":"b"}`, "invalid_spec", "workspace: duplicate key"},
		{"secret in the dropped copy", `{"profile":"claude","workspace":"${OPENAI_API_KEY}","workspace":"api"}`, "subscription_boundary", "workspace"},
		{"secret in the kept copy", `{"profile":"claude","workspace":"api","workspace":"${OPENAI_API_KEY}"}`, "subscription_boundary", "workspace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeSpawnArgs([]byte(tt.args))
			te := fromCore(err)
			if err == nil || te.Code != tt.wantCode || !strings.Contains(te.Message, tt.wantMsg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestDecodeMemberBody(t *testing.T) {
	tests := []struct {
		name, body, wantCode, wantMsg string
	}{
		{"yaml member", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude}\n", "", ""},
		{"json member", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"r"},"spec":{"profile":"claude"}}`, "", ""},
		{"spawn args", `{"profile":"claude","name":"r"}`, "", ""},
		{"profile object", "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec: {harness: claude}\n", "invalid_spec", "want Member"},
		{"member with env", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude, env: {A: b}}\n", "subscription_boundary", "spec.env"},
		{"member with header", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude, extraHeaders: [a]}\n", "subscription_boundary", ""},
		{"legacy shape", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude, mcpTransport: {mode: resident}}\n", "invalid_spec", "fleetd migrate"},
		{"not an object", "- a\n- b\n", "invalid_spec", "request body"},
		{"json spawn args with a duplicate key", `{"profile":"claude","name":"r","name":"s"}`, "invalid_spec", "name: duplicate key"},
		{"json spawn args hiding a secret in a duplicate", `{"profile":"claude","name":"r","workspace":"$GH_TOKEN","workspace":"api"}`, "subscription_boundary", "workspace"},
		{"json member with a duplicate key", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"r"},"spec":{"profile":"claude","profile":"other"}}`, "invalid_spec", "spec.profile: duplicate key"},
		{"yaml spawn args with a duplicate key", "profile: claude\nname: r\nworkspace: a\nworkspace: b\n", "invalid_spec", `key "workspace" already set`},
		{"yaml member with a duplicate key", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude}\nspec: {profile: other}\n", "invalid_spec", `key "spec" already set`},
		{"two documents", "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: r}\nspec: {profile: claude}\n---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: s}\nspec: {profile: claude}\n", "invalid_spec", "exactly one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := decodeMemberBody([]byte(tt.body))
			if tt.wantCode == "" {
				if err != nil || req.member == nil || req.member.Name != "r" {
					t.Fatalf("decode = %+v, %v; want member r", req, err)
				}
				return
			}
			te := fromCore(err)
			if err == nil || te.Code != tt.wantCode || !strings.Contains(te.Message, tt.wantMsg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

// spawnLeavesOut are the MemberSpec fields that bridge_spawn (and POST
// /members in its argument shape) deliberately does not take, and why; a
// Member manifest (fleetd apply, POST /members with a Member) sets them.
var spawnLeavesOut = map[string]string{
	"cwd":          "a directory on the operator's machine is the operator's choice, made in a Profile or a manifest",
	"paused":       "a spawn starts a worker; pausing one is a later change of its manifest",
	"nodeName":     "where a member runs in a fleet on etcd is the operator's choice",
	"nodeSelector": "where a member runs in a fleet on etcd is the operator's choice",
	"worktree":     "a repository on the operator's machine is the operator's choice: a Profile's worktree gives every member spawned from it its own branch",
	// How long a busy agent may hold up its own stop or replacement is
	// the operator's to say, in a Profile or a manifest.
	"terminationGracePeriod": "how long a busy worker's tab may stay open once stopped is the operator's choice",
	"updateStrategy":         "how a spec change waits for a busy worker is the operator's choice",
}

// TestSpawnArgs_CoverTheMemberSpec fails when a MemberSpec field is added
// that bridge_spawn neither takes (a field of SpawnInput, whose JSON names
// are the accepted keys) nor deliberately leaves out (spawnLeavesOut), or
// when an argument is neither a spec field of the same type nor one about
// the call: adding a spec field is one change, in one of those two places.
func TestSpawnArgs_CoverTheMemberSpec(t *testing.T) {
	specFields := map[string]reflect.Type{}
	for f := range reflect.TypeFor[v1alpha1.MemberSpec]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		specFields[name] = f.Type
	}
	taken := map[string]bool{}
	for f := range reflect.TypeFor[SpawnInput]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !slices.Contains(spawnArgs, name) {
			t.Errorf("SpawnInput.%s (%s) is not an accepted bridge_spawn key", f.Name, name)
		}
		if slices.Contains(spawnCallArgs, name) {
			continue
		}
		typ, ok := specFields[name]
		switch {
		case !ok:
			t.Errorf("bridge_spawn argument %s is no MemberSpec field: make it one, or one about the call (spawnCallArgs)", name)
		case typ != f.Type:
			t.Errorf("bridge_spawn argument %s is a %v; MemberSpec's is a %v", name, f.Type, typ)
		default:
			taken[name] = true
		}
	}
	for name := range specFields {
		_, left := spawnLeavesOut[name]
		switch {
		case taken[name] && left:
			t.Errorf("spec.%s is both a bridge_spawn argument and left out of it", name)
		case !taken[name] && !left:
			t.Errorf("spec.%s is neither a bridge_spawn argument (a field of SpawnInput) nor left out of it on purpose (spawnLeavesOut)", name)
		}
	}
	for name := range spawnLeavesOut {
		if _, ok := specFields[name]; !ok {
			t.Errorf("spawnLeavesOut names spec.%s, which MemberSpec does not have", name)
		}
	}
	if got, want := spawnArgsText(), "profile, name, mcpTarget, transport, workspace, prompt, wait and timeoutMs"; got != want {
		t.Errorf("the accepted keys read %q; want %q", got, want)
	}
}

// A spec field spawn leaves out is refused by name, with the keys it takes.
func TestDecodeSpawnArgs_RefusesTheFieldsItLeavesOut(t *testing.T) {
	for name := range spawnLeavesOut {
		_, err := spawnFromArgs(map[string]any{"profile": "claude", name: "x"})
		if err == nil || !strings.Contains(err.Error(), name+": unknown field; bridge_spawn takes profile, name,") {
			t.Errorf("spawn with %s: %v; want it refused as an unknown field", name, err)
		}
	}
}
