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
	"unicode"
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

// CheckSpawn is [CheckSpawnJSON] for a request already decoded into a map
// (as encoding/json decodes an object).
func CheckSpawn(raw map[string]any) error {
	data, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("check spawn request: %w", err)
	}
	return CheckSpawnJSON(data)
}

// CheckSpawnJSON checks a spawn request (bridge_spawn arguments or a POST
// /members body) given as JSON. It reads every key and value as written —
// duplicate keys included, so a second decoder cannot see something this
// one skipped — and fails with a [*BoundaryError] when:
//
//   - a key, at any depth, names an environment bag (env, envVars,
//     environment, vars, …), headers or a cookie, an endpoint (url, uri,
//     baseUrl, endpoint, proxy, …), a secret (…key, …token, secret,
//     password, credential(s), auth, authorization, bearer), or a provider's
//     own settings (anthropic…, openai…, aws…, and the others listed in
//     [IsCredentialName]). Keys are split into words across camelCase,
//     snake_case, kebab-case and dots before matching, so apiKey,
//     api_key and API-KEY are the same;
//   - a string value references a credential-bearing variable ($NAME,
//     ${NAME}, %NAME%), assigns one (NAME=…), or is one's bare upper-case
//     name (a request to read or forward it);
//   - a string value contains a URL (scheme://…): spawn requests never
//     choose where a worker sends its traffic.
//
// The text of the prompt ("prompt", or "spec.prompt" in a Member-shaped
// body) is exempt from the value rules: fleetd types it into the agent as a
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
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("check spawn request: not valid JSON: %w", err)
				}
				key, _ := k.(string)
				p := join(path, key)
				if why := keyViolation(key); why != "" {
					return &BoundaryError{Path: p, Why: why}
				}
				if err := walk(dec, p); err != nil {
					return err
				}
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

// Words that make a key off limits, by what they are.
var (
	envWords      = set("ENV", "ENVS", "ENVIRONMENT", "ENVIRON", "VARS", "VARIABLES", "DOTENV")
	headerWords   = set("HEADER", "HEADERS", "COOKIE", "COOKIES")
	endpointWords = set("URL", "URLS", "URI", "URIS", "ENDPOINT", "ENDPOINTS", "BASE", "PROXY", "PROXIES")
	secretWords   = set("KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD",
		"CREDENTIAL", "CREDENTIALS", "CRED", "CREDS", "AUTH", "AUTHORIZATION", "BEARER", "PAT")
	// providerWords are the first word of variables a harness or cloud SDK
	// reads its endpoint or account from.
	providerWords = set("ANTHROPIC", "CLAUDE", "OPENAI", "CODEX", "AZURE", "AWS", "BEDROCK", "VERTEX", "GOOGLE",
		"GEMINI", "GCP", "GCLOUD", "MISTRAL", "GROQ", "XAI", "DEEPSEEK", "OPENROUTER", "COHERE", "HF",
		"HUGGINGFACE")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// keyViolation returns why key may not appear in a spawn request, or "".
func keyViolation(key string) string {
	ws := words(key)
	for _, w := range ws {
		switch {
		case envWords[w]:
			return "environment is not accepted from spawn requests"
		case headerWords[w]:
			return "headers and cookies are not accepted from spawn requests"
		case endpointWords[w]:
			return "endpoints and URLs are not accepted from spawn requests"
		case secretWords[w]:
			return "credentials are not accepted from spawn requests"
		}
	}
	if len(ws) > 0 && (providerWords[ws[0]] || (len(ws) > 1 && ws[0] == "OPEN" && ws[1] == "AI")) {
		return "provider settings are not accepted from spawn requests"
	}
	return ""
}

// IsCredentialName reports whether an environment variable (or field) name
// is credential-bearing: its words include an environment, header,
// endpoint or secret word (ANTHROPIC_BASE_URL, OPENAI_API_KEY, GH_TOKEN,
// HTTPS_PROXY, …) or it starts with a provider's name (ANTHROPIC_…,
// OPENAI_…, AWS_…, AZURE_…, GOOGLE_…, GEMINI_…, CLAUDE_…, CODEX_…, and the
// others in this package's provider list).
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

// words splits an identifier into upper-case words at underscores, dashes,
// dots, spaces and camelCase boundaries ("apiKey" → API KEY, "baseURL" →
// BASE URL, "OpenAIKey" → OPEN AI KEY, "ANTHROPIC_BASE_URL" → ANTHROPIC
// BASE URL).
func words(s string) []string {
	var out []string
	rs := []rune(s)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToUpper(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		lowerToUpper := unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev))
		acronymEnd := unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
		if lowerToUpper || acronymEnd {
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return out
}
