package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Placement. A Member's assignment to a node is its binding,
// PREFIX/bindings/MEMBER = {node, memberUID}, written by the scheduler
// (package scheduler) and read by every store. A store with Options.Node
// shows in its snapshot only the members bound to that node, with the uid
// the binding names: the controllers of a node reconcile only what the
// fleet assigned to it, at a revision they have seen, and a binding that
// moves away (or a member deleted and made again under the same name, with
// a new uid) looks to them like a delete.

// bindingsDir is the bindings' directory under the prefix.
const bindingsDir = "bindings/"

// maxBindingBytes bounds a binding's value: a node name and a uid.
const maxBindingBytes = 4096

// Binding is the value at PREFIX/bindings/MEMBER.
type Binding struct {
	Node      string `json:"node"`
	MemberUID string `json:"memberUID"`
}

// BindingKey is the key of a member's binding in a fleet under prefix
// (Options.Prefix).
func BindingKey(prefix, member string) string { return prefix + "/" + bindingsDir + member }

// decodeBinding decodes a binding; ok is false for a key below one. A
// value that does not decode binds nothing (a nil Binding, logged).
func (s *Store) decodeBinding(kv *mvccpb.KeyValue, _ *Binding, _ bool) (*Binding, bool) {
	key := string(kv.Key)
	if name := strings.TrimPrefix(key, s.prefix+bindingsDir); name == "" || strings.Contains(name, "/") {
		return nil, false
	}
	var b Binding
	dec := json.NewDecoder(bytes.NewReader(kv.Value))
	dec.DisallowUnknownFields()
	if len(kv.Value) > maxBindingBytes || dec.Decode(&b) != nil || !v1alpha1.IsObjectName(b.Node) || b.MemberUID == "" {
		s.log.Error("etcd holds a binding that does not decode; it binds nothing", "key", key)
		return nil, true
	}
	return &b, true
}

// visible filters a full snapshot to the members bound to the node (with
// their uid), with s.buildMu held. Profiles, Tenants and errors stay;
// unresolved references of the members left out go with them. It reads
// the node's members from an index of the bindings that name it, kept
// from the keys that changed since the last call, so that its work is the
// node's members', not the fleet's.
func (s *Store) visible(full *store.Snapshot) *store.Snapshot {
	o := &s.objs
	items := o.bindings
	next := *full
	next.Members = make(map[string]*v1alpha1.Member, len(o.here))
	next.Sources = make(map[store.Key]string, len(o.here)+len(full.Profiles)+len(full.Tenants))
	for name := range full.Profiles {
		k := store.Key{Kind: v1alpha1.KindProfile, Name: name}
		next.Sources[k] = full.Sources[k]
	}
	for name := range full.Tenants {
		k := store.Key{Kind: v1alpha1.KindTenant, Name: name}
		next.Sources[k] = full.Sources[k]
	}
	for name := range o.here {
		m, ok := full.Members[name]
		if !ok || items[s.prefix+bindingsDir+name].Value.MemberUID != m.UID {
			continue
		}
		k := store.Key{Kind: v1alpha1.KindMember, Name: name}
		next.Members[name] = m
		next.Sources[k] = full.Sources[k]
	}
	next.Unresolved = nil
	for _, u := range full.Unresolved {
		name, isMember := strings.CutPrefix(u.File, s.prefix+kindDirs[v1alpha1.KindMember]+"/")
		if _, inFleet := full.Members[name]; isMember && inFleet && next.Members[name] == nil {
			continue // a member this node does not show
		}
		next.Unresolved = append(next.Unresolved, u)
	}
	return &next
}

// indexBindings brings the index of the bindings up to the bindings read,
// from the keys that changed since the last call, with s.buildMu held:
// the members bound to this node, and how many bindings name each node.
func (s *Store) indexBindings() {
	o := &s.objs
	items := s.bindings.Items()
	if o.here == nil {
		o.here, o.counts = map[string]bool{}, map[string]int{}
	}
	changed := changedKeys(o.bindings, items)
	for _, k := range changed {
		if it, ok := o.bindings[k]; ok && it.Value != nil {
			if o.counts[it.Value.Node]--; o.counts[it.Value.Node] == 0 {
				delete(o.counts, it.Value.Node)
			}
		}
		name := strings.TrimPrefix(k, s.prefix+bindingsDir)
		it, ok := items[k]
		if ok && it.Value != nil {
			o.counts[it.Value.Node]++
		}
		if ok && it.Value != nil && it.Value.Node == s.node {
			o.here[name] = true
		} else {
			delete(o.here, name)
		}
	}
	o.bindings = items
	if len(changed) > 0 {
		counts := maps.Clone(o.counts)
		s.mu.Lock()
		s.counts = counts
		s.mu.Unlock()
	}
}

// Assignments is every Member of the fleet and where it is bound, as this
// store last read them, whatever Options.Node says.
type Assignments struct {
	// Members are every Member, sorted by name.
	Members []*v1alpha1.Member
	// Bindings are the members' bindings by member name: only those whose
	// uid is the member's.
	Bindings map[string]Binding
	// Stored are every binding key by member name, whatever member it
	// names and whether or not its value decodes: what a write over a
	// binding is fenced on.
	Stored map[string]StoredBinding
}

// StoredBinding is a binding key as last read.
type StoredBinding struct {
	// Binding is its value; nil when it does not decode.
	Binding     *Binding
	ModRevision int64
}

// Assignments returns every member and its binding as last listed or
// watched. It never waits on etcd.
func (s *Store) Assignments() Assignments {
	s.mu.Lock()
	full := s.full
	s.mu.Unlock()
	items := s.bindings.Items()
	a := Assignments{Bindings: map[string]Binding{}, Stored: make(map[string]StoredBinding, len(items))}
	for k, it := range items {
		a.Stored[strings.TrimPrefix(k, s.prefix+bindingsDir)] = StoredBinding{Binding: it.Value, ModRevision: it.ModRevision}
	}
	for _, name := range slices.Sorted(maps.Keys(full.Members)) {
		m := full.Members[name]
		a.Members = append(a.Members, m)
		if b := items[s.prefix+bindingsDir+name].Value; b != nil && b.MemberUID == m.UID {
			a.Bindings[name] = *b
		}
	}
	return a
}

// Member returns one member of the fleet, whatever node it is bound to.
func (s *Store) Member(name string) (*v1alpha1.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.full.Members[name]
	return m, ok
}

// Bound returns the node a member is bound to, as Assignments' Bindings
// would (a binding whose uid is the member's), without copying the fleet:
// the relay asks it of every message and every status it routes.
func (s *Store) Bound(member string) (Binding, bool) {
	m, ok := s.Member(member)
	if !ok {
		return Binding{}, false
	}
	it, ok := s.bindings.Get(s.prefix + bindingsDir + member)
	if !ok || it.Value == nil || it.Value.MemberUID != m.UID {
		return Binding{}, false
	}
	return *it.Value, true
}

// BindingRevision returns the mod revision of a member's binding as last
// read; 0 when it has none that decodes.
func (s *Store) BindingRevision(member string) int64 {
	if it, ok := s.bindings.Get(s.prefix + bindingsDir + member); ok && it.Value != nil {
		return it.ModRevision
	}
	return 0
}

// BoundCounts returns how many bindings name each node (whatever uid they
// name), as the store last read them. The map is shared and must not be
// modified.
func (s *Store) BoundCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		return map[string]int{}
	}
	return s.counts
}

// WaitBindings returns once the store has read the bindings written at
// revision rev (a scheduler reading its own writes); it needs Run.
func (s *Store) WaitBindings(ctx context.Context, rev int64) error {
	return s.bindings.WaitRevision(ctx, rev)
}

// BindingsRevision returns the etcd revision up to which the store has
// read the bindings (a node's fence, a scheduler's fenced writes).
func (s *Store) BindingsRevision() int64 { return s.bindings.Revision() }

// BindingsChanged returns a channel closed at the next change of the
// bindings read, or of the revision they reflect.
func (s *Store) BindingsChanged() <-chan struct{} { return s.bindings.Changed() }
