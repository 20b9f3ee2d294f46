package mcp

import (
	"net/http"
	"sort"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The operator's objects over REST: GET /profiles, /profiles/{name},
// /tenants and /tenants/{name} serve the Profiles and Tenants fleetd has
// loaded, for fleetd get and describe: one object, or a ProfileList or
// TenantList shaped like [MemberList]. They are the primary's: a Profile's
// env is operator-owned and may hold what a worker must not read (workers
// see name, harness and description through bridge_profiles). Their writes
// are in rest_operator_write.go.

// objectList is the body of GET /profiles and /tenants.
type objectList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []any  `json:"items"`
}

func (s *restServer) operatorObjectRoutes(mux *http.ServeMux) {
	for _, r := range []struct{ path, kind string }{{"/profiles", v1alpha1.KindProfile}, {"/tenants", v1alpha1.KindTenant}} {
		mux.Handle("GET "+r.path, s.authenticated(s.primaryRead(s.listOperatorObjects(r.kind))))
		mux.Handle("GET "+r.path+"/{name}", s.authenticated(s.primaryRead(s.getOperatorObject(r.kind))))
		s.operatorObjectWriteRoutes(mux, r.path, r.kind) // rest_operator_write.go
	}
}

// primaryRead refuses a worker's token with 403.
func (s *restServer) primaryRead(next http.HandlerFunc) func(http.ResponseWriter, *http.Request, tokens.Identity) {
	return primaryRoute("profiles and tenants are the operator's; only the primary may read them (workers: bridge_profiles)", next)
}

// primaryRoute refuses a worker's token with 403 and why.
func primaryRoute(why string, next http.HandlerFunc) func(http.ResponseWriter, *http.Request, tokens.Identity) {
	return func(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
		if !isPrimary(id) {
			writeError(w, http.StatusForbidden, codeForbidden, why)
			return
		}
		next(w, r)
	}
}

func (s *restServer) listOperatorObjects(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		objs := s.opts.Store.List(kind)
		sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
		list := objectList{APIVersion: v1alpha1.GroupVersion, Kind: kind + "List", Items: []any{}}
		for _, obj := range objs {
			if v, ok := s.operatorView(obj); ok {
				list.Items = append(list.Items, v)
			}
		}
		writeJSON(w, http.StatusOK, list)
	}
}

func (s *restServer) getOperatorObject(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		obj, ok := s.opts.Store.Get(kind, name)
		if ok {
			if v, ok := s.operatorView(obj); ok {
				writeJSON(w, http.StatusOK, v)
				return
			}
		}
		writeError(w, http.StatusNotFound, codeNotFound, kind+" "+quote(name)+" not found")
	}
}

// operatorView is a copy of a Profile or Tenant with its apiVersion and
// kind set, as a manifest has them, and a Profile's status (its rollout,
// Options.Rollouts).
func (s *restServer) operatorView(obj v1alpha1.Object) (any, bool) {
	switch o := obj.(type) {
	case *v1alpha1.Profile:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindProfile
		if s.opts.Rollouts != nil {
			if p, ok := s.opts.Rollouts.Profile(o.Name); ok {
				c.Status = p.Status
			}
		}
		return c, true
	case *v1alpha1.Tenant:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = v1alpha1.GroupVersion, v1alpha1.KindTenant
		return c, true
	}
	return nil, false
}
