package v1alpha1

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Name rules. A member's name becomes its herdr agent name, so it follows
// herdr's rule exactly. Profile and Tenant names, and the references to them
// (spec.profile, spec.mcpTarget.tenantId), use the same alphabet with room
// for a DNS label's 63 characters.
const (
	MemberNamePattern = "^[a-z][a-z0-9_-]{0,31}$"
	ObjectNamePattern = "^[a-z][a-z0-9_-]{0,62}$"
	EnvNamePattern    = "^[A-Za-z_][A-Za-z0-9_]*$"
)

// Profile startupTimeout bounds: herdr's agent.start accepts more than 3s
// and at most 300s.
const (
	MinStartupTimeout = 3 * time.Second
	MaxStartupTimeout = 300 * time.Second
)

// MaxLabelLength is the most characters a label may have — a
// metadata.labels key or value, or a Member's spec.workspace (the label of
// the herdr workspace its tab is placed in). It is a Kubernetes label
// value's limit.
const MaxLabelLength = 63

// MaxContentBytes is the limit on one message's content — what the
// messaging core accepts from bridge_send, bridge_reply and the like — and
// so on a Member's spec.prompt, its first message: a prompt over it could
// never be delivered, so it is refused where it is written.
const MaxContentBytes = 256 << 10

// IsMemberName reports whether s matches MemberNamePattern.
func IsMemberName(s string) bool { return isName(s, 32) }

// IsObjectName reports whether s matches ObjectNamePattern.
func IsObjectName(s string) bool { return isName(s, 63) }

// IsEnvName reports whether s matches EnvNamePattern, the portable shape of
// an environment variable name.
func IsEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func isName(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// FieldError is one validation failure, located by its field path
// (spec.mcpTarget.tenantId, spec.env[FOO], spec.args[2]).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// FieldErrors is every validation failure of one object.
type FieldErrors []*FieldError

func (l FieldErrors) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Err returns nil when l is empty and l otherwise.
func (l FieldErrors) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l *FieldErrors) add(field, format string, args ...any) {
	*l = append(*l, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks a defaulted Member. It is fail-closed: anything it does
// not recognise is an error. Call SetDefaults first; an absent mcpTarget
// or transport is an error here.
func (m *Member) Validate() FieldErrors {
	var errs FieldErrors
	validateType(&errs, m.TypeMeta, KindMember)
	validateName(&errs, m.Name, MemberNamePattern, IsMemberName, "it becomes the herdr agent name")
	validateLabels(&errs, m.Labels)
	s := &m.Spec
	validateRef(&errs, "spec.profile", s.Profile, "a Profile")
	switch t := s.MCPTarget; {
	case t == nil:
		errs.add("spec.mcpTarget", "required")
	case t.Kind == TargetTenant:
		validateRef(&errs, "spec.mcpTarget.tenantId", t.TenantID, "a Tenant")
	case t.Kind == TargetResident:
		if t.TenantID != "" {
			errs.add("spec.mcpTarget.tenantId", "forbidden unless kind is tenant")
		}
	case t.Kind == "":
		errs.add("spec.mcpTarget.kind", "required; want resident or tenant")
	default:
		errs.add("spec.mcpTarget.kind", "unknown value %q; want resident or tenant", t.Kind)
	}
	switch s.Transport {
	case TransportStdio, TransportStreamableHTTP:
	case "":
		errs.add("spec.transport", "required; want stdio or streamable-http")
	default:
		errs.add("spec.transport", "unknown value %q; want stdio or streamable-http", s.Transport)
	}
	if s.Workspace == "" {
		errs.add("spec.workspace", "required")
	} else {
		validateLabel(&errs, "spec.workspace", s.Workspace)
	}
	if n := len(s.Prompt); n > MaxContentBytes {
		errs.add("spec.prompt", "%d bytes, over the limit of %d bytes on a message's content; it could never be delivered: shorten it", n, MaxContentBytes)
	}
	validateCwd(&errs, s.Cwd)
	if s.NodeName != "" && !IsObjectName(s.NodeName) {
		errs.add("spec.nodeName", "invalid node name %q; want %s", s.NodeName, ObjectNamePattern)
	}
	if g := s.TerminationGracePeriod; g != nil && g.Duration <= 0 {
		errs.add("spec.terminationGracePeriod", "%s out of range; want more than 0s%s", g.Duration, zeroHint(g.Duration, "the profile's spec.terminationGracePeriod"))
	}
	if u := s.UpdateStrategy; u != nil && u.MaxWait != nil && u.MaxWait.Duration <= 0 {
		errs.add("spec.updateStrategy.maxWait", "%s out of range; want more than 0s%s", u.MaxWait.Duration, zeroHint(u.MaxWait.Duration, "waiting until the agent is idle, however long"))
	}
	if len(s.NodeSelector) > MaxNodeLabels {
		errs.add("spec.nodeSelector", "%d pairs; a node carries at most %d labels", len(s.NodeSelector), MaxNodeLabels)
	}
	for _, k := range sortedKeys(s.NodeSelector) {
		switch why := labelProblem(k); {
		case k == "":
			errs.add("spec.nodeSelector", "empty label key")
		case why != "":
			errs.add("spec.nodeSelector", "invalid label key: %s", why)
		default:
			validateLabel(&errs, "spec.nodeSelector["+k+"]", s.NodeSelector[k])
		}
	}
	return errs
}

// Validate checks a defaulted Profile.
func (p *Profile) Validate() FieldErrors {
	var errs FieldErrors
	validateType(&errs, p.TypeMeta, KindProfile)
	validateName(&errs, p.Name, ObjectNamePattern, IsObjectName, "")
	validateLabels(&errs, p.Labels)
	s := &p.Spec
	switch {
	case s.Harness == "":
		errs.add("spec.harness", "required; want a herdr agent kind such as claude or codex")
	case !isToken(s.Harness):
		errs.add("spec.harness", "invalid value %q; want a lower-case herdr agent kind such as claude or codex", s.Harness)
	}
	for _, k := range sortedKeys(s.Env) {
		switch {
		case k == "":
			errs.add("spec.env", "empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			errs.add("spec.env", "invalid variable name %q: must not contain \"=\" or NUL", k)
		}
	}
	validateCwd(&errs, s.Cwd)
	if d := s.StartupTimeout.Duration; d <= MinStartupTimeout || d > MaxStartupTimeout {
		errs.add("spec.startupTimeout", "%s out of range; want more than %s and at most %s%s", d, MinStartupTimeout, MaxStartupTimeout, zeroHint(d, DefaultStartupTimeout))
	}
	switch s.RestartPolicy {
	case RestartAlways, RestartOnFailure, RestartNever:
	default:
		errs.add("spec.restartPolicy", "unknown value %q; want Always, OnFailure or Never", s.RestartPolicy)
	}
	if d := s.ToolTimeout.Duration; d <= 0 {
		errs.add("spec.toolTimeout", "%s out of range; want more than 0s%s", d, zeroHint(d, DefaultToolTimeout))
	}
	switch s.Resume {
	case ResumeAuto, ResumeNever:
	default:
		errs.add("spec.resume", "unknown value %q; want Auto or Never", s.Resume)
	}
	if d := s.TerminationGracePeriod.Duration; d <= 0 {
		errs.add("spec.terminationGracePeriod", "%s out of range; want more than 0s%s", d, zeroHint(d, DefaultTerminationGracePeriod))
	}
	return errs
}

// zeroHint is what a duration written as 0s is told: 0 never means "the
// default" in a manifest (only a field left out does), so that a zero is
// not taken for a typo fleetd quietly corrected.
func zeroHint[D time.Duration | string](d time.Duration, def D) string {
	if d != 0 {
		return ""
	}
	return fmt.Sprintf(" (0s is not the default: leave the field out for %v)", def)
}

// Validate checks a Tenant: spec.url must be an absolute http(s) URL
// without user information, and spec.credentialEnv the name (never the
// value) of an environment variable.
func (t *Tenant) Validate() FieldErrors {
	var errs FieldErrors
	validateType(&errs, t.TypeMeta, KindTenant)
	validateName(&errs, t.Name, ObjectNamePattern, IsObjectName, "")
	validateLabels(&errs, t.Labels)
	s := &t.Spec
	if s.URL == "" {
		errs.add("spec.url", "required; want the tenant gateway's absolute https URL")
	} else if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add("spec.url", "invalid value %q; want an absolute http or https URL", s.URL)
	} else if u.User != nil {
		errs.add("spec.url", "must not carry user information; name the credential's variable in spec.credentialEnv")
	}
	switch {
	case s.CredentialEnv == "":
		errs.add("spec.credentialEnv", "required; want the NAME of the environment variable holding the credential")
	case !IsEnvName(s.CredentialEnv):
		errs.add("spec.credentialEnv", "invalid variable name %q; want %s", s.CredentialEnv, EnvNamePattern)
	}
	return errs
}

func validateType(errs *FieldErrors, t TypeMeta, kind string) {
	switch t.APIVersion {
	case GroupVersion:
	case "":
		errs.add("apiVersion", "required; want %s", GroupVersion)
	default:
		errs.add("apiVersion", "unknown value %q; want %s", t.APIVersion, GroupVersion)
	}
	if t.Kind != kind {
		errs.add("kind", "unknown value %q; want %s", t.Kind, kind)
	}
}

func validateName(errs *FieldErrors, name, pattern string, ok func(string) bool, why string) {
	if why != "" {
		why = "; " + why
	}
	switch {
	case name == "":
		errs.add("metadata.name", "required")
	case !ok(name):
		errs.add("metadata.name", "invalid name %q; want %s%s", name, pattern, why)
	}
}

func validateRef(errs *FieldErrors, field, ref, what string) {
	switch {
	case ref == "":
		errs.add(field, "required; name %s", what)
	case !IsObjectName(ref):
		errs.add(field, "invalid name %q; want %s", ref, ObjectNamePattern)
	}
}

// labelProblem says why s cannot be a label, or "" when it can: a label is
// at most MaxLabelLength characters of valid UTF-8 and no control
// character (no newline, NUL or terminal escape), because fleetd hands it
// to herdr and prints it.
func labelProblem(s string) string {
	if n := utf8.RuneCountInString(s); n > MaxLabelLength {
		return fmt.Sprintf("%d characters; want at most %d", n, MaxLabelLength)
	}
	if !utf8.ValidString(s) {
		return fmt.Sprintf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("%q holds the control character %U; want plain text", s, r)
		}
	}
	return ""
}

// validateLabel checks one label-valued field.
func validateLabel(errs *FieldErrors, field, s string) {
	if why := labelProblem(s); why != "" {
		errs.add(field, "invalid label: %s", why)
	}
}

// validateLabels checks metadata.labels: every key (not empty) and value
// is a label. A bad key is reported on metadata.labels, so that the field
// path never carries what the key holds.
func validateLabels(errs *FieldErrors, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		switch why := labelProblem(k); {
		case k == "":
			errs.add("metadata.labels", "empty label key")
		case why != "":
			errs.add("metadata.labels", "invalid label key: %s", why)
		default:
			validateLabel(errs, "metadata.labels["+k+"]", labels[k])
		}
	}
}

func validateCwd(errs *FieldErrors, cwd string) {
	if cwd != "" && !path.IsAbs(cwd) {
		errs.add("spec.cwd", "want an absolute path, got %q", cwd)
	}
}

// isToken reports whether s is a lower-case token: a-z first, then a-z,
// 0-9, '-' or '_'.
func isToken(s string) bool { return isName(s, len(s)) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
