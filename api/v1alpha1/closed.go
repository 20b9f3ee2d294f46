package v1alpha1

import (
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// A Member's spec is a closed shape: references and choices, never a URL,
// credential, header, command, argv or environment. A field that would
// carry one is recognised by its key alone, at any depth and whatever its
// value, so that a typo or a future field cannot smuggle one in. The words
// that give such a key away are listed here once; the manifest decoder
// (api/decode) and the spawn guard (internal/guard) both judge keys with
// [ClassifyKey], each refusing the classes its rule is about.

// KeyClass is what a key's words say the field carries.
type KeyClass uint8

// Key classes, from [ClassifyKey].
const (
	// KeyAllowed: nothing in the key's words is off limits.
	KeyAllowed KeyClass = iota
	// KeyEnvironment: an environment bag (env, envVars, environment, vars,
	// dotenv, …).
	KeyEnvironment
	// KeyCommand: a command or its arguments (command, cmd, argv, args,
	// entrypoint, executable, …).
	KeyCommand
	// KeyHeader: request headers or cookies.
	KeyHeader
	// KeyEndpoint: where traffic goes (url, uri, baseUrl, endpoint, proxy,
	// …).
	KeyEndpoint
	// KeyCredential: a secret (…key, …token, secret, password,
	// credential(s), auth, authorization, bearer, pat, …).
	KeyCredential
	// KeyProvider: a model provider's or cloud SDK's own setting: a key
	// whose first word is a provider's name (anthropic…, openai…, aws…,
	// gemini…, mistral…, and the other providers [ClassifyKey] lists).
	KeyProvider
)

var keyClassNames = [...]string{"allowed", "environment", "command", "header", "endpoint", "credential", "provider"}

func (c KeyClass) String() string {
	if int(c) < len(keyClassNames) {
		return keyClassNames[c]
	}
	return "KeyClass(" + strconv.Itoa(int(c)) + ")"
}

// The word list. A key is split into words by [KeyWords]; each word is
// looked up here exactly, and then by the prefixes and suffixes below, so
// that a one-word key such as "baseurl" or "accesstoken" is caught as well
// as "baseURL" and "access_token".
var (
	keyWords = map[string]KeyClass{
		"env": KeyEnvironment, "envs": KeyEnvironment, "environ": KeyEnvironment, "environment": KeyEnvironment,
		"vars": KeyEnvironment, "variables": KeyEnvironment, "dotenv": KeyEnvironment,

		"command": KeyCommand, "commands": KeyCommand, "cmd": KeyCommand, "cmds": KeyCommand, "cmdline": KeyCommand,
		"entrypoint": KeyCommand, "executable": KeyCommand, "argv": KeyCommand, "args": KeyCommand, "arguments": KeyCommand,

		"cookie": KeyHeader, "cookies": KeyHeader,

		"uri": KeyEndpoint, "uris": KeyEndpoint, "base": KeyEndpoint, "proxy": KeyEndpoint, "proxies": KeyEndpoint,

		"key": KeyCredential, "keys": KeyCredential, "apikey": KeyCredential, "cred": KeyCredential, "creds": KeyCredential,
		"passwd": KeyCredential, "auth": KeyCredential, "authorization": KeyCredential, "bearer": KeyCredential,
		"pat": KeyCredential,
	}
	// keyAffixes are matched in order after the exact words: a word that
	// ends (or, for a prefix, starts) with one is of its class.
	keyAffixes = []struct {
		affix  string
		prefix bool
		class  KeyClass
	}{
		{"header", false, KeyHeader}, {"headers", false, KeyHeader},
		{"url", false, KeyEndpoint}, {"urls", false, KeyEndpoint}, {"endpoint", true, KeyEndpoint},
		{"credential", true, KeyCredential}, {"token", false, KeyCredential}, {"tokens", false, KeyCredential},
		{"secret", false, KeyCredential}, {"secrets", false, KeyCredential},
		{"password", false, KeyCredential}, {"passwords", false, KeyCredential},
	}
)

// providerWords are the first words of the variables and settings a
// harness or cloud SDK reads its endpoint or account from.
var providerWords = []string{"anthropic", "claude", "openai", "codex", "azure", "aws", "bedrock", "vertex", "google",
	"gemini", "gcp", "gcloud", "mistral", "groq", "xai", "deepseek", "openrouter", "cohere", "hf", "huggingface"}

// ClassifyKey says what a field named key carries, judged by its words
// ([KeyWords]): the class of its first word that is in the word list, else
// [KeyProvider] when its first word is a provider's name ("OpenAI" split
// as open, ai counts), else [KeyAllowed]. Words that merely contain a
// listed word ("envelope", "commander", "argument_count") are allowed.
func ClassifyKey(key string) KeyClass {
	words := KeyWords(key)
	if strings.Contains(strings.Join(words, ""), "apikey") {
		return KeyCredential
	}
	for _, w := range words {
		if c := wordClass(w); c != KeyAllowed {
			return c
		}
	}
	if len(words) > 0 && (isProvider(words[0]) || len(words) > 1 && words[0] == "open" && words[1] == "ai") {
		return KeyProvider
	}
	return KeyAllowed
}

func wordClass(w string) KeyClass {
	if c, ok := keyWords[w]; ok {
		return c
	}
	for _, a := range keyAffixes {
		if a.prefix && strings.HasPrefix(w, a.affix) || !a.prefix && strings.HasSuffix(w, a.affix) {
			return a.class
		}
	}
	return KeyAllowed
}

func isProvider(w string) bool { return slices.Contains(providerWords, w) }

// ownFields are the fields of a Member's spec whose key the word list
// flags: spec.worktree.base is a git ref ("base" is an endpoint word, as in
// api_base). Validation checks such a value as what it is (a ref name
// cannot hold a URL or a variable), and the spawn guard's value rules
// still apply to it.
var ownFields = []string{"spec.worktree.base"}

// IsOwnField reports whether path (a field path as the decoder and the
// spawn guard write it, such as spec.worktree.base) is one of a Member
// spec's own fields whose key [ClassifyKey] flags: the closed-shape checks
// let it through by its path, never by its key alone.
func IsOwnField(path string) bool { return slices.Contains(ownFields, path) }

// KeyWords splits a key into lower-case words at every character that is
// not a letter or digit (snake_case, kebab-case, dots, slashes, spaces) and
// at camelCase boundaries: before an upper-case letter that follows a
// lower-case letter or a digit, and before the last upper-case letter of
// an acronym that a lower-case letter follows ("apiKey" → api, key;
// "baseURL" → base, url; "OpenAIKey" → open, ai, key; "v1Token" → v1,
// token).
func KeyWords(key string) []string {
	var words []string
	rs := []rune(key)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
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
		lowerToUpper := unicode.IsUpper(r) && !unicode.IsUpper(prev)
		acronymEnd := unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
		if lowerToUpper || acronymEnd {
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}
