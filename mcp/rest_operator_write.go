package mcp

import (
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/guard"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Writes of the operator's objects: POST /profiles and /tenants create or
// update one (an apply, as POST /members is), PUT /profiles/{name} and
// /tenants/{name} update one that exists, DELETE removes one. They are the
// primary's (a worker gets 403). The body is the object as a manifest
// holds it, YAML or JSON, decoded strictly by package decode;
// metadata.resourceVersion is a precondition for a store that keeps
// versions (etcd: 409 conflict when stale), and ?dryRun=All checks
// everything the write would and writes nothing. What a Profile or Tenant
// may say over REST is bounded by the subscription guard
// (guard.CheckObjectWrite: 403 subscription_boundary). A delete of an
// object a Member references is refused with 409 conflict, naming the
// members. bridge_spawn and the other tools never write these kinds.

// ObjectResult is the body of a successful write of a Profile or Tenant:
// the object and what happened to it, kubectl-style (created, configured,
// unchanged, deleted).
type ObjectResult struct {
	Result string `json:"result"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
}

func (s *restServer) operatorObjectWriteRoutes(mux *http.ServeMux, path, kind string) {
	mux.Handle("POST "+path, s.authenticated(s.primaryWrite(s.applyOperatorObject(kind, false))))
	mux.Handle("PUT "+path+"/{name}", s.authenticated(s.primaryWrite(s.applyOperatorObject(kind, true))))
	mux.Handle("DELETE "+path+"/{name}", s.authenticated(s.primaryWrite(s.deleteOperatorObject(kind))))
}

// primaryWrite refuses a worker's token with 403.
func (s *restServer) primaryWrite(next http.HandlerFunc) func(http.ResponseWriter, *http.Request, tokens.Identity) {
	return primaryRoute("profiles and tenants are the operator's; only the primary may write them", next)
}

// applyOperatorObject is POST PATH (create or update) and, with update,
// PUT PATH/{name} (update only: 404 for an object the store does not have).
func (s *restServer) applyOperatorObject(kind string, update bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readBody(w, r, "a "+kind+" manifest")
		if !ok {
			return
		}
		dryRun, err := dryRunArg(r)
		if err != nil {
			writeToolError(w, err)
			return
		}
		obj, err := decodeObject(kind, body)
		if err != nil {
			writeToolError(w, err)
			return
		}
		name := obj.GetName()
		if update && r.PathValue("name") != name {
			writeToolError(w, toolErr(codeInvalidArgument, "metadata.name %s is not the %s the path names, %s", quote(name), kind, quote(r.PathValue("name"))))
			return
		}
		stored, found := s.opts.Store.Get(kind, name)
		if !found {
			stored = nil // a store may answer a nil pointer
		}
		if update && !found {
			writeError(w, http.StatusNotFound, codeNotFound, kind+" "+quote(name)+" not found; POST "+kindPath(kind)+" creates it")
			return
		}
		if err := guard.CheckObjectWrite(obj, stored, s.opts.Store.List(v1alpha1.KindTenant)); err != nil {
			writeToolError(w, boundaryErr(err))
			return
		}
		result := resultCreated
		if found {
			result = resultConfigured
			if sameDefinition(obj, stored) {
				result = resultUnchanged
			}
		}
		what := strings.ToLower(kind) + " " + name
		switch {
		case result == resultUnchanged:
		case dryRun:
			if c, ok := s.opts.Store.(applyChecker); ok {
				err = c.CheckApply(r.Context(), obj)
			}
		default:
			err = s.opts.Store.Apply(r.Context(), obj)
		}
		if err != nil {
			writeToolError(w, writeErr(what, err))
			return
		}
		status := http.StatusOK
		if result == resultCreated {
			status = http.StatusCreated
		}
		writeJSON(w, status, ObjectResult{Result: result, Kind: kind, Name: name})
	}
}

// deleteOperatorObject is DELETE PATH/{name}: 409 while a Member
// references the object (or while members changed under every attempt to
// check that none does).
func (s *restServer) deleteOperatorObject(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		err := s.opts.Store.Delete(r.Context(), kind, name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, http.StatusNotFound, codeNotFound, kind+" "+quote(name)+" not found")
		case errors.Is(err, store.ErrInUse), errors.Is(err, store.ErrConflict):
			writeToolError(w, toolErr(codeConflict, "%v", err))
		case err != nil:
			writeToolError(w, toolErr(codeUnavailable, "%v", err))
		default:
			writeJSON(w, http.StatusOK, ObjectResult{Result: resultDeleted, Kind: kind, Name: name})
		}
	}
}

// decodeObject decodes a write's body — one object of kind, as a manifest
// holds it, YAML or JSON — strictly, with defaults.
func decodeObject(kind string, body []byte) (v1alpha1.Object, error) {
	objs, errs := decode.File("request body", body)
	if len(errs) > 0 {
		return nil, specErr(errs)
	}
	if len(objs) != 1 {
		return nil, toolErr(codeInvalidSpec, "request body: want exactly one %s, got %d objects", kind, len(objs))
	}
	if got := objs[0].GetObjectKind(); got != kind {
		return nil, toolErr(codeInvalidSpec, "kind: want %s, got %s; POST %s writes it", kind, got, kindPath(got))
	}
	return objs[0], nil
}

// kindPath is the REST path of a kind's objects.
func kindPath(kind string) string { return "/" + strings.ToLower(kind) + "s" }

// sameDefinition reports whether obj says what the stored object says: the
// same spec, labels and annotations (both decoded with defaults), whatever
// fleetd owns.
func sameDefinition(obj, stored v1alpha1.Object) bool {
	a, b := obj.GetMeta(), stored.GetMeta()
	if !reflect.DeepEqual(a.Labels, b.Labels) || !reflect.DeepEqual(a.Annotations, b.Annotations) {
		return false
	}
	switch o := obj.(type) {
	case *v1alpha1.Member:
		m, ok := stored.(*v1alpha1.Member)
		return ok && reflect.DeepEqual(o.Spec, m.Spec)
	case *v1alpha1.Profile:
		p, ok := stored.(*v1alpha1.Profile)
		return ok && reflect.DeepEqual(o.Spec, p.Spec)
	case *v1alpha1.Tenant:
		t, ok := stored.(*v1alpha1.Tenant)
		return ok && reflect.DeepEqual(o.Spec, t.Spec)
	}
	return false
}
