package etcdstore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Member status across nodes. Each node publishes the live status of the
// members it runs at PREFIX/status/MEMBER (a [PublishedStatus], written by
// a [StatusPublisher] only when it changes); every Store reads those keys in
// its one list and watch of the prefix and serves them from memory
// ([Store.Status]). Whether a reader believes a record is its business:
// the record names its publisher and the binding revision it was
// published under, so that a stale one (from a node that no longer runs
// the member, or ran it under an older binding) is recognisable.

// DefaultMaxStatusBytes bounds one published status, written or read.
const DefaultMaxStatusBytes = 16 << 10

// PublishedStatus is the value at PREFIX/status/MEMBER: what the node that
// runs a member knows of it. It holds no token or credential: a member's
// status and its messaging state (delivery and turn bookkeeping, which
// names messages by id; a turn's pending question is its only text).
type PublishedStatus struct {
	// Node is the publisher: the node that runs the member.
	Node string `json:"node"`
	// MemberUID is the uid of the member the status is of.
	MemberUID string `json:"memberUID"`
	// BindingRevision is the mod revision of the member's binding the
	// publisher saw when it published.
	BindingRevision int64 `json:"bindingRevision"`
	// Status is the member's status on its node.
	Status v1alpha1.MemberStatus `json:"status"`
	// Worker is the member's messaging state on its node (the messaging
	// core's status of it, as JSON; this package does not read it).
	Worker json.RawMessage `json:"worker,omitempty"`
}

// statusEntry is one status key as last read.
type statusEntry struct {
	modRev int64
	status *PublishedStatus // nil when the value does not decode
}

// statusMember returns the member a key publishes the status of, if it is
// PREFIX/status/MEMBER.
func (s *Store) statusMember(key string) (string, bool) {
	return s.child("status/", key)
}

// decodeStatus decodes a published status; nil for a key that is not one.
// A value over the size limit, that does not decode or names no node is
// logged and shows nothing.
func (s *Store) decodeStatus(key string, value []byte, modRev int64, prev *statusEntry) *statusEntry {
	if _, ok := s.statusMember(key); !ok {
		return nil
	}
	if prev != nil && prev.modRev == modRev {
		return prev
	}
	e := &statusEntry{modRev: modRev}
	st, err := decodePublished(value)
	if err != nil {
		s.log.Error("etcd holds a member status that does not decode; it is not shown", "key", key, "err", err)
		return e
	}
	e.status = st
	return e
}

func decodePublished(value []byte) (*PublishedStatus, error) {
	if len(value) > DefaultMaxStatusBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", len(value), DefaultMaxStatusBytes)
	}
	var st PublishedStatus
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if err := CheckNodeName(st.Node); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if st.MemberUID == "" {
		return nil, fmt.Errorf("no memberUID")
	}
	return &st, nil
}

// publishStatuses installs the published statuses from statusKVs.
func (s *Store) publishStatuses() {
	next := make(map[string]statusRecord, len(s.statusKVs))
	for k, e := range s.statusKVs {
		if name, _ := s.statusMember(k); e.status != nil {
			next[name] = statusRecord{PublishedStatus: *e.status, modRev: e.modRev}
		}
	}
	s.mu.Lock()
	s.statuses = next
	close(s.statusCh)
	s.statusCh = make(chan struct{})
	s.mu.Unlock()
}

// statusRecord is a published status with its key's mod revision.
type statusRecord struct {
	PublishedStatus
	modRev int64
}

// Status returns the status published for a member, as last listed or
// watched. It never waits on etcd. The caller decides whether to believe
// it (its Node, MemberUID and BindingRevision against the fleet's).
func (s *Store) Status(member string) (PublishedStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.statuses[member]
	return r.PublishedStatus, ok
}

// publishedBy returns the members whose published status names node, with
// their keys' mod revisions.
func (s *Store) publishedBy(node string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for name, r := range s.statuses {
		if r.Node == node {
			out[name] = r.modRev
		}
	}
	return out
}

// StatusChanged returns a channel closed at the next change of the
// published statuses.
func (s *Store) StatusChanged() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusCh
}

// BindingRevision returns the mod revision of a member's binding as last
// read; 0 when it is not bound.
func (s *Store) BindingRevision(member string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.bindSeen[s.bindingKey(member)]; e != nil && e.binding != nil {
		return e.modRev
	}
	return 0
}

// statusKey is the key of a member's published status.
func (s *Store) statusKey(member string) string { return s.prefix + "status/" + member }

// BoundStatus returns the status published of m by the node f binds it
// to, when it is to be believed: the publisher is that node, under the
// binding revision and member uid this store sees, the node is registered
// and its herdr reachable, and this store can read etcd. Otherwise it
// returns why not, in words for a condition's message ("it has not
// published …"); "unbound" for a member f binds to no node.
func (s *Store) BoundStatus(f *Fleet, m *v1alpha1.Member) (PublishedStatus, string) {
	b, bound := f.Bindings[m.Name]
	if !bound {
		return PublishedStatus{}, "unbound"
	}
	if err := s.Snapshot().Unreadable; err != nil {
		return PublishedStatus{}, "this node cannot read etcd, so its status is not known here"
	}
	ready := false
	for _, n := range f.Nodes {
		if n.Name == b.Node {
			ready = n.Herdr.Reachable
		}
	}
	if !ready {
		return PublishedStatus{}, "its herdr does not answer, so its status is not known here"
	}
	pub, ok := s.Status(m.Name)
	if !ok || pub.Node != b.Node || pub.MemberUID != m.UID || pub.BindingRevision != s.BindingRevision(m.Name) {
		return PublishedStatus{}, "it has not published its status of this member yet"
	}
	return pub, ""
}

// Bound returns the node a member is bound to, as [Store.Fleet]'s
// Bindings would (a binding whose uid is the member's), without copying
// the fleet: the relay asks it of every message and every status it
// routes.
func (s *Store) Bound(member string) (Binding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, b, ok := s.boundLocked(member)
	if m == nil || !ok {
		return Binding{}, false
	}
	return b, true
}

func (s *Store) boundLocked(member string) (*v1alpha1.Member, Binding, bool) {
	m := s.full.Members[member]
	if m == nil {
		return nil, Binding{}, false
	}
	b, ok := s.binds[member]
	return m, b, ok && b.MemberUID == m.UID
}

// MemberStatus is [Store.BoundStatus] of one member, without copying the
// fleet; found is false for a member the store does not hold.
func (s *Store) MemberStatus(member string) (pub PublishedStatus, why string, found bool) {
	s.mu.Lock()
	m, b, bound := s.boundLocked(member)
	f := Fleet{Nodes: s.nodes, Bindings: map[string]Binding{}}
	s.mu.Unlock()
	if m == nil {
		return PublishedStatus{}, "", false
	}
	if bound {
		f.Bindings[member] = b
	}
	pub, why = s.BoundStatus(&f, m)
	return pub, why, true
}
