package decode

import (
	"slices"
	"strings"
	"unicode"
)

// A Member's spec is a closed shape: references and choices, never a URL,
// credential, header, command, argv or environment. Such a field is
// recognised by its key, at any depth, whatever its value, so that a typo
// or a future field cannot smuggle one in.

const (
	msgClosedEnv     = "a Member never carries environment; put it in a Profile's spec.env"
	msgClosedCommand = "a Member never carries a command or arguments; put them in a Profile (spec.harness, spec.args)"
	msgClosedHeader  = "a Member never carries headers; fleetd derives them from a Tenant's spec.credentialEnv, referenced with spec.mcpTarget"
	msgClosedURL     = "a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget"
)

// closedKey returns why key may not appear in a Member's spec, or "" when
// it may. Matching is by word, case-insensitive, with camelCase, snake_case
// and kebab-case split apart: "baseURL", "api_key" and "X-Headers" all match.
func closedKey(key string) string {
	words := splitWords(key)
	if strings.Contains(strings.Join(words, ""), "apikey") {
		return msgClosedURL
	}
	for _, w := range words {
		switch {
		case w == "env", w == "envs", w == "environ", w == "environment":
			return msgClosedEnv
		case w == "command", w == "commands", w == "cmd", w == "cmds", w == "cmdline",
			w == "entrypoint", w == "executable", w == "argv", w == "args", w == "arguments":
			return msgClosedCommand
		case strings.HasSuffix(w, "header"), strings.HasSuffix(w, "headers"):
			return msgClosedHeader
		case strings.HasSuffix(w, "url"), strings.HasSuffix(w, "urls"), w == "uri", w == "uris",
			strings.HasPrefix(w, "endpoint"), strings.HasPrefix(w, "credential"), w == "cred", w == "creds",
			strings.HasSuffix(w, "token"), strings.HasSuffix(w, "tokens"),
			strings.HasSuffix(w, "secret"), strings.HasSuffix(w, "secrets"),
			strings.HasSuffix(w, "password"), strings.HasSuffix(w, "passwords"), w == "passwd",
			w == "auth", w == "authorization", w == "bearer":
			return msgClosedURL
		}
	}
	return ""
}

// splitWords splits a key into lower-case words at every non-alphanumeric
// character and at camelCase boundaries ("APIKey" → api, key).
func splitWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := cur[len(cur)-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if !unicode.IsUpper(prev) || nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// CheckClosedMemberSpec checks a Member spec that arrived as decoded JSON
// (bridge_spawn, POST /members) against the closed shape: every key, at
// any depth, that names a URL, credential, token, header, command, argv or
// environment is an error. path is the spec's own field path, usually
// "spec". Errors carry no file or line. Keys are visited in sorted order so
// the result is deterministic.
func CheckClosedMemberSpec(path string, spec map[string]any) ErrorList {
	var errs ErrorList
	checkClosedValue(&errs, path, spec)
	return errs
}

func checkClosedValue(errs *ErrorList, path string, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := joinField(path, k)
			if msg := closedKey(k); msg != "" {
				*errs = append(*errs, &Error{Field: p, Msg: msg})
				continue
			}
			checkClosedValue(errs, p, v[k])
		}
	case []any:
		for i, item := range v {
			checkClosedValue(errs, indexField(path, i), item)
		}
	}
}
