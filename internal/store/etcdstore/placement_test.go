package etcdstore

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

func TestPlace(t *testing.T) {
	ready := func(name string, max int, labels map[string]string) NodeInfo {
		return NodeInfo{Name: name, MaxMembers: max, Labels: labels, Herdr: v1alpha1.NodeHerdr{Reachable: true}}
	}
	down := NodeInfo{Name: "down", Herdr: v1alpha1.NodeHerdr{Reachable: false}}
	gpu := map[string]string{"gpu": "a100"}
	nodes := []NodeInfo{ready("a", 0, nil), ready("b", 2, gpu), down}
	spec := func(name string, sel map[string]string) *v1alpha1.Member {
		return &v1alpha1.Member{Spec: v1alpha1.MemberSpec{NodeName: name, NodeSelector: sel}}
	}
	for _, tt := range []struct {
		name    string
		m       *v1alpha1.Member
		nodes   []NodeInfo
		counts  map[string]int
		want    string
		wantWhy string
	}{
		{"the emptiest node", spec("", nil), nodes, map[string]int{"a": 3, "b": 1}, "b", ""},
		{"by name on a tie", spec("", nil), nodes, nil, "a", ""},
		{"a full node is passed over", spec("", nil), nodes, map[string]int{"a": 5, "b": 2}, "a", ""},
		{"pinned by name", spec("b", nil), nodes, map[string]int{"b": 1}, "b", ""},
		{"by selector", spec("", gpu), nodes, map[string]int{"a": 0, "b": 1}, "b", ""},
		{"pinned to a node not registered", spec("ghost", nil), nodes, nil, "", "0/3 nodes are available: node ghost is not registered."},
		{"pinned to a node that is not Ready", spec("down", nil), nodes, nil, "", "0/3 nodes are available: 2 not node down (spec.nodeName), 1 not Ready (herdr unreachable)."},
		{"pinned to a full node", spec("b", nil), nodes, map[string]int{"b": 2}, "", "0/3 nodes are available: 2 not node b (spec.nodeName), 1 full (maxMembers)."},
		{"a selector nothing matches", spec("", map[string]string{"gpu": "h100"}), nodes, nil, "", "0/3 nodes are available: 3 do not match nodeSelector gpu=h100."},
		{"a selector and a full node", spec("", gpu), nodes, map[string]int{"b": 2}, "", "0/3 nodes are available: 2 do not match nodeSelector gpu=a100, 1 full (maxMembers)."},
		{"no nodes", spec("", nil), nil, nil, "", "0/0 nodes are available."},
	} {
		got, why := Place(tt.m, tt.nodes, tt.counts)
		if got != tt.want || why != tt.wantWhy {
			t.Errorf("%s: Place = %q, %q; want %q, %q", tt.name, got, why, tt.want, tt.wantWhy)
		}
	}
}

// memberNamesOf returns the names of a snapshot's members, sorted.
func memberNamesOf(s *store.Snapshot) []string { return slices.Sorted(maps.Keys(s.Members)) }

// Two nodes on one prefix, one scheduler: each member is bound once, by
// name, by selector or by spread; each node's snapshot shows only its own;
// an unschedulable member stays unbound and says why; a binding that moves
// takes the member from one snapshot to the other; a member made again
// under its name (a new uid) is bound again; a deleted member's binding
// goes.
func TestScheduler_BindsAndEachNodeSeesItsOwn(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	b := startNode(t, &Options{Node: "b"})
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	for _, info := range []NodeInfo{
		{Name: "a", Herdr: v1alpha1.NodeHerdr{Reachable: true}},
		{Name: "b", Labels: map[string]string{"gpu": "a100"}, Herdr: v1alpha1.NodeHerdr{Reachable: true}},
	} {
		n, err := RegisterNode(ctx, a.cli, info, &NodeOptions{Prefix: prefix(t), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		runNode(t, n)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunScheduler(sctx, a.cli, a.st, &SchedulerOptions{Prefix: prefix(t), Candidate: "a", Logger: quiet})
	}()
	t.Cleanup(func() { stop(); <-done })

	a.apply(profile("claude"))
	pinned := member("pinned", "claude")
	pinned.Spec.NodeName = "b"
	picky := member("picky", "claude")
	picky.Spec.NodeSelector = map[string]string{"gpu": "a100"}
	ghost := member("ghost", "claude")
	ghost.Spec.NodeName = "nowhere"
	for _, m := range []*v1alpha1.Member{pinned, picky, ghost} {
		a.apply(m)
	}
	// pinned and picky go to b (by name, by selector); then the two free
	// ones spread to the emptier node: both to a.
	b.until("b has picky and pinned", func(s *store.Snapshot) bool { return cmp.Equal(memberNamesOf(s), []string{"picky", "pinned"}) })
	a.apply(member("free1", "claude"))
	a.apply(member("free2", "claude"))
	a.until("a has free1 and free2", func(s *store.Snapshot) bool { return cmp.Equal(memberNamesOf(s), []string{"free1", "free2"}) })
	f := a.st.Fleet()
	if node, why, ok := f.Placement("ghost"); !ok || node != "" || why != "0/2 nodes are available: node nowhere is not registered." {
		t.Errorf("ghost's placement: %q %q %v", node, why, ok)
	}
	if node, _, _ := f.Placement("pinned"); node != "b" {
		t.Errorf("pinned's placement: %q, want b", node)
	}
	if len(a.st.Snapshot().Profiles) != 1 || len(b.st.Snapshot().Profiles) != 1 {
		t.Error("profiles are not in every node's snapshot")
	}

	// The binding moves (by hand here): the member leaves a for b.
	uid := a.member("free1").UID
	if _, err := a.cli.Put(ctx, prefix(t)+"/bindings/free1", `{"node":"b","memberUID":"`+uid+`"}`); err != nil {
		t.Fatal(err)
	}
	a.until("free1 gone from a", func(s *store.Snapshot) bool { return s.Members["free1"] == nil })
	b.until("free1 on b", func(s *store.Snapshot) bool { return s.Members["free1"] != nil })

	// free2 deleted and made again: a new uid, bound again (to a: fewest).
	if err := a.st.Delete(ctx, v1alpha1.KindMember, "free2"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Put(ctx, prefix(t)+"/members/free2", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"free2","uid":"another-uid"},"spec":{"profile":"claude"}}`); err != nil {
		t.Fatal(err)
	}
	a.until("free2 again on a, with its new uid", func(s *store.Snapshot) bool {
		return s.Members["free2"] != nil && s.Members["free2"].UID == "another-uid"
	})

	// A deleted member's binding goes.
	if err := a.st.Delete(ctx, v1alpha1.KindMember, "picky"); err != nil {
		t.Fatal(err)
	}
	b.until("picky gone from b", func(s *store.Snapshot) bool { return s.Members["picky"] == nil })
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		changed := a.st.FleetChanged()
		a.st.mu.Lock()
		_, left := a.st.binds["picky"]
		a.st.mu.Unlock()
		if !left {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("picky's binding still there after %s", waitLimit)
		}
	}
}

// A scheduler that no longer holds its leadership key writes nothing.
func TestScheduler_WritesOnlyWhileItLeads(t *testing.T) {
	a := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	n, err := RegisterNode(ctx, a.cli, NodeInfo{Name: "a", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, n)
	a.apply(profile("claude"))
	a.apply(member("m", "claude"))
	a.caughtUp()
	s := &scheduler{cli: a.cli, st: a.st, o: &SchedulerOptions{RequestTimeout: DefaultRequestTimeout, RescheduleAfter: DefaultRescheduleAfter, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)},
		leaderKey: prefix(t) + "/scheduler/gone", leaderRev: 1}
	if _, err := s.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := a.cli.Get(ctx, prefix(t)+"/bindings/m"); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("a scheduler without leadership bound m: %v %v", resp.Kvs, err)
	}
}
