package plan_test

import (
	"errors"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/plan"
)

func ExampleResolve() {
	gw, _ := plan.GatewayForListen("127.0.0.1:8080")
	m := &v1alpha1.Member{
		ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"},
		Spec:       v1alpha1.MemberSpec{Profile: "codex-fast", MCPTarget: &v1alpha1.MCPTarget{Kind: "tenant", TenantID: "acme"}},
	}
	tenants := map[string]*v1alpha1.Tenant{"acme": {Spec: v1alpha1.TenantSpec{URL: "https://fleet.acme.example/mcp", CredentialEnv: "ACME_FLEETD_TOKEN"}}}
	unset := func(string) (string, bool) { return "", false }

	_, err := plan.Resolve(m, tenants, gw, unset)
	var r interface{ Reason() string }
	if errors.As(err, &r) {
		fmt.Println("Ready=False reason:", r.Reason())
	}

	set := func(k string) (string, bool) { return "credential", k == "ACME_FLEETD_TOKEN" }
	rows, _ := plan.Resolve(m, tenants, gw, set)
	fmt.Printf("%+v\n", rows[0])
	// Output:
	// Ready=False reason: CredentialMissing
	// {Server:fleetd Target:tenant Transport:streamable-http URL:https://fleet.acme.example/mcp CredentialEnv:FLEETD_TENANT_TOKEN}
}
