package mcp

import (
	"net/http"
	"path/filepath"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// GET /manifests/errors is the desired state's current definition problems
// — what `fleetd validate` prints of the manifests fleetd watches, each
// with the object its document declares when that could be read — so that
// a typo in a new manifest, which defines nothing until it is fixed, is
// visible from the command line: `fleetd get` says how many files have
// errors, and `fleetd describe member NAME` of a member a broken file
// declares names that file. It is the primary's: file paths and the values
// in the messages are the operator's own.

// ManifestErrorList is the body of GET /manifests/errors.
type ManifestErrorList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Directory is the manifests directory fleetd watches, as an absolute
	// path (what `fleetd validate` takes); "" for a desired state that is
	// not a directory (etcd).
	Directory string          `json:"directory,omitempty"`
	Items     []ManifestError `json:"items"`
}

// ManifestError is one problem of a manifest: where it is, what it is,
// and the object its document declares.
type ManifestError struct {
	// File is the manifest (an absolute path in the directory) or, on
	// etcd, the key.
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Object is what the failing document declares (kind and
	// metadata.name as written); nil when they could not be read.
	Object *ObjectRef `json:"object,omitempty"`
}

// ObjectRef names an object by kind and name.
type ObjectRef struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

func (s *restServer) manifestErrorRoutes(mux *http.ServeMux) {
	if s.opts.ManifestErrors != nil {
		mux.Handle("GET /manifests/errors", s.authenticated(s.manifestErrors))
	}
}

func (s *restServer) manifestErrors(w http.ResponseWriter, _ *http.Request, id tokens.Identity) {
	if !isPrimary(id) {
		writeError(w, http.StatusForbidden, codeForbidden, "the manifests' errors are the operator's; only the primary may read them")
		return
	}
	list := ManifestErrorList{APIVersion: v1alpha1.GroupVersion, Kind: "ManifestErrorList", Directory: s.opts.ManifestsDir, Items: []ManifestError{}}
	for _, e := range s.opts.ManifestErrors() {
		item := ManifestError{File: e.File, Line: e.Line, Field: e.Field, Message: e.Msg}
		if s.opts.ManifestsDir != "" && item.File != "" && !filepath.IsAbs(item.File) {
			if abs, err := filepath.Abs(item.File); err == nil {
				item.File = abs
			}
		}
		if e.Kind != "" || e.Name != "" {
			item.Object = &ObjectRef{Kind: e.Kind, Name: e.Name}
		}
		list.Items = append(list.Items, item)
	}
	writeJSON(w, http.StatusOK, list)
}
