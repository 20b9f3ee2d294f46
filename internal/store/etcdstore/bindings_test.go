package etcdstore

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

func memberNamesOf(s *store.Snapshot) []string { return slices.Sorted(maps.Keys(s.Members)) }

// bind writes member's binding to node (for uid; "" for the member's own)
// by hand, as the scheduler would.
func (n *node) bind(member, node, uid string) {
	n.t.Helper()
	if uid == "" {
		uid = n.st.Assignments().uid(member)
	}
	if _, err := n.cli.Put(context.Background(), BindingKey(prefix(n.t), member), `{"node":"`+node+`","memberUID":"`+uid+`"}`); err != nil {
		n.t.Fatal(err)
	}
}

func (a Assignments) uid(member string) string {
	for _, m := range a.Members {
		if m.Name == member {
			return m.UID
		}
	}
	return ""
}

// Two nodes' stores on one prefix: each snapshot shows only the members
// bound to its node with the bound uid — an unbound member, one bound under
// an older uid or by a binding that does not decode shows nowhere — while
// Assignments shows every member and the bindings that hold; a binding
// that moves takes the member from one snapshot to the other.
func TestStore_ShowsOnlyTheMembersBoundToItsNode(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	b := startNode(t, &Options{Node: "b"})
	a.apply(profile("claude"))
	for _, name := range []string{"one", "two", "stale", "garbled", "free"} {
		a.apply(member(name, "claude"))
	}
	a.caughtUp()
	a.bind("one", "a", "")
	a.bind("two", "b", "")
	a.bind("stale", "a", "an-older-uid")
	if _, err := a.cli.Put(context.Background(), BindingKey(prefix(t), "garbled"), `{"node":`); err != nil {
		t.Fatal(err)
	}
	a.caughtUp()
	b.caughtUp()
	if got := memberNamesOf(a.st.Snapshot()); !cmp.Equal(got, []string{"one"}) {
		t.Errorf("a's snapshot shows %v, want [one]", got)
	}
	if got := memberNamesOf(b.st.Snapshot()); !cmp.Equal(got, []string{"two"}) {
		t.Errorf("b's snapshot shows %v, want [two]", got)
	}
	if len(a.st.Snapshot().Profiles) != 1 || len(b.st.Snapshot().Profiles) != 1 {
		t.Error("profiles are not in every node's snapshot")
	}
	as := a.st.Assignments()
	var all []string
	for _, m := range as.Members {
		all = append(all, m.Name)
	}
	if !cmp.Equal(all, []string{"free", "garbled", "one", "stale", "two"}) || len(as.Bindings) != 2 ||
		as.Bindings["one"].Node != "a" || as.Bindings["two"].Node != "b" {
		t.Errorf("Assignments: members %v, bindings %v; want all five, one on a and two on b", all, as.Bindings)
	}
	for _, name := range []string{"one", "two", "stale", "garbled"} {
		if st := as.Stored[name]; st.ModRevision == 0 || (st.Binding == nil) != (name == "garbled") {
			t.Errorf("stored binding of %s: %+v", name, st)
		}
	}
	if bnd, ok := a.st.Bound("two"); !ok || bnd.Node != "b" {
		t.Errorf("Bound(two) = %+v, %v", bnd, ok)
	}
	for _, name := range []string{"stale", "garbled", "free", "nobody"} {
		if _, ok := a.st.Bound(name); ok {
			t.Errorf("Bound(%s) found a binding", name)
		}
	}
	if a.st.BindingRevision("garbled") != 0 || a.st.BindingRevision("one") != as.Stored["one"].ModRevision {
		t.Errorf("BindingRevision: garbled %d, one %d (want 0 and %d)", a.st.BindingRevision("garbled"), a.st.BindingRevision("one"), as.Stored["one"].ModRevision)
	}
	if got := a.st.BoundCounts(); got["a"] != 2 || got["b"] != 1 {
		t.Errorf("BoundCounts = %v; want a 2 (one and stale), b 1", got)
	}

	// The binding moves: the member leaves a for b.
	a.bind("one", "b", "")
	a.until("one gone from a", func(s *store.Snapshot) bool { return s.Members["one"] == nil })
	b.until("one on b", func(s *store.Snapshot) bool { return s.Members["one"] != nil })
	a.caughtUp()
	if got := a.st.BoundCounts(); got["a"] != 1 || got["b"] != 2 {
		t.Errorf("BoundCounts after one moved = %v; want a 1 (stale), b 2 (one and two)", got)
	}

	// A member deleted and made again has a new uid: its old binding no
	// longer holds.
	if err := a.st.Delete(context.Background(), v1alpha1.KindMember, "two"); err != nil {
		t.Fatal(err)
	}
	a.apply(member("two", "claude"))
	b.until("two gone from b", func(s *store.Snapshot) bool { return s.Members["two"] == nil })
}

// A node's snapshot is published again only when what it shows changed:
// another node's member written, bound and changed leaves its readers (the
// controllers, the status publisher) asleep — the work of a write is the
// node's that runs it, not every node's — while FleetChanged wakes the
// fleet's readers at every change.
func TestStore_AnotherNodesMemberDoesNotWakeTheNodesReaders(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	a.apply(profile("claude"))
	a.apply(member("mine", "claude"))
	a.caughtUp()
	a.bind("mine", "a", "")
	a.until("mine on a", func(s *store.Snapshot) bool { return s.Members["mine"] != nil })
	a.caughtUp()
	before := a.st.Snapshot()
	nodeCh, fleetCh := a.st.Changed(), a.st.FleetChanged()

	a.apply(member("theirs", "claude"))
	a.caughtUp()
	a.bind("theirs", "b", "")
	a.caughtUp()
	m := member("theirs", "claude")
	m.Spec.Prompt = "changed"
	a.apply(m)
	a.caughtUp()
	select {
	case <-fleetCh:
	default:
		t.Error("FleetChanged not closed by another node's member")
	}
	select {
	case <-nodeCh:
		t.Error("Changed closed by another node's member: the node's readers woke for nothing")
	default:
	}
	if a.st.Snapshot() != before {
		t.Error("the node's snapshot was published again for another node's member")
	}

	// Its own member's change is published.
	mine := member("mine", "claude")
	mine.Spec.Prompt = "changed"
	a.apply(mine)
	select {
	case <-nodeCh:
	default:
		t.Error("Changed not closed by the node's own member's change")
	}
}
