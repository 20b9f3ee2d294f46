package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKeyWords covers the one splitter both the manifest decoder and the
// spawn guard judge keys by (formerly each had its own).
func TestKeyWords(t *testing.T) {
	tests := map[string][]string{
		"apiKey":             {"api", "key"},
		"APIKey":             {"api", "key"},
		"baseURL":            {"base", "url"},
		"OpenAIKey":          {"open", "ai", "key"},
		"ANTHROPIC_BASE_URL": {"anthropic", "base", "url"},
		"x-api-key":          {"x", "api", "key"},
		"X-Headers":          {"x", "headers"},
		"fleetd.dev/owner":   {"fleetd", "dev", "owner"},
		"v1Token":            {"v1", "token"},
		"envVars":            {"env", "vars"},
		"tenantId":           {"tenant", "id"},
		"argument_count":     {"argument", "count"},
		"a  b":               {"a", "b"},
		"Ünïcode_Wörd":       {"ünïcode", "wörd"},
		"":                   nil,
		"-_.":                nil,
	}
	for in, want := range tests {
		if diff := cmp.Diff(want, KeyWords(in)); diff != "" {
			t.Errorf("KeyWords(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestClassifyKey(t *testing.T) {
	tests := map[string]KeyClass{
		// Environment bags.
		"env": KeyEnvironment, "ENV": KeyEnvironment, "environment": KeyEnvironment, "envVars": KeyEnvironment,
		"forward_env": KeyEnvironment, "vars": KeyEnvironment, "dotenv": KeyEnvironment,
		// Commands and arguments.
		"command": KeyCommand, "cmd": KeyCommand, "argv": KeyCommand, "args": KeyCommand, "entrypoint": KeyCommand,
		"executable": KeyCommand, "cmdline": KeyCommand,
		// Headers and cookies, also as the end of one word.
		"header": KeyHeader, "Headers": KeyHeader, "extraHeaders": KeyHeader, "extraheaders": KeyHeader, "Cookie": KeyHeader,
		// Endpoints.
		"url": KeyEndpoint, "baseURL": KeyEndpoint, "baseurl": KeyEndpoint, "uri": KeyEndpoint, "endpoint": KeyEndpoint,
		"endpointOverride": KeyEndpoint, "https_proxy": KeyEndpoint, "ANTHROPIC_BASE_URL": KeyEndpoint,
		// Credentials.
		"token": KeyCredential, "authToken": KeyCredential, "accesstoken": KeyCredential, "secret": KeyCredential,
		"password": KeyCredential, "passwd": KeyCredential, "credential": KeyCredential, "credentials": KeyCredential,
		"credentialEnv": KeyCredential, "apikey": KeyCredential, "api_key": KeyCredential, "APIKey": KeyCredential,
		"x-api-key": KeyCredential, "myapikey": KeyCredential, "Authorization": KeyCredential, "bearer": KeyCredential,
		"OPENAI_API_KEY": KeyCredential, "GITHUB_TOKEN": KeyCredential,
		// Providers: the first word only.
		"ANTHROPIC_MODEL": KeyProvider, "AWS_REGION": KeyProvider, "openAiOrg": KeyProvider, "OpenAIOrg": KeyProvider,
		"CLAUDE_CODE_USE_BEDROCK": KeyProvider, "team_aws": KeyAllowed,
		// Every real Member spec field, the legacy key and bridge_spawn's
		// own arguments are allowed.
		"profile": KeyAllowed, "mcpTarget": KeyAllowed, "kind": KeyAllowed, "tenantId": KeyAllowed,
		"transport": KeyAllowed, "workspace": KeyAllowed, "cwd": KeyAllowed, "prompt": KeyAllowed,
		"paused": KeyAllowed, "mcpTransport": KeyAllowed, "mode": KeyAllowed, "name": KeyAllowed,
		"wait": KeyAllowed, "timeoutMs": KeyAllowed, "apiVersion": KeyAllowed, "metadata": KeyAllowed,
		// Words that merely contain a listed word are not flagged.
		"envelope": KeyAllowed, "argument_count": KeyAllowed, "commander": KeyAllowed, "MONKEY": KeyAllowed,
		"HOME": KeyAllowed, "SESSION_ID": KeyAllowed, "": KeyAllowed,
	}
	for key, want := range tests {
		if got := ClassifyKey(key); got != want {
			t.Errorf("ClassifyKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestKeyClass_String(t *testing.T) {
	for c, want := range map[KeyClass]string{KeyAllowed: "allowed", KeyCredential: "credential", KeyProvider: "provider", 42: "KeyClass(42)"} {
		if got := c.String(); got != want {
			t.Errorf("KeyClass(%d).String() = %q, want %q", uint8(c), got, want)
		}
	}
}
