package decode

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// member is a valid Member document whose spec lines are replaced by spec
// (each line indented by two spaces). Its spec starts on line 6.
func member(spec ...string) string {
	return "apiVersion: fleetd.dev/v1alpha1\n" +
		"kind: Member\n" +
		"metadata:\n" +
		"  name: reviewer\n" +
		"spec:\n" +
		indent(spec)
}

// profile is a Profile document whose spec starts on line 6.
func profile(spec ...string) string {
	return "apiVersion: fleetd.dev/v1alpha1\n" +
		"kind: Profile\n" +
		"metadata:\n" +
		"  name: codex-fast\n" +
		"spec:\n" +
		indent(spec)
}

// tenant is a Tenant document whose spec starts on line 6.
func tenant(spec ...string) string {
	return "apiVersion: fleetd.dev/v1alpha1\n" +
		"kind: Tenant\n" +
		"metadata:\n" +
		"  name: acme\n" +
		"spec:\n" +
		indent(spec)
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func errStrings(l ErrorList) []string {
	var s []string
	for _, e := range l {
		s = append(s, e.Error())
	}
	return s
}

// TestFile_ErrorClasses checks each class of error with its exact
// file:line: field: message.
func TestFile_ErrorClasses(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "syntax error",
			in:   "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: [x\n",
			want: []string{`m.yaml:3: invalid YAML: did not find expected ',' or ']'`},
		},
		{
			name: "scanner error",
			in:   "kind: Member\nmetadata:\n  name: a\n  b: c\n    d: e\n",
			want: []string{`m.yaml:5: invalid YAML: mapping values are not allowed in this context`},
		},
		{
			name: "duplicate key",
			in:   member("profile: a", "transport: stdio", "profile: b"),
			want: []string{`m.yaml:8: spec.profile: duplicate key (first at line 6)`},
		},
		{
			name: "unknown fields are all reported",
			in:   member("profile: a", "colour: red", "mcpTarget: {kind: resident, flavour: x}"),
			want: []string{
				`m.yaml:7: spec.colour: unknown field; want one of profile, mcpTarget, transport, workspace, cwd, prompt, paused, nodeName, nodeSelector, worktree, terminationGracePeriod, updateStrategy`,
				`m.yaml:8: spec.mcpTarget.flavour: unknown field; want one of kind, tenantId`,
			},
		},
		{
			name: "unknown top-level and metadata fields",
			in:   "apiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: acme\n  namespace: x\nspec:\n  url: https://a.example\n  credentialEnv: A\nextra: 1\n",
			want: []string{
				`m.yaml:5: metadata.namespace: unknown field; want one of name, labels, annotations, uid, generation, creationTimestamp, resourceVersion`,
				`m.yaml:9: extra: unknown field; want one of apiVersion, kind, metadata, spec`,
			},
		},
		{
			name: "wrong types",
			in:   member("profile: [a]", "paused: yes", "workspace: 12", "mcpTarget: resident"),
			want: []string{
				`m.yaml:6: spec.profile: want a string, got a list`,
				`m.yaml:7: spec.paused: want true or false, got string "yes"`,
				`m.yaml:8: spec.workspace: want a string, got number 12`,
				`m.yaml:9: spec.mcpTarget: want a mapping, got string "resident"`,
			},
		},
		{
			name: "wrong types in a profile",
			in:   profile("harness: codex", "args: [a, 1]", "env: {A: 2}", "startupTimeout: 60", "toolTimeout: soon"),
			want: []string{
				`m.yaml:7: spec.args[1]: want a string, got number 1`,
				`m.yaml:8: spec.env[A]: want a string, got number 2`,
				`m.yaml:9: spec.startupTimeout: want a duration such as "60s" or "15m", got number 60`,
				`m.yaml:10: spec.toolTimeout: invalid duration "soon"; want a form such as "60s" or "15m"`,
			},
		},
		{
			name: "bad enum values",
			in:   member("profile: a", "transport: http", "mcpTarget: {kind: remote}"),
			want: []string{
				`m.yaml:7: spec.transport: unknown value "http"; want stdio or streamable-http`,
				`m.yaml:8: spec.mcpTarget.kind: unknown value "remote"; want resident or tenant`,
			},
		},
		{
			name: "missing required fields",
			in:   "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {}\nspec:\n  transport: stdio\n",
			want: []string{
				`m.yaml:3: metadata.name: required`,
				`m.yaml:4: spec.profile: required; name a Profile`,
			},
		},
		{
			name: "tenantId required iff kind is tenant",
			in:   member("profile: a", "mcpTarget:", "  kind: tenant") + "---\n" + member("profile: a", "mcpTarget:", "  kind: resident", "  tenantId: acme"),
			want: []string{
				`m.yaml:7: spec.mcpTarget.tenantId: required; name a Tenant`,
				`m.yaml:18: spec.mcpTarget.tenantId: forbidden unless kind is tenant`,
			},
		},
		{
			name: "failed validation",
			in:   "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: Reviewer\nspec:\n  profile: a\n  cwd: srv/api\n",
			want: []string{
				`m.yaml:4: metadata.name: invalid name "Reviewer"; want ^[a-z][a-z0-9_-]{0,31}$; it becomes the herdr agent name`,
				`m.yaml:7: spec.cwd: want an absolute path, got "srv/api"`,
			},
		},
		{
			name: "profile validation",
			in:   profile("harness: Codex", "cwd: rel", "startupTimeout: 3s", "restartPolicy: always", "toolTimeout: -1s", `env: {"A=B": x, "": y}`, "resume: auto"),
			want: []string{
				`m.yaml:6: spec.harness: invalid value "Codex"; want a lower-case herdr agent kind such as claude or codex`,
				`m.yaml:7: spec.cwd: want an absolute path, got "rel"`,
				`m.yaml:8: spec.startupTimeout: 3s out of range; want more than 3s and at most 5m0s`,
				`m.yaml:9: spec.restartPolicy: unknown value "always"; want Always, OnFailure or Never`,
				`m.yaml:10: spec.toolTimeout: -1s out of range; want more than 0s`,
				`m.yaml:11: spec.env: empty variable name`,
				`m.yaml:11: spec.env: invalid variable name "A=B": must not contain "=" or NUL`,
				`m.yaml:12: spec.resume: unknown value "auto"; want Auto or Never`,
			},
		},
		{
			// 0s is not "the default": only a field left out is defaulted.
			name: "durations written as zero",
			in:   profile("harness: codex", "startupTimeout: 0s", "toolTimeout: 0m"),
			want: []string{
				`m.yaml:7: spec.startupTimeout: 0s out of range; want more than 3s and at most 5m0s (0s is not the default: leave the field out for 1m0s)`,
				`m.yaml:8: spec.toolTimeout: 0s out of range; want more than 0s (0s is not the default: leave the field out for 15m0s)`,
			},
		},
		{
			name: "grace periods and waits written as zero",
			in: profile("harness: codex", "terminationGracePeriod: 0s") + "---\n" +
				member("profile: codex-fast", "terminationGracePeriod: 0s", "updateStrategy: {maxWait: 0m}"),
			want: []string{
				`m.yaml:7: spec.terminationGracePeriod: 0s out of range; want more than 0s (0s is not the default: leave the field out for 10m0s)`,
				`m.yaml:15: spec.terminationGracePeriod: 0s out of range; want more than 0s (0s is not the default: leave the field out for the profile's spec.terminationGracePeriod)`,
				`m.yaml:16: spec.updateStrategy.maxWait: 0s out of range; want more than 0s (0s is not the default: leave the field out for waiting until the agent is idle, however long)`,
			},
		},
		{
			name: "tenant validation",
			in:   tenant("url: fleet.acme.example/mcp", "credentialEnv: ACME-TOKEN") + "---\n" + tenant("url: https://u:p@acme.example/mcp"),
			want: []string{
				`m.yaml:6: spec.url: invalid value "fleet.acme.example/mcp"; want an absolute http or https URL`,
				`m.yaml:7: spec.credentialEnv: invalid variable name "ACME-TOKEN"; want ^[A-Za-z_][A-Za-z0-9_]*$`,
				`m.yaml:13: spec.credentialEnv: required; want the NAME of the environment variable holding the credential`,
				`m.yaml:14: spec.url: must not carry user information; name the credential's variable in spec.credentialEnv`,
			},
		},
		{
			// A workspace is a label; a prompt longer than a message's
			// content limit could never be delivered. Both are refused
			// where they are written, not when fleetd acts on them.
			name: "member bounds: workspace label and prompt size",
			in: member("profile: a", `workspace: "api\e[2J"`, "prompt: "+strings.Repeat("p", v1alpha1.MaxContentBytes+1)) + "---\n" +
				strings.Replace(member("profile: a", "workspace: "+strings.Repeat("w", 64)), "  name: reviewer\n", "  name: other\n  labels: {team: \"a\\nb\"}\n", 1),
			want: []string{
				`m.yaml:7: spec.workspace: invalid label: "api\x1b[2J" holds the control character U+001B; want plain text`,
				`m.yaml:8: spec.prompt: 262145 bytes, over the limit of 262144 bytes on a message's content; it could never be delivered: shorten it`,
				`m.yaml:14: metadata.labels[team]: invalid label value: "a\nb": want at most 63 characters: alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric (or empty)`,
				`m.yaml:17: spec.workspace: invalid label: 64 characters; want at most 63`,
			},
		},
		{
			name: "wrong apiVersion",
			in:   strings.Replace(tenant("url: https://a.example", "credentialEnv: A"), "v1alpha1", "v1", 1),
			want: []string{`m.yaml:1: apiVersion: unknown value "fleetd.dev/v1"; want fleetd.dev/v1alpha1`},
		},
		{
			name: "missing kind",
			in:   "\n# a comment\napiVersion: fleetd.dev/v1alpha1\nmetadata: {name: a}\n",
			want: []string{`m.yaml:3: not a fleetd object: missing kind; every document needs apiVersion: fleetd.dev/v1alpha1 and kind: Member, Profile or Tenant`},
		},
		{
			name: "unknown kind",
			in:   "apiVersion: fleetd.dev/v1alpha1\nkind: Pod\n",
			want: []string{`m.yaml:2: kind: unknown value "Pod"; want Member, Profile or Tenant`},
		},
		{
			name: "document is not a mapping",
			in:   "- a\n- b\n",
			want: []string{`m.yaml:1: want a mapping with apiVersion, kind, metadata and spec, got a list`},
		},
		{
			name: "legacy mcpTransport, whatever its value",
			in:   member("profile: a", "mcpTransport:", "  mode: resident") + "---\n" + member("profile: a", "mcpTransport: {}"),
			want: []string{
				`m.yaml:7: spec.mcpTransport: legacy field; run "fleetd migrate DIR" to rewrite it as spec.mcpTarget and spec.transport`,
				`m.yaml:16: spec.mcpTransport: legacy field; run "fleetd migrate DIR" to rewrite it as spec.mcpTarget and spec.transport`,
			},
		},
		{
			name: "closed member spec",
			in: member("profile: a", "env: {A: b}", "URL: https://x.example", "mcpTarget:", "  kind: resident", "  apiKey: k",
				"command: [sh]", "args: [x]", "extraHeaders: {}", "options:", "  - bearer_token: t", "credentialEnv: A"),
			want: []string{
				`m.yaml:7: spec.env: a Member never carries environment; put it in a Profile's spec.env`,
				`m.yaml:8: spec.URL: a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget`,
				`m.yaml:11: spec.mcpTarget.apiKey: a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget`,
				`m.yaml:12: spec.command: a Member never carries a command or arguments; put them in a Profile (spec.harness, spec.args)`,
				`m.yaml:13: spec.args: a Member never carries a command or arguments; put them in a Profile (spec.harness, spec.args)`,
				`m.yaml:14: spec.extraHeaders: a Member never carries headers; fleetd derives them from a Tenant's spec.credentialEnv, referenced with spec.mcpTarget`,
				`m.yaml:15: spec.options: unknown field; want one of profile, mcpTarget, transport, workspace, cwd, prompt, paused, nodeName, nodeSelector, worktree, terminationGracePeriod, updateStrategy`,
				`m.yaml:16: spec.options[0].bearer_token: a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget`,
				`m.yaml:17: spec.credentialEnv: a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget`,
			},
		},
		{
			name: "CRLF line ends and a directive",
			in:   "%YAML 1.1\r\n---\r\n" + strings.ReplaceAll(member("profile: a", "transport: http"), "\n", "\r\n"),
			want: []string{`m.yaml:9: spec.transport: unknown value "http"; want stdio or streamable-http`},
		},
		{
			name: "several documents, every problem",
			in: member("profile: a", "transport: http") + "---\n---\n# only a comment\n---\n" +
				profile("harness: codex", "bogus: 1") + "---\nkind: [\n---\n" + tenant("url: https://a.example"),
			want: []string{
				`m.yaml:7: spec.transport: unknown value "http"; want stdio or streamable-http`,
				`m.yaml:18: spec.bogus: unknown field; want one of harness, description, args, env, cwd, startupTimeout, restartPolicy, toolTimeout, resume, worktree, terminationGracePeriod, rollout`,
				`m.yaml:20: invalid YAML: did not find expected node content`,
				`m.yaml:26: spec.credentialEnv: required; want the NAME of the environment variable holding the credential`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, errs := File("m.yaml", []byte(tt.in))
			if diff := cmp.Diff(tt.want, errStrings(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\ninput:\n%s", diff, tt.in)
			}
			for _, o := range objs {
				if o == nil {
					t.Errorf("nil object returned")
				}
			}
		})
	}
}

// TestFile_ValidObjects checks that a valid multi-document file of mixed
// kinds decodes to defaulted objects and that fleetd-owned fields are
// accepted and dropped.
func TestFile_ValidObjects(t *testing.T) {
	in := `# comment before the first document
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer
  labels: {team: api}
  uid: 0b3c
  generation: 7
  creationTimestamp: "2026-01-02T15:04:05Z"
spec:
  profile: codex-fast
  prompt: "Review open PRs"
status:
  phase: Ready
  restarts: 3
---
kind: Profile
apiVersion: fleetd.dev/v1alpha1
metadata: {name: codex-fast}
spec:
  harness: codex
  args: ["-m", "gpt-5.4"]
  env: {OPENAI_BASE_URL: "http://localhost:1"}
  resume: Never
---
apiVersion: fleetd.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec:
  url: https://fleet.acme.example/mcp
  credentialEnv: ACME_FLEETD_TOKEN
...
`
	objs, errs := File("m.yaml", []byte(in))
	if errs.Err() != nil {
		t.Fatalf("unexpected errors:\n%v", errs)
	}
	tm := func(kind string) v1alpha1.TypeMeta {
		return v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: kind}
	}
	want := []v1alpha1.Object{
		&v1alpha1.Member{
			TypeMeta:   tm("Member"),
			ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer", Labels: map[string]string{"team": "api"}},
			Spec: v1alpha1.MemberSpec{
				Profile:   "codex-fast",
				MCPTarget: &v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident},
				Transport: v1alpha1.TransportStreamableHTTP,
				Workspace: "fleetd",
				Prompt:    "Review open PRs",
			},
		},
		&v1alpha1.Profile{
			TypeMeta:   tm("Profile"),
			ObjectMeta: v1alpha1.ObjectMeta{Name: "codex-fast"},
			Spec: v1alpha1.ProfileSpec{
				Harness:                "codex",
				Args:                   []string{"-m", "gpt-5.4"},
				Env:                    map[string]string{"OPENAI_BASE_URL": "http://localhost:1"},
				StartupTimeout:         v1alpha1.Duration{Duration: 60 * time.Second},
				RestartPolicy:          v1alpha1.RestartAlways,
				ToolTimeout:            v1alpha1.Duration{Duration: 15 * time.Minute},
				Resume:                 v1alpha1.ResumeNever,
				TerminationGracePeriod: v1alpha1.Duration{Duration: v1alpha1.DefaultTerminationGracePeriod},
			},
		},
		&v1alpha1.Tenant{
			TypeMeta:   tm("Tenant"),
			ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"},
			Spec:       v1alpha1.TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"},
		},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestFile_ObjectsOnlyFromCleanDocuments checks that a bad document does
// not take its good neighbours down with it, and is itself left out.
func TestFile_ObjectsOnlyFromCleanDocuments(t *testing.T) {
	in := member("profile: a") + "---\n" + member("profile: a", "transport: http") + "---\n" + tenant("url: https://a.example", "credentialEnv: A")
	objs, errs := File("m.yaml", []byte(in))
	if len(errs) != 1 {
		t.Errorf("got %d errors, want 1:\n%v", len(errs), errs)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind()+"/"+o.GetName())
	}
	if diff := cmp.Diff([]string{"Member/reviewer", "Tenant/acme"}, kinds); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestFile_EmptyDocumentsAreSkipped(t *testing.T) {
	for _, in := range []string{"", "\n", "# nothing\n", "---\n", "---\n# c\n---\n...\n", "--- null\n"} {
		objs, errs := File("m.yaml", []byte(in))
		if len(objs) != 0 || len(errs) != 0 {
			t.Errorf("File(%q) = %d objects, errors %v; want nothing", in, len(objs), errs)
		}
	}
}

func TestFile_AliasBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec:\n  harness: codex\n  args: &a0 [x, x]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "  x%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	_, errs := File("m.yaml", []byte(b.String()))
	if len(errs) == 0 || !strings.Contains(errs.Error(), "aliases expand too far") {
		t.Errorf("alias bomb: got %v, want an expansion error", errs)
	}
	_, errs = File("m.yaml", []byte("a: &x [*x]\n"))
	if errs.Err() == nil {
		t.Errorf("self-referencing alias: no error")
	}
}

// TestManifest_ErrorsNameTheObjectTheirDocumentDeclares: a document with
// errors defines no object, and its errors say which one it meant, so that
// `fleetd describe member NAME` can point at the broken file; a syntax
// error cannot tell.
func TestManifest_ErrorsNameTheObjectTheirDocumentDeclares(t *testing.T) {
	data := []byte(`apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: typo}
spec: {profile: claude, transport: http}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: 7}
spec: {profile: claude, bogus: 1}
---
kind: Member
metadata: {name: [broken
`)
	f := Manifest("m.yaml", data)
	var got []string
	for _, e := range f.Errors {
		got = append(got, fmt.Sprintf("%d %s/%s", e.Line, e.Kind, e.Name))
	}
	want := []string{"4 Member/typo", "8 Member/", "9 Member/", "12 /"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors' declared objects (-want +got):\n%s\n%v", diff, f.Errors)
	}
}

// spec.rollout.maxUnavailable is a count or a percent, as a Deployment's
// is; anything else is an error at its line.
func TestFile_MaxUnavailable(t *testing.T) {
	doc := func(v string) string {
		return "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\nspec:\n  harness: codex\n  rollout:\n    maxUnavailable: " + v + "\n"
	}
	for _, tc := range []struct {
		value, want string // want: the error, "" for none
	}{
		{"2", ""}, {`"25%"`, ""}, {"100%", ""},
		{"0", "p.yaml:7: spec.rollout.maxUnavailable: 0 out of range; want at least 1 (fleetd starts no extra agents, so 0 would replace nothing)"},
		{`"0%"`, "p.yaml:7: spec.rollout.maxUnavailable: 0% out of range; want a percent from 1% to 100%"},
		{`"2"`, `p.yaml:7: spec.rollout.maxUnavailable: invalid value "2"; want a count such as 2 or a percent such as "25%"`},
		{"true", `p.yaml:7: spec.rollout.maxUnavailable: want a count such as 2 or a percent such as "25%", got boolean true`},
	} {
		objs, errs := File("p.yaml", []byte(doc(tc.value)))
		switch {
		case tc.want == "" && (len(errs) > 0 || len(objs) != 1):
			t.Errorf("maxUnavailable: %s: %v", tc.value, errs)
		case tc.want != "" && (len(errs) != 1 || errs[0].Error() != tc.want):
			t.Errorf("maxUnavailable: %s: errors %v; want %q", tc.value, errs, tc.want)
		}
	}
}

// The walk sets a document's fields itself instead of decoding them with
// encoding/json, which is right only while every type it meets decodes
// JSON the plain way — or is one of the types the walk decodes by their
// own rules — and every field name it knows is one encoding/json knows. A
// type added to the API with an UnmarshalJSON of its own must get a case in
// walkValue first.
func TestWalk_DecodesEveryTypeItself(t *testing.T) {
	ownRules := map[reflect.Type]bool{
		reflect.TypeFor[v1alpha1.Duration]():     true,
		reflect.TypeFor[v1alpha1.IntOrPercent](): true,
		reflect.TypeFor[time.Time]():             true,
	}
	seen := map[reflect.Type]bool{}
	var check func(typ reflect.Type, path string)
	check = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if seen[typ] {
			return
		}
		seen[typ] = true
		if ownRules[typ] {
			return
		}
		ptr := reflect.PointerTo(typ)
		if ptr.Implements(reflect.TypeFor[json.Unmarshaler]()) || ptr.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			t.Errorf("%s: %s decodes JSON its own way; walkValue must decode it by the same rules", path, typ)
			return
		}
		switch typ.Kind() {
		case reflect.Slice:
			check(typ.Elem(), path+"[0]")
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				t.Errorf("%s: map keys of kind %s; the walk reads string keys only", path, typ.Key().Kind())
			}
			check(typ.Elem(), path+"[key]")
		case reflect.Struct:
			fields, names := jsonFields(typ)
			for _, name := range names {
				if FleetdOwned(joinField(path, name)) {
					continue // never walked
				}
				dec := json.NewDecoder(strings.NewReader(`{"` + name + `": null}`))
				dec.DisallowUnknownFields()
				if err := dec.Decode(reflect.New(typ).Interface()); err != nil && strings.Contains(err.Error(), "unknown field") {
					t.Errorf("%s: field %q is one encoding/json does not know: %v", path, name, err)
				}
				check(fields[name].typ, joinField(path, name))
			}
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		default:
			t.Errorf("%s: %s, a kind the walk does not read", path, typ)
		}
	}
	for _, obj := range []v1alpha1.Object{&v1alpha1.Member{}, &v1alpha1.Profile{}, &v1alpha1.Tenant{}} {
		check(reflect.TypeOf(obj), "")
	}
}
