package v1alpha1

// Reference is one object a Member names: the spec field that names it, its
// kind and its name.
type Reference struct {
	Field string // e.g. "spec.profile"
	Kind  string // KindProfile or KindTenant
	Name  string
}

// References lists the objects m names, in field order: its Profile and,
// for a tenant target, its Tenant. It is the one statement of what a Member
// depends on: the decoder's reference check (`fleetd validate` and the
// store), the reconciler (a missing object is Ready=False, and a change of
// one requeues the member) and the gateway's spawn check all read it.
func (m *Member) References() []Reference {
	refs := []Reference{{Field: "spec.profile", Kind: KindProfile, Name: m.Spec.Profile}}
	if t := m.Spec.MCPTarget; t != nil && t.Kind == TargetTenant {
		refs = append(refs, Reference{Field: "spec.mcpTarget.tenantId", Kind: KindTenant, Name: t.TenantID})
	}
	return refs
}

// NotFoundReason is the condition reason of a Member whose reference names
// no object of kind: ReasonProfileNotFound or ReasonTenantNotFound.
func NotFoundReason(kind string) string {
	if kind == KindTenant {
		return ReasonTenantNotFound
	}
	return ReasonProfileNotFound
}
