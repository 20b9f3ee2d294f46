package etcdstore

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// objects is the fleet's objects as the last build left them, so that the
// next redoes only the keys that changed: a write of one member costs a
// node that member's decode and checks, not the whole fleet's again.
// Guarded by Store.buildMu.
type objects struct {
	// items are each kind's informer items as last built.
	items map[string]map[string]informer.Item[*entry]
	// snap holds the objects and their sources; its maps are shared with
	// the snapshots built from them and never changed once built.
	snap *store.Snapshot
	// errs are each key's problems; refs each member key's references
	// that name nothing; claims the members that claim a worktree, by key.
	errs   map[string]decode.ErrorList
	refs   map[string]decode.ErrorList
	claims map[string]decode.FileResult
	// bindings are the bindings' items as indexBindings last read them;
	// here the members whose binding names this node (whatever uid it
	// names); counts the bindings that name each node.
	bindings map[string]informer.Item[*Binding]
	here     map[string]bool
	counts   map[string]int
}

// objectKinds are the kinds build reads, in a fixed order.
var objectKinds = []string{v1alpha1.KindMember, v1alpha1.KindProfile, v1alpha1.KindTenant}

// build assembles the full snapshot from the objects' informers, from the
// last build and the keys that changed since: each changed key's object is
// replaced, and the references and worktree claims of the changed members
// are checked again — of every member when a Profile or Tenant changed.
// The result is what checking every object again gives (the errors and
// unresolved references sorted alike).
func (s *Store) build() *store.Snapshot {
	o := &s.objs
	if o.snap == nil {
		o.items, o.snap = map[string]map[string]informer.Item[*entry]{}, store.NewSnapshot()
		o.errs, o.refs, o.claims = map[string]decode.ErrorList{}, map[string]decode.ErrorList{}, map[string]decode.FileResult{}
	}
	next := *o.snap
	cloned, everyMember := false, false
	var changedMembers []string
	for _, kind := range objectKinds {
		items := s.kinds[kind].Items()
		prev := o.items[kind]
		changed := changedKeys(prev, items)
		o.items[kind] = items
		if len(changed) == 0 {
			continue
		}
		if !cloned {
			next.Members, next.Profiles, next.Tenants, next.Sources = maps.Clone(next.Members), maps.Clone(next.Profiles), maps.Clone(next.Tenants), maps.Clone(next.Sources)
			cloned = true
		}
		for _, k := range changed {
			if old, ok := prev[k]; ok && len(old.Value.good.Objects) > 0 {
				remove(&next, old.Value.good.Objects[0])
			}
			delete(o.errs, k)
			if it, ok := items[k]; ok {
				if len(it.Value.errs) > 0 {
					o.errs[k] = it.Value.errs
				}
				if len(it.Value.good.Objects) > 0 {
					next.Put(it.Value.good.Objects[0], k)
				}
			}
		}
		if kind == v1alpha1.KindMember {
			changedMembers = changed
		} else {
			everyMember = true
		}
	}
	o.snap = &next
	if everyMember {
		changedMembers = slices.Collect(maps.Keys(o.items[v1alpha1.KindMember]))
	}
	s.checkMembers(&next, changedMembers)

	out := next
	for _, errs := range o.errs {
		out.Errors = append(out.Errors, errs...)
	}
	out.Errors.Sort()
	for _, k := range slices.Sorted(maps.Keys(o.refs)) {
		out.Unresolved = append(out.Unresolved, o.refs[k]...)
	}
	claims := slices.SortedFunc(maps.Values(o.claims), func(a, b decode.FileResult) int { return strings.Compare(a.Path, b.Path) })
	out.Unresolved = append(out.Unresolved, decode.CheckWorktrees(claims, func(name string) *v1alpha1.Profile { return next.Profiles[name] })...)
	out.Unresolved.Sort()
	return &out
}

// checkMembers checks the references and the worktree claim of each member
// key of keys against next.
func (s *Store) checkMembers(next *store.Snapshot, keys []string) {
	o := &s.objs
	in := "etcd under " + strings.TrimSuffix(s.prefix, "/")
	defined := func(kind, name string) bool {
		_, ok := next.Object(store.Key{Kind: kind, Name: name})
		return ok
	}
	items := o.items[v1alpha1.KindMember]
	for _, k := range keys {
		delete(o.refs, k)
		delete(o.claims, k)
		it, ok := items[k]
		if !ok || len(it.Value.good.Objects) == 0 {
			continue
		}
		good := it.Value.good
		if errs := decode.CheckReferences([]decode.FileResult{good}, defined, in); len(errs) > 0 {
			o.refs[k] = errs
		}
		if m, ok := good.Objects[0].(*v1alpha1.Member); ok && m.WorktreeOf(next.Profiles[m.Spec.Profile]) != nil {
			o.claims[k] = good
		}
	}
}

// changedKeys returns the keys whose item differs between prev and next:
// written, deleted, or decoded anew. The informer replaces its map at every
// change and keeps an unchanged key's item, so the same map has none.
func changedKeys[E comparable](prev, next map[string]informer.Item[E]) []string {
	if prev != nil && reflect.ValueOf(prev).UnsafePointer() == reflect.ValueOf(next).UnsafePointer() {
		return nil
	}
	var out []string
	for k, it := range next {
		if old, ok := prev[k]; !ok || old.ModRevision != it.ModRevision || old.Value != it.Value {
			out = append(out, k)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// remove takes obj out of snap's objects and sources.
func remove(snap *store.Snapshot, obj v1alpha1.Object) {
	name := obj.GetName()
	switch obj.(type) {
	case *v1alpha1.Member:
		delete(snap.Members, name)
	case *v1alpha1.Profile:
		delete(snap.Profiles, name)
	case *v1alpha1.Tenant:
		delete(snap.Tenants, name)
	default:
		return
	}
	delete(snap.Sources, store.Key{Kind: obj.GetObjectKind(), Name: name})
}
