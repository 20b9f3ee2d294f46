package mcp

import (
	"net/http"
	"sort"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The operator's objects over REST: GET /profiles, /profiles/{name},
// /tenants and /tenants/{name} serve the Profiles and Tenants fleetd has
// loaded, for fleetd get and describe. They are the primary's: a Profile's
// env is operator-owned and may hold what a worker must not read (workers
// see name, harness and description through bridge_profiles).

// ProfileList is the body of GET /profiles.
type ProfileList struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Items      []v1alpha1.Profile `json:"items"`
}

// TenantList is the body of GET /tenants.
type TenantList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []v1alpha1.Tenant `json:"items"`
}

func (s *restServer) operatorObjectRoutes(mux *http.ServeMux) {
	mux.Handle("GET /profiles", s.authenticated(s.primaryRead(func(w http.ResponseWriter, _ *http.Request) {
		items := []v1alpha1.Profile{}
		for _, obj := range s.sortedObjects(v1alpha1.KindProfile) {
			if p, ok := obj.(*v1alpha1.Profile); ok {
				c := *p.DeepCopy()
				c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindProfile
				items = append(items, c)
			}
		}
		writeJSON(w, http.StatusOK, ProfileList{APIVersion: v1alpha1.GroupVersion, Kind: "ProfileList", Items: items})
	})))
	mux.Handle("GET /tenants", s.authenticated(s.primaryRead(func(w http.ResponseWriter, _ *http.Request) {
		items := []v1alpha1.Tenant{}
		for _, obj := range s.sortedObjects(v1alpha1.KindTenant) {
			if t, ok := obj.(*v1alpha1.Tenant); ok {
				c := *t.DeepCopy()
				c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindTenant
				items = append(items, c)
			}
		}
		writeJSON(w, http.StatusOK, TenantList{APIVersion: v1alpha1.GroupVersion, Kind: "TenantList", Items: items})
	})))
	mux.Handle("GET /profiles/{name}", s.authenticated(s.primaryRead(s.getOperatorObject(v1alpha1.KindProfile))))
	mux.Handle("GET /tenants/{name}", s.authenticated(s.primaryRead(s.getOperatorObject(v1alpha1.KindTenant))))
}

// primaryRead refuses a worker's token with 403.
func (s *restServer) primaryRead(next http.HandlerFunc) func(http.ResponseWriter, *http.Request, tokens.Identity) {
	return func(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
		if !isPrimary(id) {
			writeError(w, http.StatusForbidden, codeForbidden, "profiles and tenants are the operator's; only the primary may read them (workers: bridge_profiles)")
			return
		}
		next(w, r)
	}
}

func (s *restServer) getOperatorObject(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		obj, ok := s.opts.Store.Get(kind, name)
		if !ok {
			writeError(w, http.StatusNotFound, codeNotFound, kind+" "+quote(name)+" not found")
			return
		}
		switch o := obj.(type) {
		case *v1alpha1.Profile:
			c := *o.DeepCopy()
			c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindProfile
			writeJSON(w, http.StatusOK, c)
		case *v1alpha1.Tenant:
			c := *o.DeepCopy()
			c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindTenant
			writeJSON(w, http.StatusOK, c)
		default:
			writeError(w, http.StatusNotFound, codeNotFound, kind+" "+quote(name)+" not found")
		}
	}
}

func (s *restServer) sortedObjects(kind string) []v1alpha1.Object {
	objs := s.opts.Store.List(kind)
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	return objs
}
