package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// Node is what placement reads of a registered node.
type Node struct {
	Name   string
	Labels map[string]string
	// MaxMembers is the node's capacity; 0 is no limit.
	MaxMembers int
	// Ready: the node's herdr answers.
	Ready bool
}

// Fleet is the whole fleet as one node's watches last read it: every
// Member, the bindings, the registered nodes and the lost ones.
type Fleet struct {
	etcdstore.Assignments
	// Nodes are the registered nodes, sorted by name.
	Nodes []Node
	// Lost are the nodes members are bound to that are not registered
	// (their lease expired), each with when the reader first saw it gone.
	Lost map[string]time.Time
	// Grace is how long each lost node's members stay bound to it, as
	// the node registered it (its --reschedule-after, which its fence
	// counts on); a node not in it has the scheduler's.
	Grace map[string]time.Duration
}

// Placement says where a member is: bound to a node; not bound yet, next
// to go to the node Place picks now (next); or unschedulable (why says
// what no node offers). ok is false for a member unknown to the fleet.
func (f *Fleet) Placement(name string) (p Placement, ok bool) {
	i, found := slices.BinarySearchFunc(f.Members, name, func(m *v1alpha1.Member, n string) int { return strings.Compare(m.Name, n) })
	if !found {
		return Placement{}, false
	}
	if b, bound := f.Bindings[name]; bound {
		return Placement{Node: b.Node}, true
	}
	p.Next, p.Why = Place(f.Members[i], f.Nodes, f.Counts())
	return p, true
}

// Placement is where [Fleet.Placement] finds a member: Node if bound;
// else Next, the node it would be bound to now, or, when none can take
// it, Why.
type Placement struct {
	Node, Next, Why string
}

// Counts returns how many members are bound to each node.
func (f *Fleet) Counts() map[string]int {
	counts := map[string]int{}
	for _, b := range f.Bindings {
		counts[b.Node]++
	}
	return counts
}

// Place picks the node for a member: among the Ready nodes that match its
// spec.nodeName and every pair of its spec.nodeSelector and have room
// (MaxMembers, 0 = no limit, against counts), the one running the fewest
// members, by name on a tie. With no such node it returns "" and why, as
// Kubernetes' scheduler says it: "0/3 nodes are available: 1 not Ready, 2
// do not match nodeSelector gpu=a100."
func Place(m *v1alpha1.Member, nodes []Node, counts map[string]int) (node, why string) {
	var notReady, other, mismatch, full int
	best := -1
	for i := range nodes {
		n := &nodes[i]
		switch {
		case m.Spec.NodeName != "" && n.Name != m.Spec.NodeName:
			other++
		case !matches(n.Labels, m.Spec.NodeSelector):
			mismatch++
		case !n.Ready:
			notReady++
		case n.MaxMembers > 0 && counts[n.Name] >= n.MaxMembers:
			full++
		case best < 0 || counts[n.Name] < counts[nodes[best].Name]:
			best = i
		}
	}
	if best >= 0 {
		return nodes[best].Name, ""
	}
	var parts []string
	if m.Spec.NodeName != "" && other == len(nodes) {
		parts = append(parts, fmt.Sprintf("node %s is not registered", m.Spec.NodeName))
	} else if other > 0 {
		parts = append(parts, fmt.Sprintf("%d not node %s (spec.nodeName)", other, m.Spec.NodeName))
	}
	if mismatch > 0 {
		parts = append(parts, fmt.Sprintf("%d do not match nodeSelector %s", mismatch, selectorText(m.Spec.NodeSelector)))
	}
	if notReady > 0 {
		parts = append(parts, fmt.Sprintf("%d not Ready (herdr unreachable)", notReady))
	}
	if full > 0 {
		parts = append(parts, fmt.Sprintf("%d full (maxMembers)", full))
	}
	why = fmt.Sprintf("0/%d nodes are available", len(nodes))
	if len(parts) > 0 {
		why += ": " + strings.Join(parts, ", ")
	}
	return "", why + "."
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func selectorText(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}
