package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fieldErrs(l FieldErrors) []string {
	var s []string
	for _, e := range l {
		s = append(s, e.Error())
	}
	return s
}

func TestIsMemberName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "reviewer": true, "a-b_c9": true, strings.Repeat("a", 32): true,
		"": false, "A": false, "9a": false, "-a": false, "_a": false, "a.b": false, "a b": false, "é": false,
		strings.Repeat("a", 33): false,
	} {
		if got := IsMemberName(name); got != want {
			t.Errorf("IsMemberName(%q) = %v, want %v", name, got, want)
		}
	}
	if !IsObjectName(strings.Repeat("a", 63)) || IsObjectName(strings.Repeat("a", 64)) {
		t.Errorf("IsObjectName: want 63 characters allowed and 64 refused")
	}
}

func TestIsEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"A": true, "_": true, "ACME_TOKEN_2": true, "lower": true,
		"": false, "2A": false, "A-B": false, "A=B": false, "A B": false,
	} {
		if got := IsEnvName(name); got != want {
			t.Errorf("IsEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}

func validMember() *Member {
	m := &Member{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindMember}, ObjectMeta: ObjectMeta{Name: "reviewer"}, Spec: MemberSpec{Profile: "codex"}}
	m.SetDefaults()
	return m
}

func TestMember_Validate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Member)
		want   []string
	}{
		{"valid", func(*Member) {}, nil},
		{"valid tenant", func(m *Member) { m.Spec.MCPTarget = &MCPTarget{Kind: TargetTenant, TenantID: "acme"} }, nil},
		{"valid stdio with cwd", func(m *Member) { m.Spec.Transport = TransportStdio; m.Spec.Cwd = "/srv" }, nil},
		{"apiVersion", func(m *Member) { m.APIVersion = "v1" }, []string{`apiVersion: unknown value "v1"; want fleetd.dev/v1alpha1`}},
		{"kind", func(m *Member) { m.Kind = "Profile" }, []string{`kind: unknown value "Profile"; want Member`}},
		{"name", func(m *Member) { m.Name = "Re" }, []string{`metadata.name: invalid name "Re"; want ^[a-z][a-z0-9_-]{0,31}$; it becomes the herdr agent name`}},
		{"no name", func(m *Member) { m.Name = "" }, []string{`metadata.name: required`}},
		{"no profile", func(m *Member) { m.Spec.Profile = "" }, []string{`spec.profile: required; name a Profile`}},
		{"bad profile ref", func(m *Member) { m.Spec.Profile = "A B" }, []string{`spec.profile: invalid name "A B"; want ^[a-z][a-z0-9_-]{0,62}$`}},
		{"tenant without id", func(m *Member) { m.Spec.MCPTarget = &MCPTarget{Kind: TargetTenant} }, []string{`spec.mcpTarget.tenantId: required; name a Tenant`}},
		{"resident with id", func(m *Member) { m.Spec.MCPTarget.TenantID = "acme" }, []string{`spec.mcpTarget.tenantId: forbidden unless kind is tenant`}},
		{"empty target kind", func(m *Member) { m.Spec.MCPTarget = &MCPTarget{} }, []string{`spec.mcpTarget.kind: required; want resident or tenant`}},
		{"bad target kind", func(m *Member) { m.Spec.MCPTarget.Kind = "Tenant" }, []string{`spec.mcpTarget.kind: unknown value "Tenant"; want resident or tenant`}},
		{"no target", func(m *Member) { m.Spec.MCPTarget = nil }, []string{`spec.mcpTarget: required`}},
		{"transport", func(m *Member) { m.Spec.Transport = "http" }, []string{`spec.transport: unknown value "http"; want stdio or streamable-http`}},
		{"no transport", func(m *Member) { m.Spec.Transport = "" }, []string{`spec.transport: required; want stdio or streamable-http`}},
		{"no workspace", func(m *Member) { m.Spec.Workspace = "" }, []string{`spec.workspace: required`}},
		{"relative cwd", func(m *Member) { m.Spec.Cwd = "srv" }, []string{`spec.cwd: want an absolute path, got "srv"`}},
		{"workspace of plain text", func(m *Member) { m.Spec.Workspace = "Équipe API / " + strings.Repeat("w", 50) }, nil},
		{"workspace too long", func(m *Member) { m.Spec.Workspace = strings.Repeat("é", 64) }, []string{`spec.workspace: invalid label: 64 characters; want at most 63`}},
		{"workspace with an escape", func(m *Member) { m.Spec.Workspace = "api\x1b]52;c;aGk=\a" }, []string{`spec.workspace: invalid label: "api\x1b]52;c;aGk=\a" holds the control character U+001B; want plain text`}},
		{"workspace with a newline", func(m *Member) { m.Spec.Workspace = "api\n[fleetd]" }, []string{`spec.workspace: invalid label: "api\n[fleetd]" holds the control character U+000A; want plain text`}},
		{"workspace with a C1 control", func(m *Member) { m.Spec.Workspace = "api\u009b31m" }, []string{`spec.workspace: invalid label: "api\u009b31m" holds the control character U+009B; want plain text`}},
		{"workspace not UTF-8", func(m *Member) { m.Spec.Workspace = "api\xff" }, []string{`spec.workspace: invalid label: "api\xff" is not valid UTF-8`}},
		{"prompt at the content limit", func(m *Member) { m.Spec.Prompt = strings.Repeat("p", MaxContentBytes) }, nil},
		{"prompt over the content limit", func(m *Member) { m.Spec.Prompt = strings.Repeat("p", MaxContentBytes+1) }, []string{
			`spec.prompt: 262145 bytes, over the limit of 262144 bytes on a message's content; it could never be delivered: shorten it`}},
		{"grace period and max wait", func(m *Member) {
			m.Spec.TerminationGracePeriod = &Duration{time.Minute}
			m.Spec.UpdateStrategy = &UpdateStrategy{MaxWait: &Duration{time.Hour}}
		}, nil},
		{"update strategy without a max wait", func(m *Member) { m.Spec.UpdateStrategy = &UpdateStrategy{} }, nil},
		{"negative grace period", func(m *Member) { m.Spec.TerminationGracePeriod = &Duration{-time.Second} }, []string{
			`spec.terminationGracePeriod: -1s out of range; want more than 0s`}},
		{"negative max wait", func(m *Member) { m.Spec.UpdateStrategy = &UpdateStrategy{MaxWait: &Duration{-time.Minute}} }, []string{
			`spec.updateStrategy.maxWait: -1m0s out of range; want more than 0s`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMember()
			tt.mutate(m)
			if diff := cmp.Diff(tt.want, fieldErrs(m.Validate())); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfile_Validate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ProfileSpec)
		want   []string
	}{
		{"valid", func(*ProfileSpec) {}, nil},
		{"valid bounds", func(s *ProfileSpec) {
			s.StartupTimeout.Duration = 300 * time.Second
			s.RestartPolicy = RestartOnFailure
			s.Resume = ResumeNever
		}, nil},
		{"no harness", func(s *ProfileSpec) { s.Harness = "" }, []string{`spec.harness: required; want a herdr agent kind such as claude or codex`}},
		{"harness with a path", func(s *ProfileSpec) { s.Harness = "/bin/sh" }, []string{`spec.harness: invalid value "/bin/sh"; want a lower-case herdr agent kind such as claude or codex`}},
		{"startup too short", func(s *ProfileSpec) { s.StartupTimeout.Duration = 3 * time.Second }, []string{`spec.startupTimeout: 3s out of range; want more than 3s and at most 5m0s`}},
		{"startup too long", func(s *ProfileSpec) { s.StartupTimeout.Duration = 301 * time.Second }, []string{`spec.startupTimeout: 5m1s out of range; want more than 3s and at most 5m0s`}},
		{"restart policy", func(s *ProfileSpec) { s.RestartPolicy = "never" }, []string{`spec.restartPolicy: unknown value "never"; want Always, OnFailure or Never`}},
		{"tool timeout", func(s *ProfileSpec) { s.ToolTimeout.Duration = -time.Second }, []string{`spec.toolTimeout: -1s out of range; want more than 0s`}},
		{"resume lower case", func(s *ProfileSpec) { s.Resume = "never" }, []string{`spec.resume: unknown value "never"; want Auto or Never`}},
		{"resume unknown", func(s *ProfileSpec) { s.Resume = "Always" }, []string{`spec.resume: unknown value "Always"; want Auto or Never`}},
		{"cwd", func(s *ProfileSpec) { s.Cwd = "./x" }, []string{`spec.cwd: want an absolute path, got "./x"`}},
		{"env keys", func(s *ProfileSpec) { s.Env = map[string]string{"": "a", "A=B": "c", "N\x00": "d", "OK": ""} }, []string{
			`spec.env: empty variable name`,
			`spec.env: invalid variable name "A=B": must not contain "=" or NUL`,
			`spec.env: invalid variable name "N\x00": must not contain "=" or NUL`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Profile{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindProfile}, ObjectMeta: ObjectMeta{Name: "codex-fast"}, Spec: ProfileSpec{Harness: "codex"}}
			p.SetDefaults()
			tt.mutate(&p.Spec)
			if diff := cmp.Diff(tt.want, fieldErrs(p.Validate())); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTenant_Validate(t *testing.T) {
	tests := []struct {
		name string
		spec TenantSpec
		want []string
	}{
		{"valid", TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_TOKEN"}, nil},
		{"valid http", TenantSpec{URL: "http://127.0.0.1:8080/mcp", CredentialEnv: "_T"}, nil},
		{"empty", TenantSpec{}, []string{
			`spec.url: required; want the tenant gateway's absolute https URL`,
			`spec.credentialEnv: required; want the NAME of the environment variable holding the credential`,
		}},
		{"relative url", TenantSpec{URL: "/mcp", CredentialEnv: "A"}, []string{`spec.url: invalid value "/mcp"; want an absolute http or https URL`}},
		{"other scheme", TenantSpec{URL: "ws://a.example", CredentialEnv: "A"}, []string{`spec.url: invalid value "ws://a.example"; want an absolute http or https URL`}},
		{"userinfo", TenantSpec{URL: "https://t:secret@a.example", CredentialEnv: "A"}, []string{`spec.url: must not carry user information; name the credential's variable in spec.credentialEnv`}},
		{"credential value instead of name", TenantSpec{URL: "https://a.example", CredentialEnv: "sk-abc.def"}, []string{`spec.credentialEnv: invalid variable name "sk-abc.def"; want ^[A-Za-z_][A-Za-z0-9_]*$`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := &Tenant{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindTenant}, ObjectMeta: ObjectMeta{Name: "acme"}, Spec: tt.spec}
			if diff := cmp.Diff(tt.want, fieldErrs(tn.Validate())); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldErrors_Err(t *testing.T) {
	if (FieldErrors{}).Err() != nil {
		t.Errorf("empty list: Err() != nil")
	}
	l := FieldErrors{{Field: "a", Msg: "x"}, {Field: "b", Msg: "y"}}
	if err := l.Err(); err == nil || err.Error() != "a: x\nb: y" {
		t.Errorf("Err() = %v, want two lines", err)
	}
}

// metadata.labels follow Kubernetes' rule on every kind: a key is a name
// of at most 63 characters (alphanumerics, '-', '_', '.', alphanumeric at
// both ends) with an optional DNS-subdomain prefix of at most 253 and a
// slash; a value is empty or such a name. A bad key is reported without
// the key in the field path.
func TestValidate_Labels(t *testing.T) {
	long := func(n int) string { return strings.Repeat("v", n) }
	prefix253 := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	tests := []struct {
		key, value string
		want       string // "" valid
	}{
		{"team", "api", ""},
		{"app.kubernetes.io/name", "", ""},
		{"Team_1.x", "A-b_c.9", ""},
		{long(63), long(63), ""},
		{prefix253 + "/" + long(63), "v", ""},
		{"", "x", `metadata.labels: invalid label key: empty; want a name such as team or example.com/team`},
		{long(64), "v", `metadata.labels: invalid label key: "` + long(64) + `": want a name of at most 63 characters`},
		{prefix253 + "e/name", "v", `metadata.labels: invalid label key: "` + truncated(prefix253+"e/name") + `" has a prefix that is not a DNS subdomain of at most 253 characters`},
		{"Example.com/name", "v", `metadata.labels: invalid label key: "Example.com/name" has a prefix that is not a DNS subdomain`},
		{"bad\x1bkey", "v", `metadata.labels: invalid label key: "bad\x1bkey": want a name`},
		{"-team", "v", `metadata.labels: invalid label key: "-team": want a name`},
		{"a/b/c", "v", `metadata.labels: invalid label key: "a/b/c": want a name`},
		{"k", long(64), `metadata.labels[k]: invalid label value: "` + long(64) + `": want at most 63 characters`},
		{"k", "a\x00b", `metadata.labels[k]: invalid label value: "a\x00b": want at most 63 characters`},
		{"k", "api team", `metadata.labels[k]: invalid label value: "api team": want at most 63 characters`},
		{"k", "team-", `metadata.labels[k]: invalid label value: "team-": want at most 63 characters`},
	}
	for _, tt := range tests {
		labels := map[string]string{tt.key: tt.value}
		m := validMember()
		m.Labels = labels
		p := &Profile{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindProfile}, ObjectMeta: ObjectMeta{Name: "p", Labels: labels}, Spec: ProfileSpec{Harness: "codex"}}
		p.SetDefaults()
		tn := &Tenant{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindTenant}, ObjectMeta: ObjectMeta{Name: "t", Labels: labels},
			Spec: TenantSpec{URL: "https://a.example/mcp", CredentialEnv: "T"}}
		for kind, errs := range map[string]FieldErrors{KindMember: m.Validate(), KindProfile: p.Validate(), KindTenant: tn.Validate()} {
			got := fieldErrs(errs)
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("%s label %q=%q: %v, want valid", kind, tt.key, tt.value, got)
			case tt.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.want)):
				t.Errorf("%s label %q=%q: %q, want one error beginning %q", kind, tt.key, tt.value, got, tt.want)
			}
		}
	}
}

// Annotations: keys as label keys, keys and values together at most
// 256 KiB (Kubernetes' limit) — a 1.5 MB annotation is refused where it
// enters, not streamed to every watcher.
func TestValidate_Annotations(t *testing.T) {
	m := validMember()
	m.Annotations = map[string]string{"note": strings.Repeat("x", MaxAnnotationsBytes-len("note")), "": ""}
	if got := fieldErrs(m.Validate()); len(got) != 1 || got[0] != `metadata.annotations: invalid key: empty; want a name such as team or example.com/team` {
		t.Errorf("annotations of 256 KiB with an empty key: %q, want the key refused only", got)
	}
	m.Annotations = map[string]string{"note": strings.Repeat("<", 1500<<10)}
	want := `metadata.annotations: keys and values hold 1536004 bytes together; want at most 262144 (256 KiB)`
	if got := fieldErrs(m.Validate()); len(got) == 0 || got[0] != want {
		t.Errorf("an annotation of 1.5 MB: %q, want %q", got, want)
	}
}

// Every other free text of the objects is bounded too, and the whole —
// metadata and spec as JSON — is at most MaxObjectJSONBytes.
func TestValidate_BoundsEveryFreeText(t *testing.T) {
	withMember := func(edit func(m *Member)) FieldErrors {
		m := validMember()
		edit(m)
		return m.Validate()
	}
	profile := func(edit func(p *ProfileSpec)) FieldErrors {
		p := &Profile{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindProfile}, ObjectMeta: ObjectMeta{Name: "p"}, Spec: ProfileSpec{Harness: "codex"}}
		p.SetDefaults()
		edit(&p.Spec)
		return p.Validate()
	}
	tenant := func(edit func(s *TenantSpec)) FieldErrors {
		tn := &Tenant{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindTenant}, ObjectMeta: ObjectMeta{Name: "t"}, Spec: TenantSpec{URL: "https://a.example/mcp", CredentialEnv: "T"}}
		edit(&tn.Spec)
		return tn.Validate()
	}
	for _, tt := range []struct {
		name string
		errs FieldErrors
		want string
	}{
		{"a cwd longer than PATH_MAX", withMember(func(m *Member) { m.Spec.Cwd = "/" + strings.Repeat("d", MaxPathBytes) }), "spec.cwd: 4097 bytes; want a path of at most 4096"},
		{"a cwd with NUL", withMember(func(m *Member) { m.Spec.Cwd = "/a\x00b" }), "spec.cwd: holds NUL"},
		{"a prompt and annotations of 3 MiB of JSON together", withMember(func(m *Member) {
			m.Spec.Prompt = strings.Repeat("<", MaxContentBytes)
			m.Annotations = map[string]string{"note": strings.Repeat("<", MaxAnnotationsBytes-len("note"))}
		}), "spec: with its metadata the object is "},
		{"a long description", profile(func(p *ProfileSpec) { p.Description = strings.Repeat("d", MaxDescriptionBytes+1) }), "spec.description: 4097 bytes; want at most 4096"},
		{"args and env over the launch bound", profile(func(p *ProfileSpec) {
			p.Args = []string{strings.Repeat("a", MaxLaunchBytes/2)}
			p.Env = map[string]string{"E": strings.Repeat("e", MaxLaunchBytes/2)}
		}), "spec: args and env hold 262145 bytes together; want at most 262144"},
		{"a long variable name", profile(func(p *ProfileSpec) { p.Env = map[string]string{strings.Repeat("E", MaxEnvNameBytes+1): "x"} }), "spec.env: a variable name of 257 bytes"},
		{"a long harness", profile(func(p *ProfileSpec) { p.Harness = strings.Repeat("h", 64) }), "spec.harness: invalid value"},
		{"a long URL", tenant(func(s *TenantSpec) { s.URL = "https://a.example/" + strings.Repeat("p", MaxURLBytes) }), "spec.url: 2066 bytes; want at most 2048"},
		{"a long credentialEnv", tenant(func(s *TenantSpec) { s.CredentialEnv = strings.Repeat("T", MaxEnvNameBytes+1) }), "spec.credentialEnv: 257 bytes"},
	} {
		got := fieldErrs(tt.errs)
		if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
			t.Errorf("%s: %q, want one error beginning %q", tt.name, got, tt.want)
		}
	}
}

func TestValidate_Placement(t *testing.T) {
	m := validMember()
	m.Spec.NodeName = "buildbox"
	m.Spec.NodeSelector = map[string]string{"gpu": "a100", "zone": ""}
	if errs := m.Validate(); len(errs) != 0 {
		t.Errorf("a valid nodeName and nodeSelector: %v", errs)
	}
	m.Spec.NodeName = "Build Box"
	m.Spec.NodeSelector = map[string]string{"": "x", "ctl": "a\x00b"}
	want := []string{
		`spec.nodeName: invalid node name "Build Box"; want ^[a-z][a-z0-9_-]{0,62}$`,
		`spec.nodeSelector: invalid label key: empty; want a name such as team or example.com/team`,
		`spec.nodeSelector[ctl]: invalid label value: "a\x00b": want at most 63 characters: alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric (or empty)`,
	}
	if diff := cmp.Diff(want, fieldErrs(m.Validate())); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	big := map[string]string{}
	for i := range MaxNodeLabels + 1 {
		big[fmt.Sprint("k", i)] = "v"
	}
	m.Spec.NodeName, m.Spec.NodeSelector = "", big
	if errs := fieldErrs(m.Validate()); len(errs) != 1 || !strings.Contains(errs[0], "65 pairs") {
		t.Errorf("65 pairs: %v", errs)
	}
	// A deep copy shares no selector.
	cp := m.DeepCopy()
	cp.Spec.NodeSelector["k0"] = "changed"
	if m.Spec.NodeSelector["k0"] != "v" {
		t.Error("DeepCopy shares spec.nodeSelector")
	}
}
