package v1alpha1

import "time"

// KindNode is the kind of a Node. A Node is not a manifest object: each
// fleetd on the etcd store registers its own, and `fleetd get nodes` reads
// them; no file or write defines one.
const KindNode = "Node"

// MaxNodeLabels bounds the labels a node carries (--node-labels).
const MaxNodeLabels = 64

// Reasons of a Node's Ready condition.
const (
	// ReasonNodeReady: the node is registered (its lease is alive) and its
	// herdr answers.
	ReasonNodeReady = "NodeReady"
	// ReasonEtcdUnavailable: the node that answers cannot read etcd, so it
	// shows every node as last seen.
	ReasonEtcdUnavailable = "EtcdUnavailable"
	// ReasonNodeLost: the node's lease expired (killed, or cut off from
	// etcd) while members are still bound to it.
	ReasonNodeLost = "NodeLost"
)

// Node is one machine's fleetd in a fleet on etcd: its name and labels
// (metadata; creationTimestamp is when it registered), what it offers
// (spec) and how it is (status).
type Node struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       NodeSpec   `json:"spec"`
	Status     NodeStatus `json:"status"`
}

// NodeSpec is what a node offers.
type NodeSpec struct {
	// MaxMembers is how many members the node runs at most; 0 is no limit.
	MaxMembers int `json:"maxMembers,omitempty"`
	// GatewayURL is the node's MCP gateway.
	GatewayURL string `json:"gatewayURL,omitempty"`
}

// NodeStatus is what a node reports about itself, and its Ready condition.
type NodeStatus struct {
	// Conditions hold Ready: True while the node is registered and its
	// herdr answers; False (HerdrUnavailable) while herdr does not.
	Conditions []Condition `json:"conditions,omitempty"`
	// Members is how many members the node reconciles.
	Members int `json:"members"`
	// Herdr is the node's herdr as the node last saw it.
	Herdr NodeHerdr `json:"herdr"`
	// FleetdVersion is the version of the node's fleetd.
	FleetdVersion string `json:"fleetdVersion,omitempty"`
}

// NodeHerdr is a node's herdr: the version and socket protocol its last
// ping answered (empty before one did), and whether fleetd's view of it is
// current.
type NodeHerdr struct {
	Version   string `json:"version,omitempty"`
	Protocol  int    `json:"protocol,omitempty"`
	Reachable bool   `json:"reachable"`
	// Since is when Reachable last changed (or the node registered).
	Since *time.Time `json:"since,omitempty"`
}

// GetName returns metadata.name.
func (n *Node) GetName() string { return n.Name }

// GetMeta returns the node's metadata.
func (n *Node) GetMeta() *ObjectMeta { return &n.ObjectMeta }

// ReadyCondition returns the node's Ready condition; Unknown when it has
// none.
func (n *Node) ReadyCondition() Condition {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionReady {
			return c
		}
	}
	return Condition{Type: ConditionReady, Status: ConditionUnknown}
}

// ValidateNodeLabels checks a node's labels as a Member's are checked
// (metadata.labels), and bounds how many there are.
func ValidateNodeLabels(labels map[string]string) FieldErrors {
	var errs FieldErrors
	if len(labels) > MaxNodeLabels {
		errs.add("metadata.labels", "%d labels; a node carries at most %d", len(labels), MaxNodeLabels)
		return errs
	}
	validateLabelMap(&errs, "metadata.labels", labels)
	return errs
}
