package mcp

import (
	"net/http"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// The fleet's machines over REST: GET /nodes and /nodes/{name} serve the
// nodes registered in etcd (`fleetd serve --store etcd`), for fleetd get
// and describe, from the store's watch of the registrations (no etcd
// request per call). They are the primary's. Without the etcd store there
// are no nodes: both answer 404 and say why.

// NodeSource is what GET /nodes reads: the registered nodes, sorted by
// name, each with its Ready condition.
type NodeSource interface {
	Nodes() []v1alpha1.Node
	Node(name string) (v1alpha1.Node, bool)
}

// NodeList is the body of GET /nodes.
type NodeList struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Items      []v1alpha1.Node `json:"items"`
}

// noNodes is the message of GET /nodes on a fleetd without nodes.
const noNodes = "nodes exist only with --store etcd: this fleetd keeps its desired state in a directory and runs every member on its own machine"

func (s *restServer) nodeRoutes(mux *http.ServeMux) {
	mux.Handle("GET /nodes", s.authenticated(s.listNodes))
	mux.Handle("GET /nodes/{name}", s.authenticated(s.getNode))
}

func (s *restServer) listNodes(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if !s.nodesReadable(w, id) {
		return
	}
	items := s.opts.Nodes.Nodes()
	if items == nil {
		items = []v1alpha1.Node{}
	}
	writeJSON(w, http.StatusOK, NodeList{APIVersion: v1alpha1.GroupVersion, Kind: "NodeList", Items: items})
}

func (s *restServer) getNode(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	if !s.nodesReadable(w, id) {
		return
	}
	name := r.PathValue("name")
	n, ok := s.opts.Nodes.Node(name)
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "node "+quote(name)+" is not registered (a node is listed while its fleetd runs and renews its lease)")
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// nodesReadable refuses a worker (403) and answers 404 without nodes.
func (s *restServer) nodesReadable(w http.ResponseWriter, id tokens.Identity) bool {
	if !isPrimary(id) {
		writeError(w, http.StatusForbidden, codeForbidden, "nodes are the operator's; only the primary may read them")
		return false
	}
	if s.opts.Nodes == nil {
		writeError(w, http.StatusNotFound, codeNotFound, noNodes)
		return false
	}
	return true
}
