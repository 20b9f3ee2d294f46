package etcdstore

import (
	"context"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Fleet is the store as the gateway and the console read and write it:
// Get and List show every Member of the fleet, whatever node it is bound
// to, where the Store's own (with Options.Node) show only this node's, for
// its controllers. A write through the REST API or `fleetd apply` must see
// a member another node runs as there — to answer configured or
// unchanged, not created, and to check a worktree branch against every
// member. Writes are the Store's.
type Fleet struct{ s *Store }

// Fleet returns the store's whole-fleet view.
func (s *Store) Fleet() Fleet { return Fleet{s} }

// Get returns one object by kind and name, from every node's members.
func (f Fleet) Get(kind, name string) (v1alpha1.Object, bool) {
	return f.s.fullSnapshot().Object(store.Key{Kind: kind, Name: name})
}

// List returns every object of one kind, sorted by name.
func (f Fleet) List(kind string) []v1alpha1.Object { return f.s.fullSnapshot().List(kind) }

// Apply is [Store.Apply].
func (f Fleet) Apply(ctx context.Context, obj v1alpha1.Object) error { return f.s.Apply(ctx, obj) }

// CheckApply is [Store.CheckApply].
func (f Fleet) CheckApply(ctx context.Context, obj v1alpha1.Object) error {
	return f.s.CheckApply(ctx, obj)
}

// Delete is [Store.Delete].
func (f Fleet) Delete(ctx context.Context, kind, name string) error {
	return f.s.Delete(ctx, kind, name)
}

// fullSnapshot is the snapshot of every object, before the node's filter.
func (s *Store) fullSnapshot() *store.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}
