package plan

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// ServerName is the MCP server name every row carries: harnesses list the
// gateway's tools under it.
const ServerName = "fleetd"

// Pane variables a plan row names as its credential slot. They are names
// only; the reconciler's launcher fills them in the pane environment.
const (
	// MemberTokenEnv holds the token this fleetd minted for the pane. Rows
	// that target the resident gateway authenticate with it.
	MemberTokenEnv = "FLEETD_TOKEN"
	// TenantTokenEnv holds the credential of the member's Tenant, copied from
	// the fleetd environment variable the Tenant's spec.credentialEnv names.
	// Rows that target a tenant gateway authenticate with it.
	TenantTokenEnv = "FLEETD_TENANT_TOKEN"
)

// Error is why a member's plan cannot be resolved. Its reason is stable and
// meant for a status condition; its message is for people and names the
// object and field at fault, never a secret.
type Error struct {
	reason string
	msg    string
}

func (e *Error) Error() string { return e.msg }

// Reason returns the condition reason, e.g. [v1alpha1.ReasonTenantNotFound].
func (e *Error) Reason() string { return e.reason }

// Errorf returns an [*Error] with the given condition reason and a message
// formatted as by fmt.Sprintf. Packages that launch a plan use it for their
// own unresolvable-spec errors so the reconciler sees one error shape.
func Errorf(reason, format string, args ...any) *Error {
	return &Error{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// Gateway is this fleetd's own MCP endpoint as workers on this host reach it.
type Gateway struct {
	// URL is the resident gateway's Streamable HTTP URL, e.g.
	// http://127.0.0.1:8080/mcp.
	URL string
}

// GatewayForListen returns the Gateway workers on this host use to reach a
// fleetd listening on addr (host:port, as given to --listen). An unspecified
// host (":8080", "0.0.0.0:8080", "[::]:8080") is reached over loopback.
func GatewayForListen(addr string) (Gateway, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Gateway{}, fmt.Errorf("gateway address %q: %w", addr, err)
	}
	if port == "" {
		return Gateway{}, fmt.Errorf("gateway address %q: missing port", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/mcp"}
	return Gateway{URL: u.String()}, nil
}

// Resolve returns the plan rows for member m. tenants maps Tenant names to
// Tenants; gw is this fleetd's own gateway; lookupEnv reads fleetd's own
// environment (os.LookupEnv in production) and is consulted only to check
// that a tenant's credential variable is set and non-empty — its value is
// never kept.
//
// The member's defaults need not be applied first: an absent mcpTarget means
// resident and an empty transport means streamable-http, as in the API.
// Errors are [*Error] values whose Reason is a condition reason.
func Resolve(m *v1alpha1.Member, tenants map[string]*v1alpha1.Tenant, gw Gateway, lookupEnv func(string) (string, bool)) ([]v1alpha1.PlanRow, error) {
	if m == nil {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "resolve plan: no member")
	}
	transport := m.Spec.Transport
	switch transport {
	case "":
		transport = v1alpha1.TransportStreamableHTTP
	case v1alpha1.TransportStdio, v1alpha1.TransportStreamableHTTP:
	default:
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "member %q: spec.transport: unknown value %q; want %s or %s",
			m.Name, transport, v1alpha1.TransportStdio, v1alpha1.TransportStreamableHTTP)
	}

	target := v1alpha1.MCPTarget{Kind: v1alpha1.TargetResident}
	if m.Spec.MCPTarget != nil {
		target = *m.Spec.MCPTarget
	}
	switch target.Kind {
	case v1alpha1.TargetResident, "":
		if target.TenantID != "" {
			return nil, Errorf(v1alpha1.ReasonInvalidSpec, "member %q: spec.mcpTarget.tenantId is set but kind is resident", m.Name)
		}
		if gw.URL == "" {
			return nil, Errorf(v1alpha1.ReasonInvalidSpec, "member %q: this fleetd has no gateway URL to give a resident member", m.Name)
		}
		return []v1alpha1.PlanRow{{
			Server:        ServerName,
			Target:        v1alpha1.TargetResident,
			Transport:     transport,
			URL:           gw.URL,
			CredentialEnv: MemberTokenEnv,
		}}, nil
	case v1alpha1.TargetTenant:
		t, err := tenantFor(m.Name, target.TenantID, tenants, lookupEnv)
		if err != nil {
			return nil, err
		}
		return []v1alpha1.PlanRow{{
			Server:        ServerName,
			Target:        v1alpha1.TargetTenant,
			Transport:     transport,
			URL:           t.Spec.URL,
			CredentialEnv: TenantTokenEnv,
		}}, nil
	default:
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "member %q: spec.mcpTarget.kind: unknown value %q; want %s or %s",
			m.Name, target.Kind, v1alpha1.TargetResident, v1alpha1.TargetTenant)
	}
}

// TenantCredentialSource returns the name of the fleetd environment variable
// whose value fills [TenantTokenEnv] in member m's pane, or "" when m does
// not target a tenant. It applies the same checks as [Resolve].
func TenantCredentialSource(m *v1alpha1.Member, tenants map[string]*v1alpha1.Tenant, lookupEnv func(string) (string, bool)) (string, error) {
	if m == nil || m.Spec.MCPTarget == nil || m.Spec.MCPTarget.Kind != v1alpha1.TargetTenant {
		return "", nil
	}
	t, err := tenantFor(m.Name, m.Spec.MCPTarget.TenantID, tenants, lookupEnv)
	if err != nil {
		return "", err
	}
	return t.Spec.CredentialEnv, nil
}

// tenantFor finds the Tenant a tenant-targeted member names and checks that
// it is usable: a URL, and a credential variable that is set in fleetd's
// environment.
func tenantFor(member, id string, tenants map[string]*v1alpha1.Tenant, lookupEnv func(string) (string, bool)) (*v1alpha1.Tenant, error) {
	if id == "" {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "member %q: spec.mcpTarget.tenantId is required when kind is tenant", member)
	}
	t, ok := tenants[id]
	if !ok || t == nil {
		return nil, Errorf(v1alpha1.ReasonTenantNotFound, "member %q: Tenant %q not found", member, id)
	}
	if t.Spec.URL == "" {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "Tenant %q: spec.url is empty", id)
	}
	name := t.Spec.CredentialEnv
	if name == "" {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, "Tenant %q: spec.credentialEnv is empty", id)
	}
	if lookupEnv == nil {
		return nil, Errorf(v1alpha1.ReasonCredentialMissing, "Tenant %q: credential variable %s is not set in fleetd's environment (no environment given)", id, name)
	}
	if v, ok := lookupEnv(name); !ok || strings.TrimSpace(v) == "" {
		return nil, Errorf(v1alpha1.ReasonCredentialMissing,
			"Tenant %q: credential variable %s is not set in fleetd's environment; set it and restart fleetd", id, name)
	}
	return t, nil
}
