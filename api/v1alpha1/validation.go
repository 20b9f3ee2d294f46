package v1alpha1

import (
	"encoding/json"
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
// metadata.labels value, the name part of its key, or a Member's
// spec.workspace (the label of the herdr workspace its tab is placed in).
// It is a Kubernetes label value's limit.
const MaxLabelLength = 63

// Bounds of what an object may hold. metadata follows Kubernetes' own
// limits (k8s.io/apimachinery's validation), so that the types stay usable
// as a CRD; the rest bounds each free-text field; and the whole, metadata
// and spec as JSON, is at most [MaxObjectJSONBytes].
const (
	// MaxLabelPrefixLength bounds the optional prefix of a label or
	// annotation key (a DNS subdomain, before a slash).
	MaxLabelPrefixLength = 253
	// MaxAnnotationsBytes bounds an object's annotations: their keys and
	// values together (Kubernetes' TotalAnnotationSizeLimitB).
	MaxAnnotationsBytes = 256 << 10
	// MaxPathBytes bounds a working directory (spec.cwd): PATH_MAX.
	MaxPathBytes = 4096
	// MaxDescriptionBytes bounds a Profile's description, shown to models
	// by bridge_profiles.
	MaxDescriptionBytes = 4 << 10
	// MaxLaunchBytes bounds what a Profile starts a pane with: its args
	// and its env's names and values together (herdr takes them in one
	// request).
	MaxLaunchBytes = 256 << 10
	// MaxURLBytes bounds a Tenant's spec.url.
	MaxURLBytes = 2048
	// MaxEnvNameBytes bounds the name of an environment variable.
	MaxEnvNameBytes = 256
	// MaxObjectJSONBytes bounds an object's metadata and spec encoded as
	// JSON (encoding/json, which writes each <, > and & in six bytes): 3
	// MiB. A member's status is fleetd's own, a few KiB, so that every
	// member fits in one event of the member watch, which a client reads
	// up to 4 MiB (`fleetd get -w`).
	MaxObjectJSONBytes = 3 << 20
)

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
	validateMeta(&errs, &m.ObjectMeta)
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
	validateWorktree(&errs, s)
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
	} else {
		validateLabelMap(&errs, "spec.nodeSelector", s.NodeSelector)
	}
	whole := *m
	whole.Status = MemberStatus{}
	validateSize(&errs, &whole)
	return errs
}

// Validate checks a defaulted Profile.
func (p *Profile) Validate() FieldErrors {
	var errs FieldErrors
	validateType(&errs, p.TypeMeta, KindProfile)
	validateName(&errs, p.Name, ObjectNamePattern, IsObjectName, "")
	validateMeta(&errs, &p.ObjectMeta)
	s := &p.Spec
	switch {
	case s.Harness == "":
		errs.add("spec.harness", "required; want a herdr agent kind such as claude or codex")
	case len(s.Harness) > MaxLabelLength || !isToken(s.Harness):
		errs.add("spec.harness", "invalid value %q; want a lower-case herdr agent kind such as claude or codex", truncated(s.Harness))
	}
	if n := len(s.Description); n > MaxDescriptionBytes {
		errs.add("spec.description", "%d bytes; want at most %d", n, MaxDescriptionBytes)
	}
	launch := 0
	for _, a := range s.Args {
		launch += len(a)
	}
	for _, k := range sortedKeys(s.Env) {
		launch += len(k) + len(s.Env[k])
		switch {
		case k == "":
			errs.add("spec.env", "empty variable name")
		case len(k) > MaxEnvNameBytes:
			errs.add("spec.env", "a variable name of %d bytes; want at most %d", len(k), MaxEnvNameBytes)
		case strings.ContainsAny(k, "=\x00"):
			errs.add("spec.env", "invalid variable name %q: must not contain \"=\" or NUL", k)
		}
	}
	if launch > MaxLaunchBytes {
		errs.add("spec", "args and env hold %d bytes together; want at most %d", launch, MaxLaunchBytes)
	}
	validateSize(&errs, p)
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
	validateProfileWorktree(&errs, s.Worktree)
	validateRollout(&errs, s.Rollout)
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
	validateMeta(&errs, &t.ObjectMeta)
	s := &t.Spec
	if s.URL == "" {
		errs.add("spec.url", "required; want the tenant gateway's absolute https URL")
	} else if len(s.URL) > MaxURLBytes {
		errs.add("spec.url", "%d bytes; want at most %d", len(s.URL), MaxURLBytes)
	} else if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add("spec.url", "invalid value %q; want an absolute http or https URL", s.URL)
	} else if u.User != nil {
		errs.add("spec.url", "must not carry user information; name the credential's variable in spec.credentialEnv")
	}
	switch {
	case s.CredentialEnv == "":
		errs.add("spec.credentialEnv", "required; want the NAME of the environment variable holding the credential")
	case len(s.CredentialEnv) > MaxEnvNameBytes:
		errs.add("spec.credentialEnv", "%d bytes; want a variable name of at most %d", len(s.CredentialEnv), MaxEnvNameBytes)
	case !IsEnvName(s.CredentialEnv):
		errs.add("spec.credentialEnv", "invalid variable name %q; want %s", s.CredentialEnv, EnvNamePattern)
	}
	validateSize(&errs, t)
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

// validateSize checks that obj (its metadata and spec) encodes to at most
// MaxObjectJSONBytes of JSON.
func validateSize(errs *FieldErrors, obj any) {
	b, err := json.Marshal(obj)
	switch {
	case err != nil:
		errs.add("spec", "cannot be encoded as JSON: %v", err)
	case len(b) > MaxObjectJSONBytes:
		errs.add("spec", "with its metadata the object is %d bytes of JSON, more than an object may take (%d, 3 MiB): shorten spec.prompt or metadata.annotations", len(b), MaxObjectJSONBytes)
	}
}

// validateMeta checks what metadata an operator writes: labels and
// annotations, by Kubernetes' rules and limits.
func validateMeta(errs *FieldErrors, m *ObjectMeta) {
	validateLabelMap(errs, "metadata.labels", m.Labels)
	size := 0
	for _, k := range sortedKeys(m.Annotations) {
		size += len(k) + len(m.Annotations[k])
		if why := labelKeyProblem(k); why != "" {
			errs.add("metadata.annotations", "invalid key: %s", why)
		}
	}
	if size > MaxAnnotationsBytes {
		errs.add("metadata.annotations", "keys and values hold %d bytes together; want at most %d (256 KiB)", size, MaxAnnotationsBytes)
	}
}

// validateLabelMap checks labels (metadata.labels, spec.nodeSelector) by
// Kubernetes' rules. A bad key is reported on the map's path, so that the
// field path never carries what the key holds.
func validateLabelMap(errs *FieldErrors, field string, labels map[string]string) {
	for _, k := range sortedKeys(labels) {
		if why := labelKeyProblem(k); why != "" {
			errs.add(field, "invalid label key: %s", why)
		} else if why := labelValueProblem(labels[k]); why != "" {
			errs.add(field+"["+k+"]", "invalid label value: %s", why)
		}
	}
}

// labelKeyProblem says why k cannot be a label or annotation key, or ""
// when it can: Kubernetes' qualified name — a name of at most
// MaxLabelLength characters (alphanumerics, '-', '_', '.', beginning and
// ending with an alphanumeric), with an optional prefix of at most
// MaxLabelPrefixLength characters that is a DNS subdomain, and a slash.
func labelKeyProblem(k string) string {
	if k == "" {
		return "empty; want a name such as team or example.com/team"
	}
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		prefix, name = "", k
	}
	switch {
	case hasPrefix && (len(prefix) > MaxLabelPrefixLength || !isDNSSubdomain(prefix)):
		return fmt.Sprintf("%q has a prefix that is not a DNS subdomain of at most %d characters (lower-case alphanumerics, '-' and '.')", truncated(k), MaxLabelPrefixLength)
	case len(name) > MaxLabelLength || !isLabelName(name):
		return fmt.Sprintf("%q: want a name of at most %d characters: alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric (with an optional DNS subdomain prefix and '/')", truncated(k), MaxLabelLength)
	}
	return ""
}

// labelValueProblem says why v cannot be a label value, or "" when it can:
// empty, or a name of at most MaxLabelLength characters as in a key.
func labelValueProblem(v string) string {
	if v != "" && (len(v) > MaxLabelLength || !isLabelName(v)) {
		return fmt.Sprintf("%q: want at most %d characters: alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric (or empty)", truncated(v), MaxLabelLength)
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isLabelName reports whether s is ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9].
func isLabelName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is lower-case DNS labels joined by
// dots: [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*.
func isDNSSubdomain(s string) bool {
	if s == "" {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := range len(label) {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// truncated is s, cut to a length an error message can show.
func truncated(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func validateCwd(errs *FieldErrors, cwd string) {
	switch {
	case len(cwd) > MaxPathBytes:
		errs.add("spec.cwd", "%d bytes; want a path of at most %d", len(cwd), MaxPathBytes)
	case strings.ContainsRune(cwd, 0):
		errs.add("spec.cwd", "holds NUL; want a path")
	case cwd != "" && !path.IsAbs(cwd):
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
