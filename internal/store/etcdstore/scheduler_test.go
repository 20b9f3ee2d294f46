package etcdstore

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// batchFleet registers node a, applies n members m000… and returns a
// scheduler leading under a leadership key of the test's own (not an
// election: the test holds the key).
func batchFleet(t *testing.T, n int) (*node, *scheduler) {
	t.Helper()
	a := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	reg, err := RegisterNode(ctx, a.cli, NodeInfo{Name: "a", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, reg)
	a.apply(profile("claude"))
	for i := range n {
		a.apply(member(fmt.Sprintf("m%03d", i), "claude"))
	}
	leader := prefix(t) + "/scheduler/test"
	resp, err := a.cli.Put(ctx, leader, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.caughtUp()
	return a, &scheduler{cli: a.cli, st: a.st, o: &SchedulerOptions{RequestTimeout: DefaultRequestTimeout, RescheduleAfter: DefaultRescheduleAfter, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)},
		leaderKey: leader, leaderRev: resp.Header.Revision}
}

// bindings returns the test's bindings in etcd by member name, with the
// revisions that wrote them.
func bindings(t *testing.T, a *node) map[string]int64 {
	t.Helper()
	resp, err := a.cli.Get(context.Background(), prefix(t)+"/bindings/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)[len(prefix(t)+"/bindings/"):]] = kv.ModRevision
	}
	return got
}

// One pass binds a hundred members in two transactions (batches of
// bindBatch), not one per member.
func TestScheduler_BindsInBatches(t *testing.T) {
	a, s := batchFleet(t, 100)
	if _, err := s.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := bindings(t, a)
	revs := map[int64]bool{}
	for _, rev := range got {
		revs[rev] = true
	}
	if len(got) != 100 || len(revs) != 2 {
		t.Errorf("%d members bound in %d transactions; want 100 in 2", len(got), len(revs))
	}
}

// A batch with one member changed since it was placed binds all the
// others and not that one; a batch of a scheduler that no longer leads
// binds nothing.
func TestScheduler_StaleMemberHoldsBackOnlyItself(t *testing.T) {
	a, s := batchFleet(t, 40)
	ctx := context.Background()
	f := s.st.Fleet()
	plan := func(m *v1alpha1.Member) bindingWrite {
		var rev int64
		if _, err := fmt.Sscan(m.ResourceVersion, &rev); err != nil {
			t.Fatal(err)
		}
		memberKey, _ := s.st.Key("Member", m.Name)
		key := s.st.bindingKey(m.Name)
		return s.planWrite(key, clientv3.Compare(clientv3.ModRevision(memberKey), "=", rev), clientv3.OpPut(key, `{"node":"a","memberUID":"`+m.UID+`"}`), nil)
	}
	var ws []bindingWrite
	for _, m := range f.Members {
		ws = append(ws, plan(m))
	}
	if len(ws) != 40 {
		t.Fatalf("%d members in the fleet, want 40", len(ws))
	}
	// m017 changes after it was placed: its fence no longer holds.
	if _, err := a.cli.Put(ctx, prefix(t)+"/members/m017", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"m017","uid":"another-uid"},"spec":{"profile":"claude"}}`); err != nil {
		t.Fatal(err)
	}

	lost := *s
	lost.leaderKey = prefix(t) + "/scheduler/gone"
	if err := lost.commit(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if got := bindings(t, a); len(got) != 0 {
		t.Fatalf("a scheduler that does not lead bound %d members", len(got))
	}

	if err := s.commit(ctx, ws); err != nil {
		t.Fatal(err)
	}
	got := bindings(t, a)
	if _, ok := got["m017"]; ok || len(got) != 39 {
		t.Errorf("bound %d members (m017 among them: %v); want the 39 others", len(got), ok)
	}
}

// A pass counts each node's members from a fleet that has seen this
// scheduler's own last bindings: one read before they came back through
// the watch (here a store frozen before them) binds nothing, rather than
// a member created meanwhile to the node they filled.
func TestScheduler_PassWaitsForItsOwnBindings(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	reg, err := RegisterNode(ctx, a.cli, NodeInfo{Name: "a", MaxMembers: 1, Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, reg)
	a.apply(profile("claude"))
	a.apply(member("m000", "claude"))
	leader := prefix(t) + "/scheduler/test"
	resp, err := a.cli.Put(ctx, leader, "a")
	if err != nil {
		t.Fatal(err)
	}
	a.caughtUp()
	frozen := func() *Store {
		st, err := New(a.cli, &Options{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := frozen() // m000, unbound
	a.apply(member("a000", "claude"))
	behind := frozen() // m000 and a000, not m000's binding to come

	s := &scheduler{cli: a.cli, st: before, o: &SchedulerOptions{RequestTimeout: 200 * time.Millisecond, RescheduleAfter: DefaultRescheduleAfter, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)},
		leaderKey: leader, leaderRev: resp.Header.Revision}
	if _, err := s.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := bindings(t, a); len(got) != 1 {
		t.Fatalf("first pass bound %v; want m000 alone (node a takes one member)", got)
	}
	s.st = behind
	if _, err := s.pass(ctx); err == nil {
		t.Error("a pass on a fleet that has not seen the scheduler's last bindings succeeded")
	}
	if got := bindings(t, a); len(got) != 1 {
		t.Errorf("bound %v on node a, which takes one member", got)
	}
}
