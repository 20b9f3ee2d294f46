package fleet

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// State is the whole fleet as this node reads it from etcd — every member
// and binding (the store), the nodes and the lost ones, the statuses the
// nodes publish — from memory, never waiting on etcd. It is what the
// scheduler reads ([scheduler.Source]) and what the fleet view shows.
type State struct {
	store    *etcdstore.Store
	nodes    *Nodes
	statuses *Statuses
	prefix   string
	changed  notify.Signal // the store's members and bindings, the nodes
}

var _ scheduler.Source = (*State)(nil)

// NewState is the fleet of st, nodes and statuses (one prefix's).
func NewState(st *etcdstore.Store, nodes *Nodes, statuses *Statuses) *State {
	s := &State{store: st, nodes: nodes, statuses: statuses, prefix: statuses.prefix}
	s.changed.Follow(st.FleetSignal(), &nodes.changed)
	return s
}

// Fleet returns every member, binding and node, and the lost nodes.
func (s *State) Fleet() scheduler.Fleet {
	lost, grace := s.nodes.lostNodes()
	return scheduler.Fleet{Assignments: s.store.Assignments(), Nodes: s.nodes.placement(), Lost: lost, Grace: grace}
}

// Changed is closed at the next change of the members, the bindings or
// the nodes.
func (s *State) Changed() <-chan struct{} { return s.changed.Changed() }

// WaitBindings returns once the store has read the bindings written at
// revision rev.
func (s *State) WaitBindings(ctx context.Context, rev int64) error {
	return s.store.WaitBindings(ctx, rev)
}

// BindingsRevision returns the revision up to which the store has read
// the bindings.
func (s *State) BindingsRevision() int64 { return s.store.BindingsRevision() }

// Orphans returns the published statuses nobody else will delete: of a
// member that is gone, published by a node that is not registered (killed,
// and not back: a node deletes its own when it runs).
func (s *State) Orphans() []scheduler.Orphan {
	present := map[string]bool{}
	for _, m := range s.store.Assignments().Members {
		present[m.Name] = true
	}
	registered := map[string]bool{}
	for _, n := range s.nodes.Registered() {
		registered[n.Name] = true
	}
	var out []scheduler.Orphan
	pub := s.statuses.published()
	for _, name := range slices.Sorted(maps.Keys(pub)) {
		if it := pub[name]; !present[name] && !registered[it.Value.Node] {
			out = append(out, scheduler.Orphan{Member: name, Key: statusKey(s.prefix, name), ModRevision: it.ModRevision})
		}
	}
	return out
}

// Lost returns the lost nodes, each with when this node first saw it
// gone.
func (s *State) Lost() map[string]time.Time { return s.nodes.Lost() }

// BoundStatus returns the status published of m by the node f binds it
// to, when it is to be believed: the publisher is that node, under the
// binding revision and member uid this node sees, the node is registered
// and its herdr reachable, and this node can read etcd. Otherwise it
// returns why not, in words for a condition's message ("it has not
// published …"); "unbound" for a member f binds to no node.
func (s *State) BoundStatus(f *scheduler.Fleet, m *v1alpha1.Member) (PublishedStatus, string) {
	b, bound := f.Bindings[m.Name]
	if !bound {
		return PublishedStatus{}, "unbound"
	}
	if s.store.Snapshot().Unreadable != nil || s.statuses.inf.Unavailable() != nil {
		return PublishedStatus{}, "this node cannot read etcd, so its status is not known here"
	}
	ready := false
	for _, n := range f.Nodes {
		if n.Name == b.Node {
			ready = n.Ready
		}
	}
	if !ready {
		return PublishedStatus{}, "its herdr does not answer, so its status is not known here"
	}
	pub, ok := s.statuses.Status(m.Name)
	if !ok || pub.Node != b.Node || pub.MemberUID != m.UID || pub.BindingRevision != s.store.BindingRevision(m.Name) {
		return PublishedStatus{}, "it has not published its status of this member yet"
	}
	return pub, ""
}

// MemberStatus is [State.BoundStatus] of one member, without copying the
// members; found is false for a member the store does not hold.
func (s *State) MemberStatus(member string) (pub PublishedStatus, why string, found bool) {
	m, ok := s.store.Member(member)
	if !ok {
		return PublishedStatus{}, "", false
	}
	f := scheduler.Fleet{Assignments: etcdstore.Assignments{Bindings: map[string]etcdstore.Binding{}}, Nodes: s.nodes.placement()}
	if b, bound := s.store.Bound(member); bound {
		f.Bindings[member] = b
	}
	pub, why = s.BoundStatus(&f, m)
	return pub, why, true
}
