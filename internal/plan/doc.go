// Package plan resolves which MCP gateway a member's harness talks to and over
// which canonical transport: the member's target selection (resident or a
// named Tenant) and transport (stdio or streamable-http) become plan rows
// {server, target, transport, url, credentialEnv}.
//
// Resolution is a pure function of its inputs — the member, the known
// Tenants, this fleetd's own gateway address and a lookup into fleetd's
// environment — so it is tested alone and gives the same answer every time.
// A member whose plan cannot be resolved gets an [*Error] carrying a stable
// condition reason ([v1alpha1.ReasonTenantNotFound],
// [v1alpha1.ReasonCredentialMissing], [v1alpha1.ReasonInvalidSpec]) that the
// reconciler turns into Ready=False.
//
// This package must never hold or return a secret value: the environment
// lookup is used only to learn that a tenant's credential variable is set,
// and rows carry the *name* of the pane variable a harness reads its
// credential from, never the credential. It knows no harness spelling either:
// turning rows into a particular harness's configuration is package harness's
// job.
package plan
