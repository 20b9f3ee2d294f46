package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Code is the stable error code for a boundary violation.
const Code = "subscription_boundary"

// ErrSubscriptionBoundary matches every [*BoundaryError] with errors.Is.
var ErrSubscriptionBoundary = errors.New(Code)

// BoundaryError says which part of a spawn request crossed the
// subscription boundary. It never holds the offending value.
type BoundaryError struct {
	// Path is the field's location in the request, e.g. "spec.env" or
	// "metadata.labels.OPENAI_API_KEY".
	Path string
	// Why is the rule the field broke.
	Why string
}

func (e *BoundaryError) Error() string {
	return fmt.Sprintf("%s: %s: %s; worker environment and endpoints come only from operator Profile files", Code, e.Path, e.Why)
}

// Code returns [Code].
func (e *BoundaryError) Code() string { return Code }

// Is reports whether target is [ErrSubscriptionBoundary].
func (e *BoundaryError) Is(target error) bool { return target == ErrSubscriptionBoundary }

// DuplicateKeyError is a spawn request that names one key twice in an
// object. Decoders disagree on which value wins, so such a request could
// show the guard one value and the spawn another; it is refused outright.
// It is not a boundary error (the values were checked, and passed).
type DuplicateKeyError struct {
	// Path is the second occurrence's field path, e.g. "spec.workspace".
	Path string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("%s: duplicate key; name each field once", e.Path)
}

// CheckSpawnJSON checks a spawn request (bridge_spawn arguments or a POST
// /members body) given as JSON: the bytes as they arrived, not a decoded
// copy. It reads every key and value as written — duplicate keys included,
// so a second decoder cannot see something this one skipped — and fails
// with a [*DuplicateKeyError] for a key named twice in one object (after
// checking both values), and with a [*BoundaryError] when:
//
//   - a key, at any depth, names an environment bag (env, envVars,
//     environment, vars, …), headers or a cookie, an endpoint (url, uri,
//     baseUrl, endpoint, proxy, …), a secret (…key, …token, secret,
//     password, credential(s), auth, authorization, bearer), or a provider's
//     own settings (anthropic…, openai…, aws…, and the others listed in
//     [IsCredentialName]). Keys are split into words across camelCase,
//     snake_case, kebab-case and dots before matching, so apiKey,
//     api_key and API-KEY are the same: the splitter and the word list are
//     [v1alpha1.KeyWords] and [v1alpha1.ClassifyKey], which the manifest
//     decoder's closed-spec check shares;
//   - a string value references a credential-bearing variable ($NAME,
//     ${NAME}, %NAME%), assigns one (NAME=…), or is one's bare upper-case
//     name (a request to read or forward it);
//   - a string value contains a URL (scheme://…): spawn requests never
//     choose where a worker sends its traffic.
//
// A Member spec's own fields whose key the word list flags
// ([v1alpha1.IsOwnField]: spec.worktree.base, a git ref) are exempt from
// the key rule by their path; their values are still checked. The text of
// the prompt ("prompt", or "spec.prompt" in a Member-shaped body) is exempt
// from the value rules: fleetd types it into the agent as a
// message and never expands, executes or forwards it, and prompts
// legitimately quote URLs and variable names. Its key is still checked.
// Input that is not valid JSON is an ordinary error, not a boundary error.
func CheckSpawnJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("check spawn request: trailing data after the JSON value")
	}
	return nil
}

func walk(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("check spawn request: not valid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("check spawn request: not valid JSON: %w", err)
				}
				key, _ := k.(string)
				p := join(path, key)
				if why := keyViolation(key); why != "" && !v1alpha1.IsOwnField(p) {
					return &BoundaryError{Path: p, Why: why}
				}
				if err := walk(dec, p); err != nil {
					return err
				}
				if seen[key] {
					return &DuplicateKeyError{Path: p}
				}
				seen[key] = true
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(dec, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return fmt.Errorf("check spawn request: not valid JSON: %w", err)
		}
	case string:
		if path == "prompt" || path == "spec.prompt" {
			return nil
		}
		if why := valueViolation(t); why != "" {
			return &BoundaryError{Path: path, Why: why}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyViolation returns why key may not appear in a spawn request, or "".
// The words are [v1alpha1.ClassifyKey]'s, the one list the manifest
// decoder's closed-spec check uses too. Commands and arguments are not a
// subscription matter: the closed-spec check refuses them (invalid_spec).
func keyViolation(key string) string {
	if w, ok := keyWords[v1alpha1.ClassifyKey(key)]; ok {
		return w.many + " not accepted from spawn requests"
	}
	return ""
}

// keyWords say what a key of each class that the guard refuses carries:
// as a kind of field ("endpoints and URLs are"), and as what one
// variable's name gives away ("an endpoint").
var keyWords = map[v1alpha1.KeyClass]struct{ many, one string }{
	v1alpha1.KeyEnvironment: {"environment is", "an environment bag"},
	v1alpha1.KeyHeader:      {"headers and cookies are", "headers or cookies"},
	v1alpha1.KeyEndpoint:    {"endpoints and URLs are", "an endpoint"},
	v1alpha1.KeyCredential:  {"credentials are", "a credential"},
	v1alpha1.KeyProvider:    {"provider settings are", "a provider's setting"},
}

// IsCredentialName reports whether an environment variable (or field) name
// is credential-bearing: its words include an environment, header,
// endpoint or secret word (ANTHROPIC_BASE_URL, OPENAI_API_KEY, GH_TOKEN,
// HTTPS_PROXY, …) or it starts with a provider's name (ANTHROPIC_…,
// OPENAI_…, AWS_…, AZURE_…, GOOGLE_…, GEMINI_…, CLAUDE_…, CODEX_…, and the
// others in [v1alpha1.ClassifyKey]'s provider list).
func IsCredentialName(name string) bool { return keyViolation(name) != "" }

var (
	// $NAME, ${NAME}, %NAME% and NAME= (a shell assignment).
	varRefRE    = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)|%([A-Za-z_][A-Za-z0-9_]*)%|(?:^|[^A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)=`)
	bareUpperRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	urlRE       = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)
)

// valueViolation returns why string value v may not appear in a spawn
// request, or "".
func valueViolation(v string) string {
	for _, m := range varRefRE.FindAllStringSubmatch(v, -1) {
		for _, name := range m[1:] {
			if name != "" && IsCredentialName(name) {
				return "references a credential-bearing variable"
			}
		}
	}
	if s := strings.TrimSpace(v); bareUpperRE.MatchString(s) && IsCredentialName(s) {
		return "names a credential-bearing variable"
	}
	if urlRE.MatchString(v) {
		return "contains a URL"
	}
	return ""
}
