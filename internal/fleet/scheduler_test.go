package fleet

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// schedule runs the scheduler as candidate, under sess, on state, until
// the test ends.
func (f *fixture) schedule(sess *session.Session, state *State, candidate string, o scheduler.Options) {
	o.Prefix, o.Candidate, o.Logger = f.prefix, candidate, quiet
	f.run(func(ctx context.Context) error { return scheduler.Run(ctx, f.cli, sess, state, &o) })
}

func boundTo(fl scheduler.Fleet, member, node string) bool {
	b, ok := fl.Bindings[member]
	return ok && b.Node == node
}

func memberNames(st *etcdstore.Store) []string {
	var out []string
	for name := range st.Snapshot().Members {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Two nodes on one prefix, one scheduler on the fleet as node a reads it:
// each member is bound once, by name, by selector or by spread; each
// node's store shows only its own; an unschedulable member stays unbound
// and says why; a member made again under its name (a new uid) is bound
// again; a deleted member's binding goes.
func TestScheduler_BindsAndEachNodeSeesItsOwn(t *testing.T) {
	f := newFixture(t)
	a, b := f.store("a"), f.store("b")
	state := NewState(a, f.nodes(a), f.statuses())
	_, sess, _ := f.register(NodeInfo{Name: "a", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	f.register(NodeInfo{Name: "b", Labels: map[string]string{"gpu": "a100"}, Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	f.schedule(sess, state, "a", scheduler.Options{})

	apply(t, a)
	ctx := context.Background()
	pinned := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "pinned"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeName: "b"}}
	picky := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "picky"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeSelector: map[string]string{"gpu": "a100"}}}
	ghost := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "ghost"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeName: "nowhere"}}
	for _, m := range []*v1alpha1.Member{pinned, picky, ghost} {
		m.SetDefaults()
		if err := a.Apply(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// pinned and picky go to b (by name, by selector); then the two free
	// ones spread to the emptier node: both to a.
	until(t, "b has picky and pinned", b.Changed, func() bool { return slices.Equal(memberNames(b), []string{"picky", "pinned"}) })
	apply(t, a, "free1", "free2")
	until(t, "a has free1 and free2", a.Changed, func() bool { return slices.Equal(memberNames(a), []string{"free1", "free2"}) })
	fl := state.Fleet()
	if p, ok := fl.Placement("ghost"); !ok || p.Node != "" || p.Next != "" || p.Why != "0/2 nodes are available: node nowhere is not registered." {
		t.Errorf("ghost's placement: %+v %v", p, ok)
	}
	if p, _ := fl.Placement("pinned"); p.Node != "b" {
		t.Errorf("pinned's placement: %+v, want node b", p)
	}

	// free2 deleted and made again: a new uid, bound again (to a: fewest).
	if err := a.Delete(ctx, v1alpha1.KindMember, "free2"); err != nil {
		t.Fatal(err)
	}
	f.put("/members/free2", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"free2","uid":"another-uid"},"spec":{"profile":"claude"}}`)
	until(t, "free2 again on a, with its new uid", a.Changed, func() bool {
		m := a.Snapshot().Members["free2"]
		return m != nil && m.UID == "another-uid"
	})

	// A deleted member's binding goes.
	if err := a.Delete(ctx, v1alpha1.KindMember, "picky"); err != nil {
		t.Fatal(err)
	}
	until(t, "picky's binding gone", a.FleetChanged, func() bool { _, left := a.Assignments().Stored["picky"]; return !left })
}

// lostNodeFleet is the fleet of the lost-node tests: the stores of nodes a
// and b, and the nodes and state as b reads them, on clk.
func (f *fixture) lostNodeFleet(clk *clock.Fake) (a, b *etcdstore.Store, nodes *Nodes, state *State) {
	a, b = f.store("a"), f.store("b")
	o := f.opts()
	o.Clock = clk
	nodes = NewNodes(f.cli, b, o)
	f.run(nodes.Run)
	return a, b, nodes, NewState(b, nodes, f.statuses())
}

// A node whose registration is gone while members are bound to it is
// shown NotReady (NodeLost) as last registered; after RescheduleAfter on
// the scheduler's clock, and not before, its free members are bound to
// another node, while one pinned by spec.nodeName waits for it; once it is
// registered again it is Ready and no longer lost.
func TestScheduler_ReschedulesMembersOfALostNode(t *testing.T) {
	f, clk := newFixture(t), clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	a, b, nodes, state := f.lostNodeFleet(clk)
	register := func(name string) func() error {
		_, _, stop := f.register(NodeInfo{Name: name, Labels: map[string]string{"n": name}, Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
		return stop
	}
	stopA := register("a")
	// The scheduler, on a session of its own, places both on a, the only
	// node.
	sess := session.New(f.cli, &session.Options{Logger: quiet})
	f.run(sess.Run)
	f.schedule(sess, state, "b", scheduler.Options{RescheduleAfter: time.Minute, Clock: clk})
	apply(t, a, "free")
	pinned := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "pinned"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeName: "a"}}
	pinned.SetDefaults()
	if err := a.Apply(context.Background(), pinned); err != nil {
		t.Fatal(err)
	}
	until(t, "a runs both", a.Changed, func() bool { return len(a.Snapshot().Members) == 2 })
	register("b")
	until(t, "b registered", state.Changed, func() bool { return len(state.Fleet().Nodes) == 2 })

	// a's lease is gone (revoked here; an expired one is the same delete).
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	until(t, "a lost", state.Changed, func() bool { _, lost := state.Lost()["a"]; return lost })
	if since := state.Lost()["a"]; !since.Equal(clk.Now()) {
		t.Errorf("a lost since %v, want %v (the node's clock when it saw the delete)", since, clk.Now())
	}
	lostNode, ok := nodes.Node("a")
	if !ok {
		t.Fatalf("a is not in Nodes() once lost: %+v", nodes.Nodes())
	}
	if r := lostNode.ReadyCondition(); r.Status != v1alpha1.ConditionFalse || r.Reason != v1alpha1.ReasonNodeLost || lostNode.Labels["n"] != "a" || lostNode.Status.Members != 2 {
		t.Errorf("lost node a: Ready %+v, labels %v, members %d; want False NodeLost, as last registered, 2 members", r, lostNode.Labels, lostNode.Status.Members)
	}

	// The scheduler waits for the grace: its timer is armed, nothing moved.
	wctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := clk.WaitForTimers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute - time.Second)
	if fl := state.Fleet(); !boundTo(fl, "free", "a") || !boundTo(fl, "pinned", "a") {
		t.Fatalf("rescheduled before the grace: %+v", fl.Bindings)
	}
	clk.Step(time.Second)
	until(t, "b runs free", b.Changed, func() bool { return b.Snapshot().Members["free"] != nil })
	if fl := state.Fleet(); !boundTo(fl, "pinned", "a") {
		t.Errorf("pinned (spec.nodeName a) moved: %+v", fl.Bindings)
	}

	// a comes back: Ready, no longer lost, and pinned is still its own.
	register("a")
	until(t, "a back", state.Changed, func() bool { _, lost := state.Lost()["a"]; return !lost && len(state.Fleet().Nodes) == 2 })
	if fl := state.Fleet(); !boundTo(fl, "pinned", "a") || !boundTo(fl, "free", "b") {
		t.Errorf("bindings after a came back: %+v", fl.Bindings)
	}
	if n, _ := nodes.Node("a"); n.ReadyCondition().Reason != v1alpha1.ReasonNodeReady {
		t.Errorf("a once back: %+v", n.ReadyCondition())
	}
}

// Each lost node's members wait for it as long as the node said when it
// registered (its --reschedule-after, which its own fence counts on), not
// the scheduler's: a node that waits longer than the scheduler would is
// never rescheduled before its fence closed its panes, and one that waits
// less is rescheduled sooner. A node that said nothing has the
// scheduler's.
func TestScheduler_EachLostNodesMembersWaitItsOwnGrace(t *testing.T) {
	f, clk := newFixture(t), clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	a, _, _, state := f.lostNodeFleet(clk)
	register := func(name string, grace time.Duration) func() error {
		_, _, stop := f.register(NodeInfo{Name: name, Herdr: v1alpha1.NodeHerdr{Reachable: true},
			RescheduleAfter: v1alpha1.Duration{Duration: grace}}, 0)
		return stop
	}
	sess := session.New(f.cli, &session.Options{Logger: quiet})
	f.run(sess.Run)
	f.schedule(sess, state, "b", scheduler.Options{RescheduleAfter: time.Minute, Clock: clk})
	// One member on each node, placed there while it was the emptiest —
	// once the scheduler's view has the node: a member it places before
	// goes to an older node.
	stops := map[string]func() error{}
	for _, n := range []struct {
		node  string
		grace time.Duration
	}{{"long", 3 * time.Minute}, {"short", 30 * time.Second}, {"old", 0}} {
		stops[n.node] = register(n.node, n.grace)
		until(t, n.node+" registered", state.Changed, func() bool {
			return slices.ContainsFunc(state.Fleet().Nodes, func(nd scheduler.Node) bool { return nd.Name == n.node })
		})
		apply(t, a, "on-"+n.node)
		until(t, "on-"+n.node+" bound to "+n.node, state.Changed, func() bool { return boundTo(state.Fleet(), "on-"+n.node, n.node) })
	}
	register("b", 0)
	until(t, "b registered", state.Changed, func() bool { return len(state.Fleet().Nodes) == 4 })
	for _, name := range []string{"long", "short", "old"} {
		if err := stops[name](); err != nil {
			t.Fatal(err)
		}
	}
	until(t, "all three lost", state.Changed, func() bool { return len(state.Lost()) == 3 })

	moved := func(member string) bool { return boundTo(state.Fleet(), member, "b") }
	step := func(d time.Duration, want ...string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := clk.WaitForTimers(wctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Step(d)
		for _, m := range want {
			until(t, m+" on b", state.Changed, func() bool { return moved(m) })
		}
	}
	step(30*time.Second, "on-short") // short's own 30 s
	if moved("on-long") || moved("on-old") {
		t.Fatalf("after 30 s: %+v; want only on-short moved", state.Fleet().Bindings)
	}
	step(30*time.Second, "on-old") // the scheduler's minute, for a node that said nothing
	if moved("on-long") {
		t.Fatalf("after 1 min: on-long moved before its node's 3 min: %+v", state.Fleet().Bindings)
	}
	step(time.Minute + 59*time.Second)
	if moved("on-long") {
		t.Fatalf("after 2 min 59 s: on-long moved before its node's 3 min")
	}
	step(time.Second, "on-long")
}

// The scheduler deletes the statuses nobody else will: of a member that is
// gone, published by a node that is not registered. A registered node's
// (it deletes its own) and an existing member's stay.
func TestScheduler_DeletesStatusesNobodyElseWill(t *testing.T) {
	f := newFixture(t)
	st := f.store("a")
	statuses := f.statuses()
	nodes := f.nodes(st)
	state := NewState(st, nodes, statuses)
	_, sess, _ := f.register(NodeInfo{Name: "alive", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, 0)
	// The scheduler's view knows alive before its first pass: a status of
	// a gone member whose node it has not seen yet is an orphan to it
	// (harmless: that node would have deleted it).
	until(t, "alive registered", nodes.Changed, func() bool {
		return slices.ContainsFunc(nodes.Registered(), func(n NodeInfo) bool { return n.Name == "alive" })
	})
	kept := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "kept"}, Spec: v1alpha1.MemberSpec{Profile: "claude", NodeName: "dead"}} // not registered: stays unbound
	kept.SetDefaults()
	apply(t, st)
	if err := st.Apply(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	for name, node := range map[string]string{"ghost": "dead", "alive-ghost": "alive", "kept": "dead"} {
		f.put("/status/"+name, `{"node":"`+node+`","memberUID":"u","status":{"phase":"Ready"}}`)
	}
	until(t, "the statuses read", statuses.Changed, func() bool { return len(statuses.published()) == 3 })
	f.schedule(sess, state, "a", scheduler.Options{})
	statusUntil(t, statuses, "ghost", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })
	apply(t, st, "later") // one more pass
	until(t, "later bound", state.Changed, func() bool { return boundTo(state.Fleet(), "later", "alive") })
	for _, name := range []string{"alive-ghost", "kept"} {
		if _, ok := statuses.Status(name); !ok {
			t.Errorf("%s's status was deleted", name)
		}
	}
}
