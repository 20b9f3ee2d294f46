package mcp

import (
	"net/http"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// GET /prune lists the members whose prune the store holds — their
// definitions disappeared at once with most of the node's members, without
// a delete through fleetd (package store's Hold) — and POST /prune/confirm
// prunes them now (`fleetd prune --confirm`). Both are the primary's: only
// the operator decides that a mass removal was meant. In a fleet on etcd
// each node holds its own members, and is asked and confirmed on its own.

// PruneHolds is the store's prune hold as the REST API reads and confirms
// it.
type PruneHolds interface {
	// Held returns the held members, sorted by name.
	Held() []store.PruneHold
	// Confirm ends every hold, pruning the held members now, and returns
	// their names.
	Confirm() []string
}

// PruneHoldList is the body of GET /prune.
type PruneHoldList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []store.PruneHold `json:"items"`
}

// PruneConfirmed is the body of POST /prune/confirm: the members pruned.
type PruneConfirmed struct {
	Pruned []string `json:"pruned"`
}

const prunePrimaryOnly = "a held prune is the operator's to confirm; only the primary may read or confirm it"

func (s *restServer) pruneRoutes(mux *http.ServeMux) {
	if s.opts.Prune == nil {
		return
	}
	mux.Handle("GET /prune", s.authenticated(primaryRoute(prunePrimaryOnly, s.listPruneHold)))
	mux.Handle("POST /prune/confirm", s.authenticated(primaryRoute(prunePrimaryOnly, s.confirmPrune)))
}

func (s *restServer) listPruneHold(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, PruneHoldList{APIVersion: v1alpha1.GroupVersion, Kind: "PruneHoldList", Items: s.opts.Prune.Held()})
}

func (s *restServer) confirmPrune(w http.ResponseWriter, _ *http.Request) {
	pruned := s.opts.Prune.Confirm()
	if pruned == nil {
		pruned = []string{}
	}
	writeJSON(w, http.StatusOK, PruneConfirmed{Pruned: pruned})
}
