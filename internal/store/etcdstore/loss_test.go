package etcdstore

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// fleetUntil returns once cond holds for st's Fleet, checked at every
// change of it.
func fleetUntil(t *testing.T, st *Store, what string, cond func(Fleet) bool) Fleet {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		changed := st.FleetChanged()
		if f := st.Fleet(); cond(f) {
			return f
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("not %s within %s; fleet %+v", what, waitLimit, st.Fleet())
		}
	}
}

func boundTo(f Fleet, member, node string) bool {
	b, ok := f.Bindings[member]
	return ok && b.Node == node
}

// A node whose registration is gone while members are bound to it is
// shown NotReady (NodeLost) as last registered; after RescheduleAfter on
// the scheduler's clock, and not before, its free members are bound to
// another node, while one pinned by spec.nodeName waits for it; once it is
// registered again it is Ready and no longer lost.
func TestScheduler_ReschedulesMembersOfALostNode(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	quiet := slog.New(slog.DiscardHandler)
	a := startNode(t, &Options{Node: "a", Clock: clk})
	b := startNode(t, &Options{Node: "b", Clock: clk})
	ctx := context.Background()
	register := func(name string) func() error {
		n, err := RegisterNode(ctx, a.cli, NodeInfo{Name: name, Labels: map[string]string{"n": name}, Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return runNode(t, n)
	}
	stopA := register("a")
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunScheduler(sctx, b.cli, b.st, &SchedulerOptions{Prefix: prefix(t), Candidate: "b", RescheduleAfter: time.Minute, Clock: clk, Logger: quiet})
	}()
	t.Cleanup(func() { stop(); <-done })

	a.apply(profile("claude"))
	pinned := member("pinned", "claude")
	pinned.Spec.NodeName = "a"
	a.apply(pinned)
	a.apply(member("free", "claude"))
	a.until("a runs both", func(s *store.Snapshot) bool { return len(s.Members) == 2 })
	register("b")
	fleetUntil(t, b.st, "b registered", func(f Fleet) bool { return len(f.Nodes) == 2 })

	// a's lease is gone (revoked here; an expired one is the same delete).
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	f := fleetUntil(t, b.st, "a lost", func(f Fleet) bool { _, lost := f.Lost["a"]; return lost })
	if !f.Lost["a"].Equal(clk.Now()) {
		t.Errorf("a lost since %v, want %v (the store's clock when it saw the delete)", f.Lost["a"], clk.Now())
	}
	var lostNode *v1alpha1.Node
	for _, n := range b.st.Nodes() {
		if n.Name == "a" {
			lostNode = &n
		}
	}
	if lostNode == nil {
		t.Fatalf("a is not in Nodes() once lost: %+v", b.st.Nodes())
	}
	if r := lostNode.ReadyCondition(); r.Status != v1alpha1.ConditionFalse || r.Reason != v1alpha1.ReasonNodeLost || lostNode.Labels["n"] != "a" || lostNode.Status.Members != 2 {
		t.Errorf("lost node a: Ready %+v, labels %v, members %d; want False NodeLost, as last registered, 2 members", r, lostNode.Labels, lostNode.Status.Members)
	}

	// The scheduler waits for the grace: its timer is armed, nothing moved.
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := clk.WaitForTimers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute - time.Second)
	if f := b.st.Fleet(); !boundTo(f, "free", "a") || !boundTo(f, "pinned", "a") {
		t.Fatalf("rescheduled before the grace: %+v", f.Bindings)
	}
	clk.Step(time.Second)
	b.until("b runs free", func(s *store.Snapshot) bool { return s.Members["free"] != nil })
	if f := b.st.Fleet(); !boundTo(f, "pinned", "a") {
		t.Errorf("pinned (spec.nodeName a) moved: %+v", f.Bindings)
	}

	// a comes back: Ready, no longer lost, and pinned is still its own.
	register("a")
	f = fleetUntil(t, b.st, "a back", func(f Fleet) bool { _, lost := f.Lost["a"]; return !lost && len(f.Nodes) == 2 })
	if !boundTo(f, "pinned", "a") || !boundTo(f, "free", "b") {
		t.Errorf("bindings after a came back: %+v", f.Bindings)
	}
	for _, n := range b.st.Nodes() {
		if n.Name == "a" && n.ReadyCondition().Reason != v1alpha1.ReasonNodeReady {
			t.Errorf("a once back: %+v", n.ReadyCondition())
		}
	}
}
