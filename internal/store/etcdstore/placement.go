package etcdstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Placement. A Member's assignment to a node is its binding,
// PREFIX/bindings/MEMBER = {node, memberUID}, written by the scheduler
// (RunScheduler) and read by every store in its list and watch of the
// prefix. A store with Options.Node shows in its snapshot only the members
// bound to that node, with the uid the binding names: the controllers of a
// node reconcile only what the fleet assigned to it, at a revision they
// have seen, and a binding that moves away (or a member deleted and made
// again under the same name, with a new uid) looks to them like a delete.

// Binding is the value at PREFIX/bindings/MEMBER.
type Binding struct {
	Node      string `json:"node"`
	MemberUID string `json:"memberUID"`
}

// bindingEntry is one binding key as last read.
type bindingEntry struct {
	modRev  int64
	binding *Binding // nil when the value does not decode
}

// bindingMember returns the member a key binds, if it is
// PREFIX/bindings/MEMBER.
func (s *Store) bindingMember(key string) (string, bool) {
	return s.child("bindings/", key)
}

// bindingKey is the key of a member's binding.
func (s *Store) bindingKey(member string) string { return s.prefix + "bindings/" + member }

// decodeBinding decodes a binding; nil for a key that is not one. A value
// that does not decode binds nothing (and is logged).
func (s *Store) decodeBinding(key string, value []byte, modRev int64, prev *bindingEntry) *bindingEntry {
	if _, ok := s.bindingMember(key); !ok {
		return nil
	}
	if prev != nil && prev.modRev == modRev {
		return prev
	}
	e := &bindingEntry{modRev: modRev}
	var b Binding
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if len(value) > 4096 || dec.Decode(&b) != nil || CheckNodeName(b.Node) != nil || b.MemberUID == "" {
		s.log.Error("etcd holds a binding that does not decode; it binds nothing", "key", key)
		return e
	}
	e.binding = &b
	return e
}

// visible filters a full snapshot to the members bound to node (with their
// uid). Profiles, Tenants and errors stay; unresolved references of the
// members left out go with them.
func visible(full *store.Snapshot, binds map[string]*bindingEntry, prefix, node string) *store.Snapshot {
	next := *full
	next.Members = map[string]*v1alpha1.Member{}
	next.Sources = map[store.Key]string{}
	for k, v := range full.Sources {
		if k.Kind != v1alpha1.KindMember {
			next.Sources[k] = v
		}
	}
	for name, m := range full.Members {
		e := binds[prefix+"bindings/"+name]
		if e == nil || e.binding == nil || e.binding.Node != node || e.binding.MemberUID != m.UID {
			continue
		}
		next.Members[name] = m
		k := store.Key{Kind: v1alpha1.KindMember, Name: name}
		next.Sources[k] = full.Sources[k]
	}
	hidden := map[string]bool{}
	for name := range full.Members {
		if _, shown := next.Members[name]; !shown {
			hidden[full.Sources[store.Key{Kind: v1alpha1.KindMember, Name: name}]] = true
		}
	}
	next.Unresolved = nil
	for _, u := range full.Unresolved {
		if !hidden[u.File] {
			next.Unresolved = append(next.Unresolved, u)
		}
	}
	return &next
}

// Fleet is the whole fleet as this store last read it, whatever
// Options.Node says: every Member, the bindings by member name (only those
// whose uid is the member's) and the registered nodes.
type Fleet struct {
	Members  []*v1alpha1.Member // sorted by name
	Bindings map[string]Binding
	Nodes    []NodeInfo // sorted by name
	// Lost are the nodes members are bound to that are not registered
	// (their lease expired), each with when this store first saw it gone.
	Lost map[string]time.Time
	// Revision is the etcd revision the fleet reflects.
	Revision int64
}

// Fleet returns the fleet as last listed or watched. It never waits on
// etcd.
func (s *Store) Fleet() Fleet {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := Fleet{Bindings: map[string]Binding{}, Nodes: s.nodes, Lost: map[string]time.Time{}, Revision: s.rev}
	for name, l := range s.lost {
		f.Lost[name] = l.since
	}
	for _, name := range slices.Sorted(maps.Keys(s.full.Members)) {
		m := s.full.Members[name]
		f.Members = append(f.Members, m)
		if b, ok := s.binds[name]; ok && b.MemberUID == m.UID {
			f.Bindings[name] = b
		}
	}
	return f
}

// Placement says where a member is: bound to a node, or unschedulable
// (why says what no node offers), or unknown to the store.
func (f *Fleet) Placement(name string) (node, why string, ok bool) {
	i, found := slices.BinarySearchFunc(f.Members, name, func(m *v1alpha1.Member, n string) int { return strings.Compare(m.Name, n) })
	if !found {
		return "", "", false
	}
	if b, bound := f.Bindings[name]; bound {
		return b.Node, "", true
	}
	node, why = Place(f.Members[i], f.Nodes, f.Counts())
	if node != "" {
		return "", "waiting for the scheduler to bind it to node " + node, true
	}
	return "", why, true
}

// Counts returns how many members are bound to each node.
func (f *Fleet) Counts() map[string]int {
	counts := map[string]int{}
	for _, b := range f.Bindings {
		counts[b.Node]++
	}
	return counts
}

// Place picks the node for a member: among the Ready nodes (registered,
// herdr reachable) that match its spec.nodeName and every pair of its
// spec.nodeSelector and have room (maxMembers, 0 = no limit, against
// counts), the one running the fewest members, by name on a tie. With no
// such node it returns "" and why, as Kubernetes' scheduler says it:
// "0/3 nodes are available: 1 not Ready, 2 do not match nodeSelector
// gpu=a100."
func Place(m *v1alpha1.Member, nodes []NodeInfo, counts map[string]int) (node, why string) {
	var notReady, other, mismatch, full int
	best := -1
	for i := range nodes {
		n := &nodes[i]
		switch {
		case m.Spec.NodeName != "" && n.Name != m.Spec.NodeName:
			other++
		case !matches(n.Labels, m.Spec.NodeSelector):
			mismatch++
		case !n.Herdr.Reachable:
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
