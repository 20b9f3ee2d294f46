package guard

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckSpawnJSON(t *testing.T) {
	tests := []struct {
		name     string
		req      string
		wantPath string // "" = allowed
	}{
		// Requests that must pass.
		{name: "full bridge_spawn", req: `{"profile":"codex-fast","name":"reviewer","mcpTarget":{"kind":"tenant","tenantId":"acme"},
			"transport":"streamable-http","workspace":"api","prompt":"Review open PRs","wait":true,"timeoutMs":60000}`},
		{name: "Member-shaped REST body", req: `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"reviewer","labels":{"team":"api"}},
			"spec":{"profile":"codex-fast","transport":"stdio","workspace":"api","cwd":"/srv/api","prompt":"go","paused":false}}`},
		{name: "prompt may quote URLs and variable names", req: `{"profile":"p","prompt":"Why is ANTHROPIC_BASE_URL=https://x set? echo $OPENAI_API_KEY; see https://github.com/o/r/pull/5"}`},
		{name: "spec.prompt is exempt too", req: `{"spec":{"profile":"p","prompt":"fetch https://example.com with $GITHUB_TOKEN"}}`},
		{name: "harmless variable reference", req: `{"profile":"p","workspace":"$HOME"}`},
		{name: "lower-case member name that reads like a secret word", req: `{"profile":"p","name":"api-key-rotator"}`},
		{name: "a Member's worktree and its base ref", req: `{"kind":"Member","spec":{"profile":"p","worktree":{"repo":"/srv/api","branch":"agents/x","base":"origin/main"}}}`},

		// "base" is an endpoint word (api_base) everywhere but a worktree's
		// base ref, whose value is still checked.
		{name: "base elsewhere", req: `{"spec":{"profile":"p","base":"main"}}`, wantPath: "spec.base"},
		{name: "worktree base outside a spec", req: `{"profile":"p","worktree":{"base":"main"}}`, wantPath: "worktree.base"},
		{name: "a URL as the worktree's base", req: `{"spec":{"profile":"p","worktree":{"base":"https://proxy.example"}}}`, wantPath: "spec.worktree.base"},

		// Environment bags.
		{name: "top-level env", req: `{"profile":"p","env":{"LANG":"C"}}`, wantPath: "env"},
		{name: "spec.env", req: `{"spec":{"profile":"p","env":{}}}`, wantPath: "spec.env"},
		{name: "nested envVars", req: `{"profile":"p","mcpTarget":{"kind":"resident","envVars":["X"]}}`, wantPath: "mcpTarget.envVars"},
		{name: "environment in an array element", req: `{"profile":"p","extra":[{"ok":1},{"environment":{}}]}`, wantPath: "extra[1].environment"},
		{name: "forward_env", req: `{"profile":"p","forward_env":["HOME"]}`, wantPath: "forward_env"},

		// Credential-bearing keys.
		{name: "ANTHROPIC_BASE_URL as a key", req: `{"profile":"p","ANTHROPIC_BASE_URL":"x"}`, wantPath: "ANTHROPIC_BASE_URL"},
		{name: "camelCase anthropicBaseUrl", req: `{"profile":"p","anthropicBaseUrl":"x"}`, wantPath: "anthropicBaseUrl"},
		{name: "provider key without a secret word", req: `{"profile":"p","AWS_PROFILE":"prod"}`, wantPath: "AWS_PROFILE"},
		{name: "OpenAI spelled camelCase", req: `{"profile":"p","openAiOrg":"o"}`, wantPath: "openAiOrg"},
		{name: "apiKey", req: `{"profile":"p","apiKey":"sk-1"}`, wantPath: "apiKey"},
		{name: "token", req: `{"profile":"p","token":"abc"}`, wantPath: "token"},
		{name: "label key naming a secret", req: `{"metadata":{"labels":{"OPENAI_API_KEY":"x"}}}`, wantPath: "metadata.labels.OPENAI_API_KEY"},
		{name: "headers", req: `{"profile":"p","headers":{"X":"y"}}`, wantPath: "headers"},
		{name: "Authorization", req: `{"profile":"p","Authorization":"Bearer x"}`, wantPath: "Authorization"},
		{name: "url", req: `{"profile":"p","url":"x"}`, wantPath: "url"},
		{name: "baseURL", req: `{"profile":"p","spec":{"baseURL":"x"}}`, wantPath: "spec.baseURL"},
		{name: "proxy", req: `{"profile":"p","https_proxy":"corp-relay"}`, wantPath: "https_proxy"},
		{name: "credentialEnv", req: `{"profile":"p","mcpTarget":{"kind":"tenant","tenantId":"a","credentialEnv":"ACME"}}`, wantPath: "mcpTarget.credentialEnv"},

		// Values that read, set or forward a credential-bearing variable.
		{name: "${VAR} reference", req: `{"profile":"p","workspace":"${ANTHROPIC_BASE_URL}"}`, wantPath: "workspace"},
		{name: "$VAR reference", req: `{"profile":"p","name":"$OPENAI_API_KEY"}`, wantPath: "name"},
		{name: "%VAR% reference", req: `{"profile":"p","workspace":"%AWS_SECRET_ACCESS_KEY%"}`, wantPath: "workspace"},
		{name: "assignment", req: `{"profile":"p","workspace":"ANTHROPIC_BASE_URL=http://proxy"}`, wantPath: "workspace"},
		{name: "assignment after a space", req: `{"profile":"p","cwd":"/srv GH_TOKEN=x"}`, wantPath: "cwd"},
		{name: "bare variable name in a list", req: `{"profile":"p","passthrough":["LANG","GITHUB_TOKEN"]}`, wantPath: "passthrough[1]"},
		{name: "URL value", req: `{"profile":"p","workspace":"https://evil.example/mcp"}`, wantPath: "workspace"},
		{name: "URL in a label value", req: `{"metadata":{"name":"x","annotations":{"see":"http://x"}}}`, wantPath: "metadata.annotations.see"},
		{name: "prompt exemption is by path, not by key", req: `{"spec":{"extra":{"prompt":"https://x"}}}`, wantPath: "spec.extra.prompt"},
		{name: "duplicate key: the hidden first value is checked", req: `{"profile":"p","workspace":"${OPENAI_API_KEY}","workspace":"api"}`, wantPath: "workspace"},
		{name: "non-string prompt is walked", req: `{"profile":"p","prompt":{"env":{}}}`, wantPath: "prompt.env"},
		{name: "numbers and booleans pass", req: `{"profile":"p","mcpTarget":{"kind":"resident"},"timeoutMs":1000,"wait":false}`},
		{name: "spec.env naming a secret", req: `{"profile":"p","spec":{"env":{"ANTHROPIC_BASE_URL":"x"}}}`, wantPath: "spec.env"},
		{name: "duplicate key: the hidden first env is seen", req: `{"profile":"p","spec":{"env":{"A":"b"},"env":null}}`, wantPath: "spec.env"},
		{name: "one-word compound key", req: `{"profile":"p","accesstoken":"x"}`, wantPath: "accesstoken"},
		{name: "cookie", req: `{"profile":"p","Cookie":"x"}`, wantPath: "Cookie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSpawnJSON([]byte(tt.req))
			if tt.wantPath == "" {
				if err != nil {
					t.Fatalf("CheckSpawnJSON = %v, want allowed", err)
				}
				return
			}
			var be *BoundaryError
			if !errors.As(err, &be) {
				t.Fatalf("CheckSpawnJSON = %v, want a *BoundaryError at %s", err, tt.wantPath)
			}
			if be.Path != tt.wantPath {
				t.Errorf("Path = %q, want %q (%v)", be.Path, tt.wantPath, err)
			}
			if !errors.Is(err, ErrSubscriptionBoundary) || be.Code() != "subscription_boundary" {
				t.Errorf("error %v does not carry code subscription_boundary", err)
			}
			for _, secret := range []string{"sk-1", "abc", "evil.example", "corp-relay", "Bearer x"} {
				if strings.Contains(tt.req, secret) && strings.Contains(err.Error(), secret) {
					t.Errorf("error echoes a request value %q: %v", secret, err)
				}
			}
		})
	}
}

// TestCheckSpawnJSON_DuplicateKeys: a key named twice is refused even when
// both values are harmless, with the path of the second one; a forbidden
// value in either copy is a boundary error first.
func TestCheckSpawnJSON_DuplicateKeys(t *testing.T) {
	tests := []struct {
		name, req string
		wantDup   string // path of a *DuplicateKeyError
		wantBound string // path of a *BoundaryError
	}{
		{name: "top level", req: `{"profile":"p","workspace":"a","workspace":"b"}`, wantDup: "workspace"},
		{name: "nested", req: `{"spec":{"profile":"p","transport":"stdio","transport":"stdio"}}`, wantDup: "spec.transport"},
		{name: "escaped spelling of the same key", req: `{"profile":"p","pro\u0066ile":"q"}`, wantDup: "profile"},
		{name: "secret in the second copy", req: `{"profile":"p","workspace":"api","workspace":"${OPENAI_API_KEY}"}`, wantBound: "workspace"},
		{name: "same key in sibling objects is fine", req: `{"a":{"kind":"x"},"b":{"kind":"y"},"c":[{"k":1},{"k":2}]}`},
		{name: "keys differing in case are distinct", req: `{"profile":"p","Profile":"q"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSpawnJSON([]byte(tt.req))
			var de *DuplicateKeyError
			var be *BoundaryError
			switch {
			case tt.wantDup != "":
				if !errors.As(err, &de) || de.Path != tt.wantDup || errors.Is(err, ErrSubscriptionBoundary) {
					t.Errorf("CheckSpawnJSON = %v, want a *DuplicateKeyError at %s", err, tt.wantDup)
				}
			case tt.wantBound != "":
				if !errors.As(err, &be) || be.Path != tt.wantBound {
					t.Errorf("CheckSpawnJSON = %v, want a *BoundaryError at %s", err, tt.wantBound)
				}
			case err != nil:
				t.Errorf("CheckSpawnJSON = %v, want allowed", err)
			}
		})
	}
}

func TestCheckSpawnJSON_MalformedIsNotABoundaryError(t *testing.T) {
	for _, req := range []string{`{"profile":`, `{"a":1} {"env":{}}`, ``, `{"a":[1,}`} {
		err := CheckSpawnJSON([]byte(req))
		if err == nil {
			t.Errorf("CheckSpawnJSON(%q) = nil, want an error", req)
			continue
		}
		if errors.Is(err, ErrSubscriptionBoundary) {
			t.Errorf("CheckSpawnJSON(%q) = %v, want a plain decode error", req, err)
		}
	}
}

func TestIsCredentialName(t *testing.T) {
	tests := map[string]bool{
		"ANTHROPIC_BASE_URL": true, "ANTHROPIC_API_KEY": true, "ANTHROPIC_MODEL": true, "OPENAI_API_KEY": true,
		"OPENAI_BASE_URL": true, "AWS_ACCESS_KEY_ID": true, "AWS_REGION": true, "AZURE_OPENAI_ENDPOINT": true,
		"GOOGLE_APPLICATION_CREDENTIALS": true, "GEMINI_API_KEY": true, "CLAUDE_CODE_USE_BEDROCK": true,
		"GITHUB_TOKEN": true, "GH_TOKEN": true, "FLEETD_TOKEN": true, "FLEETD_TENANT_TOKEN": true, "HTTPS_PROXY": true,
		"MY_SERVICE_PASSWORD": true, "DB_SECRET": true, "apiKey": true,
		"HOME": false, "PATH": false, "LANG": false, "TERM": false, "MONKEY": false, "SESSION_ID": false,
		"TIMEOUT_MS": false, "FLEETD_MEMBER": false, "profile": false, "tenantId": false, "apiVersion": false,
	}
	for name, want := range tests {
		if got := IsCredentialName(name); got != want {
			t.Errorf("IsCredentialName(%q) = %v, want %v", name, got, want)
		}
	}
}
