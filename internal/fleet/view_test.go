package fleet

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// fakeControllers is this node's controllers: the members they run, with status.
type fakeControllers struct {
	mu      sync.Mutex
	members map[string]v1alpha1.Member
	changed notify.Signal
}

func (c *fakeControllers) Changed() <-chan struct{} { return c.changed.Changed() }
func (c *fakeControllers) Members() []v1alpha1.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []v1alpha1.Member
	for _, m := range c.members {
		out = append(out, m)
	}
	return out
}
func (c *fakeControllers) Member(name string) (v1alpha1.Member, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[name]
	return m, ok
}
func (c *fakeControllers) MemberEvents(string) []v1alpha1.Event { return nil }

func readyCondition(m v1alpha1.Member) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return v1alpha1.Condition{}
}

// viewFixture is node a's view of a fleet with nodes a and b registered:
// member mine runs on a; far on b, which publishes its status; quiet on b,
// whose status b has not published; nowhere pinned to a node that is not
// registered; waiting not bound yet (no scheduler runs here), although a
// and b can take it.
func viewFixture(t *testing.T) (f *fixture, v *View, stopB func() error) {
	t.Helper()
	f = newFixture(t)
	st := f.store("a")
	statuses := f.statuses()
	state := NewState(st, f.nodes(st), statuses)
	f.register(NodeInfo{Name: "a", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	_, _, stopB = f.register(NodeInfo{Name: "b", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	apply(t, st, "mine", "far", "quiet", "waiting")
	nowhere := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "nowhere"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeName: "gone"}}
	nowhere.SetDefaults()
	if err := st.Apply(context.Background(), nowhere); err != nil {
		t.Fatal(err)
	}
	mine, _ := st.Member("mine")
	local := &fakeControllers{members: map[string]v1alpha1.Member{"mine": {ObjectMeta: mine.ObjectMeta, Spec: mine.Spec,
		Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, PaneID: "w1:p2"}}}}
	v = NewView(local, state, "a")
	f.run(func(ctx context.Context) error { v.Run(ctx); return nil })
	bind := func(name, node string) int64 {
		m, _ := st.Member(name)
		return f.put("/bindings/"+name, `{"node":"`+node+`","memberUID":"`+m.UID+`"}`)
	}
	bind("mine", "a")
	bind("quiet", "b")
	far, _ := st.Member("far")
	rev := bind("far", "b")
	f.put("/status/far", `{"node":"b","memberUID":"`+far.UID+`","bindingRevision":`+strconv.FormatInt(rev, 10)+`,"status":{"phase":"Ready","paneId":"w1:p2"}}`)
	until(t, "far's status shown", v.Changed, func() bool { m, _ := v.Member("far"); return m.Status.Phase == v1alpha1.PhaseReady })
	return f, v, stopB
}

// The view shows every member of the fleet: this node's from its
// controllers, another node's with the status that node published, one
// whose node has not published as OnAnotherNode, an unschedulable one with
// why, one not bound yet as Scheduling (not Unschedulable: a node can take
// it), each with its node; a node lost turns its members NodeLost.
func TestView_ShowsEveryMemberOfTheFleet(t *testing.T) {
	_, v, stopB := viewFixture(t)
	want := map[string]struct{ node, phase, reason string }{
		"mine":    {"a", v1alpha1.PhaseReady, ""},
		"far":     {"b", v1alpha1.PhaseReady, ""},
		"quiet":   {"b", "", v1alpha1.ReasonOnAnotherNode},
		"nowhere": {"", v1alpha1.PhasePending, v1alpha1.ReasonUnschedulable},
		"waiting": {"", v1alpha1.PhasePending, v1alpha1.ReasonScheduling},
	}
	all := v.Members()
	if len(all) != len(want) {
		t.Fatalf("%d members, want %d: %+v", len(all), len(want), all)
	}
	for _, m := range all {
		w := want[m.Name]
		if m.Status.NodeName != w.node || m.Status.Phase != w.phase || (w.reason != "" && readyCondition(m).Reason != w.reason) {
			t.Errorf("%s: node %q phase %q Ready %+v; want node %q phase %q reason %q", m.Name, m.Status.NodeName, m.Status.Phase, readyCondition(m), w.node, w.phase, w.reason)
		}
	}
	if err := stopB(); err != nil { // b's lease revoked: lost, members bound to it
		t.Fatal(err)
	}
	until(t, "far on a lost node", v.Changed, func() bool { m, _ := v.Member("far"); return readyCondition(m).Reason == v1alpha1.ReasonNodeLost })
	if m, _ := v.Member("far"); m.Status.NodeName != "b" || readyCondition(m).Status != v1alpha1.ConditionUnknown {
		t.Errorf("far on lost b: %+v", m.Status)
	}
}

// A stop of a member another node runs waits for that node's report: its
// published status of the member gone. Without it, the wait ends with its
// context, saying which node did not report; a node lost ends it too.
func TestView_WaitStoppedWaitsForTheOwningNode(t *testing.T) {
	f, v, stopB := viewFixture(t)
	far, _ := v.Member("far")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := v.WaitStopped(ctx, far); err == nil {
		t.Fatal("WaitStopped returned while b still publishes far's status")
	}
	done := make(chan error, 1)
	go func() { done <- v.WaitStopped(context.Background(), far) }()
	if _, err := f.cli.Delete(context.Background(), f.prefix+"/status/far"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitStopped after b's report: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("WaitStopped did not return after b deleted far's status")
	}

	quiet, _ := v.Member("quiet")
	quiet.Status.NodeName = "b"
	f.put("/status/quiet", `{"node":"b","memberUID":"`+quiet.UID+`","bindingRevision":1,"status":{"phase":"Ready"}}`)
	until(t, "quiet's status read", v.Changed, func() bool { _, ok := v.state.statuses.Status("quiet"); return ok })
	go func() { done <- v.WaitStopped(context.Background(), quiet) }()
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitStopped once b is lost: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("WaitStopped did not return once b was lost")
	}
}

// A member deleted from the fleet whose tab this node is still closing
// (its agent finishes a turn) is listed, Terminating on this node, until
// the controllers are done with it.
func TestView_ListsADeletedMemberThisNodeIsClosing(t *testing.T) {
	_, v, _ := viewFixture(t)
	local := v.local.(*fakeControllers)
	local.mu.Lock()
	local.members["gone"] = v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "gone", UID: "u-gone"},
		Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseTerminating, PaneID: "w1:p3"}}
	local.mu.Unlock()
	var names []string
	for _, m := range v.Members() {
		names = append(names, m.Name)
		if m.Name == "gone" && (m.Status.Phase != v1alpha1.PhaseTerminating || m.Status.NodeName != "a") {
			t.Errorf("gone listed as %+v; want Terminating on node a", m.Status)
		}
	}
	if want := []string{"far", "gone", "mine", "nowhere", "quiet", "waiting"}; !slices.Equal(names, want) {
		t.Errorf("members %v, want %v (sorted)", names, want)
	}
	if m, ok := v.Member("gone"); !ok || m.Status.Phase != v1alpha1.PhaseTerminating {
		t.Errorf("Member(gone) = %+v, %v", m.Status, ok)
	}
}
