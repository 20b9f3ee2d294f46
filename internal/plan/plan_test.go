package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

const secret = "s3cr3t-tenant-credential"

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func member(target *v1alpha1.MCPTarget, transport string) *v1alpha1.Member {
	return &v1alpha1.Member{
		ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"},
		Spec:       v1alpha1.MemberSpec{Profile: "codex-fast", MCPTarget: target, Transport: transport},
	}
}

func TestResolve(t *testing.T) {
	gw := Gateway{URL: "http://127.0.0.1:8080/mcp"}
	tenants := map[string]*v1alpha1.Tenant{
		"acme":   {ObjectMeta: v1alpha1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"}},
		"nourl":  {ObjectMeta: v1alpha1.ObjectMeta{Name: "nourl"}, Spec: v1alpha1.TenantSpec{CredentialEnv: "ACME_FLEETD_TOKEN"}},
		"noslot": {ObjectMeta: v1alpha1.ObjectMeta{Name: "noslot"}, Spec: v1alpha1.TenantSpec{URL: "https://x.example/mcp"}},
	}
	withCred := env(map[string]string{"ACME_FLEETD_TOKEN": secret})
	tenant := &v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "acme"}

	tests := []struct {
		name       string
		m          *v1alpha1.Member
		gw         Gateway
		lookup     func(string) (string, bool)
		want       []v1alpha1.PlanRow
		wantReason string
	}{
		{
			name: "absent target and transport default to resident streamable-http",
			m:    member(nil, ""), gw: gw, lookup: withCred,
			want: []v1alpha1.PlanRow{{Server: "fleetd", Target: "resident", Transport: "streamable-http", URL: gw.URL, CredentialEnv: "FLEETD_TOKEN"}},
		},
		{
			name: "resident stdio",
			m:    member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident}, v1alpha1.TransportStdio), gw: gw, lookup: withCred,
			want: []v1alpha1.PlanRow{{Server: "fleetd", Target: "resident", Transport: "stdio", URL: gw.URL, CredentialEnv: "FLEETD_TOKEN"}},
		},
		{
			name: "tenant streamable-http uses the tenant URL and the tenant slot",
			m:    member(tenant, v1alpha1.TransportStreamableHTTP), gw: gw, lookup: withCred,
			want: []v1alpha1.PlanRow{{Server: "fleetd", Target: "tenant", Transport: "streamable-http", URL: "https://fleet.acme.example/mcp", CredentialEnv: "FLEETD_TENANT_TOKEN"}},
		},
		{
			name: "tenant stdio goes through the bridge to the tenant URL",
			m:    member(tenant, v1alpha1.TransportStdio), gw: gw, lookup: withCred,
			want: []v1alpha1.PlanRow{{Server: "fleetd", Target: "tenant", Transport: "stdio", URL: "https://fleet.acme.example/mcp", CredentialEnv: "FLEETD_TENANT_TOKEN"}},
		},
		{
			name: "unknown tenant", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "globex"}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonTenantNotFound,
		},
		{
			name: "credential variable unset", m: member(tenant, ""), gw: gw, lookup: env(nil), wantReason: v1alpha1.ReasonCredentialMissing,
		},
		{
			name: "credential variable empty", m: member(tenant, ""), gw: gw,
			lookup: env(map[string]string{"ACME_FLEETD_TOKEN": " "}), wantReason: v1alpha1.ReasonCredentialMissing,
		},
		{
			name: "no environment lookup", m: member(tenant, ""), gw: gw, wantReason: v1alpha1.ReasonCredentialMissing,
		},
		{
			name: "tenant without url", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "nourl"}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "tenant without credential slot", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "noslot"}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "tenant kind without tenantId", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "resident kind with tenantId", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident, TenantID: "acme"}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "unknown target kind", m: member(&v1alpha1.MCPTarget{Kind: "elsewhere"}, ""),
			gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "unknown transport", m: member(nil, "http"), gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "resident without a gateway URL", m: member(nil, ""), lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name: "nil member", gw: gw, lookup: withCred, wantReason: v1alpha1.ReasonInvalidSpec,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.m, tenants, tt.gw, tt.lookup)
			if tt.wantReason != "" {
				var perr *Error
				if !errors.As(err, &perr) {
					t.Fatalf("Resolve() error = %v, want *plan.Error with reason %s", err, tt.wantReason)
				}
				if perr.Reason() != tt.wantReason {
					t.Errorf("Reason() = %q, want %q (message %q)", perr.Reason(), tt.wantReason, perr.Error())
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error message leaks the credential: %q", err)
				}
				if got != nil {
					t.Errorf("rows = %v alongside an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolve_ReasonReachableThroughWrapping(t *testing.T) {
	_, err := Resolve(member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "gone"}, ""), nil, Gateway{URL: "http://x/mcp"}, nil)
	wrapped := errors.Join(errors.New("reconcile reviewer"), err)
	var r interface{ Reason() string }
	if !errors.As(wrapped, &r) || r.Reason() != v1alpha1.ReasonTenantNotFound {
		t.Fatalf("errors.As(Reason) on %v: got %v", wrapped, r)
	}
}

func TestTenantCredentialSource(t *testing.T) {
	tenants := map[string]*v1alpha1.Tenant{"acme": {Spec: v1alpha1.TenantSpec{URL: "https://a.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"}}}
	lookup := env(map[string]string{"ACME_FLEETD_TOKEN": secret})
	tests := []struct {
		name       string
		m          *v1alpha1.Member
		want       string
		wantReason string
	}{
		{name: "resident has none", m: member(nil, "")},
		{name: "tenant names its variable", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "acme"}, ""), want: "ACME_FLEETD_TOKEN"},
		{name: "missing tenant", m: member(&v1alpha1.MCPTarget{Kind: v1alpha1.TargetTenant, TenantID: "x"}, ""), wantReason: v1alpha1.ReasonTenantNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TenantCredentialSource(tt.m, tenants, lookup)
			var perr *Error
			switch {
			case tt.wantReason != "" && (!errors.As(err, &perr) || perr.Reason() != tt.wantReason):
				t.Fatalf("error = %v, want reason %s", err, tt.wantReason)
			case tt.wantReason == "" && err != nil:
				t.Fatalf("error = %v", err)
			}
			if got != tt.want {
				t.Errorf("source = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGatewayForListen(t *testing.T) {
	tests := []struct {
		addr    string
		want    string
		wantErr bool
	}{
		{addr: "127.0.0.1:8080", want: "http://127.0.0.1:8080/mcp"},
		{addr: ":8080", want: "http://127.0.0.1:8080/mcp"},
		{addr: "0.0.0.0:9000", want: "http://127.0.0.1:9000/mcp"},
		{addr: "[::]:8080", want: "http://[::1]:8080/mcp"},
		{addr: "localhost:8080", want: "http://localhost:8080/mcp"},
		{addr: "8080", wantErr: true},
		{addr: "127.0.0.1:", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, err := GatewayForListen(tt.addr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("GatewayForListen(%q) error = %v, wantErr %v", tt.addr, err, tt.wantErr)
			}
			if got.URL != tt.want {
				t.Errorf("URL = %q, want %q", got.URL, tt.want)
			}
		})
	}
}
