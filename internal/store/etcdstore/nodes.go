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
)

// The store's view of the registered nodes: the keys PREFIX/nodes/NAME,
// read by the same list and watch as the objects (no request per read).

// nodeEntry is one registered node's key as last read.
type nodeEntry struct {
	modRev int64
	info   *NodeInfo // nil when the value does not decode
}

// nodeName returns the node a key registers, if it is PREFIX/nodes/NAME.
func (s *Store) nodeName(key string) (string, bool) {
	return s.child("nodes/", key)
}

// decodeNode decodes a node's registration; nil for a key that is not
// one. A value that does not decode, names another node or breaks the
// rules of a registration is logged and leaves the node out.
func (s *Store) decodeNode(key string, value []byte, modRev int64, prev *nodeEntry) *nodeEntry {
	name, ok := s.nodeName(key)
	if !ok {
		return nil
	}
	if prev != nil && prev.modRev == modRev {
		return prev
	}
	e := &nodeEntry{modRev: modRev}
	if len(value) > s.maxBytes {
		s.log.Error("etcd holds a node registration over the size limit; the node is not shown", "key", key, "bytes", len(value), "limit", s.maxBytes)
		return e
	}
	var info NodeInfo
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		s.log.Error("etcd holds a node registration that does not decode; the node is not shown", "key", key, "err", err)
		return e
	}
	if info.Name != name {
		s.log.Error("etcd holds a node registration for another name than its key's; the node is not shown", "key", key, "name", info.Name)
		return e
	}
	if err := info.check(); err != nil {
		s.log.Error("etcd holds a node registration that is not valid; the node is not shown", "key", key, "err", err)
		return e
	}
	e.info = &info
	return e
}

// publishNodes installs the registered nodes from nodeKVs.
func (s *Store) publishNodes() {
	var nodes []NodeInfo
	for _, k := range slices.Sorted(maps.Keys(s.nodeKVs)) {
		if info := s.nodeKVs[k].info; info != nil {
			nodes = append(nodes, *info)
		}
	}
	s.mu.Lock()
	prev := s.nodes
	s.nodes = nodes
	s.markLostLocked(prev)
	s.fleetChangedLocked()
	s.mu.Unlock()
}

// lostNode is a node with bindings but no registration: a tombstone.
type lostNode struct {
	since time.Time // when this store first saw it gone
	last  NodeInfo  // its last registration this store read; only Name if none
}

// markLostLocked brings s.lost up to date with s.nodes and s.binds: a
// bound node that is not registered is lost since the moment this store
// first saw it so (prev: the registrations before this change, whose
// last info the tombstone keeps); a node registered again, or with no
// bindings left, is no longer lost.
func (s *Store) markLostLocked(prev []NodeInfo) {
	registered := map[string]bool{}
	for _, n := range s.nodes {
		registered[n.Name] = true
	}
	bound := map[string]bool{}
	for _, b := range s.binds {
		bound[b.Node] = true
	}
	for name := range s.lost {
		if registered[name] || !bound[name] {
			delete(s.lost, name)
		}
	}
	now := s.clock.Now()
	for _, n := range prev {
		if !registered[n.Name] && bound[n.Name] {
			if _, ok := s.lost[n.Name]; !ok {
				s.lost[n.Name] = lostNode{since: now, last: n}
			}
		}
	}
	for name := range bound {
		if _, ok := s.lost[name]; !ok && !registered[name] {
			s.lost[name] = lostNode{since: now, last: NodeInfo{Name: name}}
		}
	}
}

// Nodes returns the registered nodes and the lost ones, sorted by name, as
// last listed or watched. It never waits on etcd. Each has a Ready
// condition: True while its herdr answers, False (HerdrUnavailable) while
// it does not, False (NodeLost) for a node whose lease expired while
// members are still bound to it (shown as last registered), Unknown
// (EtcdUnavailable) while this store cannot read etcd and shows the nodes
// as last seen.
func (s *Store) Nodes() []v1alpha1.Node {
	s.mu.Lock()
	infos, etcdErr := s.nodes, s.snap.Unreadable
	lost := maps.Clone(s.lost)
	counts := map[string]int{}
	for _, b := range s.binds {
		counts[b.Node]++
	}
	s.mu.Unlock()
	out := make([]v1alpha1.Node, 0, len(infos)+len(lost))
	for i := range infos {
		out = append(out, nodeOf(&infos[i], etcdErr))
	}
	for name, l := range lost {
		n := nodeOf(&l.last, etcdErr)
		n.Status.Members = counts[name]
		if etcdErr == nil {
			n.Status.Conditions[0] = v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse,
				Reason: v1alpha1.ReasonNodeLost, LastTransitionTime: l.since.UTC().Truncate(time.Second),
				Message: fmt.Sprintf("not registered since %s (its lease expired); %d members still bound to it", l.since.UTC().Format(time.RFC3339), counts[name])}
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Node returns one registered node by name.
func (s *Store) Node(name string) (v1alpha1.Node, bool) {
	for _, n := range s.Nodes() {
		if n.Name == name {
			return n, true
		}
	}
	return v1alpha1.Node{}, false
}

// nodeOf is the API's Node for a registration.
func nodeOf(info *NodeInfo, etcdErr error) v1alpha1.Node {
	started := info.StartedAt
	n := v1alpha1.Node{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNode},
		ObjectMeta: v1alpha1.ObjectMeta{Name: info.Name, Labels: maps.Clone(info.Labels), CreationTimestamp: &started},
		Spec:       v1alpha1.NodeSpec{MaxMembers: info.MaxMembers, GatewayURL: info.GatewayURL},
		Status:     v1alpha1.NodeStatus{Members: info.Members, Herdr: info.Herdr, FleetdVersion: info.Version},
	}
	since := started
	if info.Herdr.Since != nil {
		since = *info.Herdr.Since
	}
	ready := v1alpha1.Condition{Type: v1alpha1.ConditionReady, LastTransitionTime: since.UTC().Truncate(time.Second)}
	switch {
	case etcdErr != nil:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionUnknown, v1alpha1.ReasonEtcdUnavailable, "as last seen: "+etcdErr.Error()
	case info.Herdr.Reachable:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionTrue, v1alpha1.ReasonNodeReady, "registered; herdr answers"
	default:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionFalse, v1alpha1.ReasonHerdrUnavailable, "registered, but its herdr does not answer: the node creates and recreates nothing"
	}
	n.Status.Conditions = []v1alpha1.Condition{ready}
	return n
}
