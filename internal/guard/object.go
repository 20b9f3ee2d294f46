package guard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// keepOnly ends the reason of a refused Profile or Tenant field: what the
// rule lets through.
const keepOnly = "; written over REST or the console, an object keeps such a value as stored and never adds or changes one"

// CheckObjectWrite checks a Profile or Tenant that arrived over REST or
// the console (POST or PUT /profiles and /tenants, the console's apply)
// against the stored definition of the same object (nil, or a nil pointer,
// for a new one).
// Such a write may create and change Profiles and Tenants, but it never
// sets what the spawn guard keeps out of requests: it fails with a
// [*BoundaryError] when
//
//   - a Profile's spec.env has an entry that is not the stored Profile's,
//     and its key names a credential, an endpoint, headers, an environment
//     bag or a provider's settings (ANTHROPIC_BASE_URL, OPENAI_API_KEY,
//     GH_TOKEN, HTTPS_PROXY, … — the words of [CheckSpawnJSON]'s key rule),
//     or its value references, assigns or names a credential-bearing
//     variable or contains a URL ([CheckSpawnJSON]'s value rules);
//   - a Profile's spec.args has an argument that the stored Profile's args
//     do not hold and that breaks those value rules (a URL, a
//     base_url=… setting, $OPENAI_API_KEY);
//   - a Tenant's spec.credentialEnv, not the stored Tenant's, names a
//     provider's variable (ANTHROPIC_…, OPENAI_…, AWS_…, …), does not end
//     in _FLEETD_TOKEN (the convention for a variable the operator set
//     aside for one tenant's gateway), or is another Tenant's (of others):
//     no credential of fleetd's environment goes to a gateway chosen over
//     REST other than one meant for a tenant, and a tenant's credential
//     goes to its own gateway only;
//   - a stored Tenant with a credentialEnv gets another credentialEnv or
//     another spec.url: its credential would go to a URL set over REST.
//     Moving a tenant's gateway is done in its manifest (or in etcd).
//
// An entry equal to the stored one passes, so that an operator's own
// definition — written in a manifest file or put into etcd — can be
// applied again (`fleetd get -o yaml | fleetd apply -f -`, `fleetd apply
// -f manifests/`) and its other fields changed. Removing an entry always
// passes. A Member is not checked here: its requests go through
// [CheckSpawnJSON].
func CheckObjectWrite(obj, stored v1alpha1.Object, others []v1alpha1.Object) error {
	switch o := obj.(type) {
	case *v1alpha1.Profile:
		var old v1alpha1.ProfileSpec
		if s, ok := stored.(*v1alpha1.Profile); ok && s != nil {
			old = s.Spec
		}
		return checkProfile(o.Spec, old)
	case *v1alpha1.Tenant:
		var old v1alpha1.TenantSpec
		if s, ok := stored.(*v1alpha1.Tenant); ok && s != nil {
			old = s.Spec
		}
		return checkTenant(o, old, others)
	}
	return nil
}

// tenantCredentialSuffix ends the name of every variable a Tenant written
// over REST may send to its gateway.
const tenantCredentialSuffix = "_FLEETD_TOKEN"

func checkTenant(t *v1alpha1.Tenant, old v1alpha1.TenantSpec, others []v1alpha1.Object) error {
	env := t.Spec.CredentialEnv
	if old.CredentialEnv != "" && (env != old.CredentialEnv || t.Spec.URL != old.URL) {
		path := "spec.url"
		if env != old.CredentialEnv {
			path = "spec.credentialEnv"
		}
		return &BoundaryError{Path: path, Why: fmt.Sprintf("the tenant's credential (%s) would go to a gateway set over REST; change a tenant's url or credentialEnv in its manifest file (or in etcd)", old.CredentialEnv)}
	}
	if env == "" || env == old.CredentialEnv {
		return nil
	}
	if isProviderName(env) {
		return &BoundaryError{Path: "spec.credentialEnv", Why: "names a provider's variable" + keepOnly}
	}
	if !strings.HasSuffix(env, tenantCredentialSuffix) {
		return &BoundaryError{Path: "spec.credentialEnv", Why: fmt.Sprintf("%s does not end in %s; written over REST or the console, a Tenant may only name a variable set aside for a tenant's gateway", env, tenantCredentialSuffix)}
	}
	for _, o := range others {
		if other, ok := o.(*v1alpha1.Tenant); ok && other != nil && other.Name != t.Name && other.Spec.CredentialEnv == env {
			return &BoundaryError{Path: "spec.credentialEnv", Why: fmt.Sprintf("%s is tenant %q's credential; a tenant's credential goes to its own gateway only", env, other.Name)}
		}
	}
	return nil
}

func checkProfile(spec, old v1alpha1.ProfileSpec) error {
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		v := spec.Env[k]
		if was, ok := old.Env[k]; ok && was == v {
			continue
		}
		why := keyClass(k)
		if why == "" {
			why = valueViolation(v)
		}
		if why != "" {
			return &BoundaryError{Path: "spec.env." + k, Why: why + keepOnly}
		}
	}
	for i, a := range spec.Args {
		if slices.Contains(old.Args, a) {
			continue
		}
		if why := valueViolation(a); why != "" {
			return &BoundaryError{Path: fmt.Sprintf("spec.args[%d]", i), Why: why + keepOnly}
		}
	}
	return nil
}

// keyClass says what an environment variable's name gives away, as the
// spawn guard's key rule reads it; "" when nothing.
func keyClass(key string) string {
	if w, ok := keyWords[v1alpha1.ClassifyKey(key)]; ok {
		return "names " + w.one
	}
	return ""
}

// isProviderName reports whether a variable's name starts with a
// provider's name (ANTHROPIC_API_KEY, OPENAI_…, OPEN_AI_…, AWS_…): its
// first word, or its first two ("open ai"), is one by
// [v1alpha1.ClassifyKey]'s provider list.
func isProviderName(name string) bool {
	words := v1alpha1.KeyWords(name)
	for n := 1; n <= min(2, len(words)); n++ {
		if v1alpha1.ClassifyKey(strings.Join(words[:n], "_")) == v1alpha1.KeyProvider {
			return true
		}
	}
	return false
}
