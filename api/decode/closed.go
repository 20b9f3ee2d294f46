package decode

import (
	"slices"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// A Member's spec is a closed shape: references and choices, never a URL,
// credential, header, command, argv or environment. Such a field is
// recognised by its key, at any depth, whatever its value, by the one word
// list in package v1alpha1 ([v1alpha1.ClassifyKey]).

const (
	msgClosedEnv     = "a Member never carries environment; put it in a Profile's spec.env"
	msgClosedCommand = "a Member never carries a command or arguments; put them in a Profile (spec.harness, spec.args)"
	msgClosedHeader  = "a Member never carries headers; fleetd derives them from a Tenant's spec.credentialEnv, referenced with spec.mcpTarget"
	msgClosedURL     = "a Member never carries URLs or credentials; declare a Tenant (spec.url, spec.credentialEnv) and reference it with spec.mcpTarget"
)

// closedKey returns why key, at field path path, may not appear in a
// Member's spec, or "" when it may. The words are [v1alpha1.ClassifyKey]'s,
// shared with the spawn guard: "baseURL", "api_key" and "X-Headers" all
// match; the spec's own fields among them ([v1alpha1.IsOwnField]:
// spec.worktree.base) are let through by their path. A provider's name
// alone is no reason here (it would be an unknown field anyway).
func closedKey(path, key string) string {
	if v1alpha1.IsOwnField(path) {
		return ""
	}
	switch v1alpha1.ClassifyKey(key) {
	case v1alpha1.KeyEnvironment:
		return msgClosedEnv
	case v1alpha1.KeyCommand:
		return msgClosedCommand
	case v1alpha1.KeyHeader:
		return msgClosedHeader
	case v1alpha1.KeyEndpoint, v1alpha1.KeyCredential:
		return msgClosedURL
	}
	return ""
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
			if msg := closedKey(p, k); msg != "" {
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
