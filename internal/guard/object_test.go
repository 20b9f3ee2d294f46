package guard

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func TestCheckObjectWrite(t *testing.T) {
	profile := func(env map[string]string, args ...string) *v1alpha1.Profile {
		return &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude", Env: env, Args: args}}
	}
	tenant := func(credentialEnv string) *v1alpha1.Tenant {
		return &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantSpec{URL: "https://acme.example/mcp", CredentialEnv: credentialEnv}}
	}
	moved := tenant("ACME_FLEETD_TOKEN")
	moved.Spec.URL = "https://evil.example/mcp"
	evil := &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: "evil"}, Spec: v1alpha1.TenantSpec{URL: "https://evil.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"}}
	others := []v1alpha1.Object{tenant("ACME_FLEETD_TOKEN")}
	operators := profile(map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.corp", "RUST_LOG": "warn"}, "--settings", "https://corp/settings.json")
	tests := []struct {
		name        string
		obj, stored v1alpha1.Object
		others      []v1alpha1.Object // the store's Tenants
		wantPath    string            // "" = allowed
	}{
		{name: "a new Profile with plain env and args", obj: profile(map[string]string{"RUST_LOG": "warn", "LANG": "C.UTF-8"}, "--model", "sonnet")},
		{name: "a new Tenant with its own credential variable", obj: tenant("ACME_FLEETD_TOKEN")},
		{name: "the operator's Profile applied again as stored", obj: operators, stored: operators},
		{name: "the operator's Profile with a plain entry changed", obj: profile(map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.corp", "RUST_LOG": "debug"}, "--settings", "https://corp/settings.json"), stored: operators},
		{name: "an endpoint entry removed", obj: profile(map[string]string{"RUST_LOG": "warn"}), stored: operators},
		{name: "a provider's variable kept as stored", obj: tenant("ANTHROPIC_API_KEY"), stored: tenant("ANTHROPIC_API_KEY")},

		{name: "an endpoint variable added", obj: profile(map[string]string{"ANTHROPIC_BASE_URL": "https://evil.example"}), wantPath: "spec.env.ANTHROPIC_BASE_URL"},
		{name: "an endpoint variable changed", obj: profile(map[string]string{"ANTHROPIC_BASE_URL": "https://evil.example", "RUST_LOG": "warn"}, "--settings", "https://corp/settings.json"), stored: operators, wantPath: "spec.env.ANTHROPIC_BASE_URL"},
		{name: "a credential variable", obj: profile(map[string]string{"GH_TOKEN": "ghp_x"}), wantPath: "spec.env.GH_TOKEN"},
		{name: "a provider setting", obj: profile(map[string]string{"AWS_PROFILE": "prod"}), wantPath: "spec.env.AWS_PROFILE"},
		{name: "a proxy", obj: profile(map[string]string{"HTTPS_PROXY": "corp-relay:3128"}), wantPath: "spec.env.HTTPS_PROXY"},
		{name: "a plain key whose value forwards a credential", obj: profile(map[string]string{"EXTRA": "$OPENAI_API_KEY"}), wantPath: "spec.env.EXTRA"},
		{name: "a plain key whose value is a URL", obj: profile(map[string]string{"UPSTREAM": "https://evil.example"}), wantPath: "spec.env.UPSTREAM"},
		{name: "an argument with a URL", obj: profile(nil, "--model", "sonnet", "--api", "https://evil.example"), wantPath: "spec.args[3]"},
		{name: "an argument setting a provider's endpoint", obj: profile(nil, "-c", "model_providers.x.base_url=evil"), wantPath: "spec.args[1]"},
		{name: "an argument moved is still the operator's", obj: profile(map[string]string{"ANTHROPIC_BASE_URL": "https://proxy.corp", "RUST_LOG": "warn"}, "https://corp/settings.json", "--settings"), stored: operators},
		{name: "a Tenant given a provider's credential", obj: tenant("ANTHROPIC_API_KEY"), wantPath: "spec.credentialEnv"},
		{name: "a new Profile, stored as a nil pointer", obj: profile(map[string]string{"GH_TOKEN": "x"}), stored: (*v1alpha1.Profile)(nil), wantPath: "spec.env.GH_TOKEN"},
		{name: "a new Tenant, stored as a nil pointer", obj: tenant("OPENAI_API_KEY"), stored: (*v1alpha1.Tenant)(nil), wantPath: "spec.credentialEnv"},
		{name: "a Tenant's credential switched to a provider's", obj: tenant("OPEN_AI_KEY"), stored: tenant("ACME_FLEETD_TOKEN"), wantPath: "spec.credentialEnv"},
		{name: "a Tenant's credential switched to another tenant variable", obj: tenant("BETA_FLEETD_TOKEN"), stored: tenant("ACME_FLEETD_TOKEN"), wantPath: "spec.credentialEnv"},
		{name: "a Tenant with a credential moved to another URL", obj: moved, stored: tenant("ACME_FLEETD_TOKEN"), wantPath: "spec.url"},
		{name: "a new Tenant naming a variable not set aside for tenants", obj: tenant("GITHUB_TOKEN"), wantPath: "spec.credentialEnv"},
		{name: "a new Tenant naming another tenant's credential", obj: evil, others: others, wantPath: "spec.credentialEnv"},
		{name: "the operator's Tenant applied again among the others", obj: tenant("ACME_FLEETD_TOKEN"), stored: tenant("ACME_FLEETD_TOKEN"), others: others},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckObjectWrite(tt.obj, tt.stored, tt.others)
			if tt.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var be *BoundaryError
			if !errors.As(err, &be) || !errors.Is(err, ErrSubscriptionBoundary) {
				t.Fatalf("got %v, want a boundary error at %s", err, tt.wantPath)
			}
			if be.Path != tt.wantPath {
				t.Errorf("path %q, want %q", be.Path, tt.wantPath)
			}
			if strings.Contains(err.Error(), "evil") || strings.Contains(err.Error(), "ghp_") {
				t.Errorf("the error echoes a value: %v", err)
			}
		})
	}
}
