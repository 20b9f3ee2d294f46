package etcdstore

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// A published status is believed only from the node the member is bound
// to, of the member's uid, under the binding revision this store sees,
// while that node's herdr answers; otherwise BoundStatus says why.
func TestStore_BoundStatusBelievesOnlyTheBoundNode(t *testing.T) {
	n := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	n.apply(profile("claude"))
	n.apply(member("coder", "claude"))
	b, err := RegisterNode(ctx, n.cli, NodeInfo{Name: "b", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, b)
	uid := n.st.Fleet().Members[0].UID
	bind, err := n.cli.Put(ctx, prefix(t)+"/bindings/coder", `{"node":"b","memberUID":"`+uid+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	rev := strconv.FormatInt(bind.Header.Revision, 10)
	check := func(what, value, want string) {
		t.Helper()
		if value != "" {
			if _, err := n.cli.Put(ctx, prefix(t)+"/status/coder", value); err != nil {
				t.Fatal(err)
			}
		}
		n.caughtUp()
		f := n.st.Fleet()
		pub, why := n.st.BoundStatus(&f, f.Members[0])
		if why != want {
			t.Errorf("%s: BoundStatus says %q, want %q", what, why, want)
		}
		// The one-member lookups say what the fleet's copy says.
		if one, oneWhy, found := n.st.MemberStatus("coder"); !found || oneWhy != why || cmp.Diff(pub, one) != "" {
			t.Errorf("%s: MemberStatus = %q, %v, (-BoundStatus's +its) %s", what, oneWhy, found, cmp.Diff(pub, one))
		}
		if b, ok := n.st.Bound("coder"); b != f.Bindings["coder"] || ok != (f.Bindings["coder"] != Binding{}) {
			t.Errorf("%s: Bound = %+v, %v; want the fleet's binding %+v", what, b, ok, f.Bindings["coder"])
		}
		if want == "" && pub.Status.Phase != v1alpha1.PhaseReady {
			t.Errorf("%s: believed %+v", what, pub)
		}
	}
	const notYet = "it has not published its status of this member yet"
	check("nothing published", "", notYet)
	check("another node's", `{"node":"c","memberUID":"`+uid+`","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, notYet)
	check("another member's", `{"node":"b","memberUID":"other","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, notYet)
	check("under another binding", `{"node":"b","memberUID":"`+uid+`","bindingRevision":1,"status":{"phase":"Ready"}}`, notYet)
	check("the bound node's", `{"node":"b","memberUID":"`+uid+`","bindingRevision":`+rev+`,"status":{"phase":"Ready"}}`, "")
	if err := b.Update(ctx, func(i *NodeInfo) { i.Herdr.Reachable = false }); err != nil {
		t.Fatal(err)
	}
	check("its herdr gone", "", "its herdr does not answer, so its status is not known here")
	if _, err := n.cli.Delete(ctx, prefix(t)+"/bindings/coder"); err != nil {
		t.Fatal(err)
	}
	check("unbound", "", "unbound")
	if _, _, found := n.st.MemberStatus("nobody"); found {
		t.Error("MemberStatus found a member the store does not hold")
	}
	if _, ok := n.st.Bound("nobody"); ok {
		t.Error("Bound found a member the store does not hold")
	}
}

// The scheduler deletes the statuses nobody else will: of a member that is
// gone, published by a node that is not registered. A registered node's
// (it deletes its own) and an existing member's stay.
func TestScheduler_DeletesStatusesNobodyElseWill(t *testing.T) {
	n := startNode(t, &Options{Node: "a"})
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	alive, err := RegisterNode(ctx, n.cli, NodeInfo{Name: "alive", Herdr: v1alpha1.NodeHerdr{Reachable: true}}, &NodeOptions{Prefix: prefix(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, alive)
	n.apply(profile("claude"))
	kept := member("kept", "claude")
	kept.Spec.NodeName = "dead" // not registered: stays unbound
	n.apply(kept)
	for name, node := range map[string]string{"ghost": "dead", "alive-ghost": "alive", "kept": "dead"} {
		if _, err := n.cli.Put(ctx, prefix(t)+"/status/"+name, `{"node":"`+node+`","memberUID":"u","status":{"phase":"Ready"}}`); err != nil {
			t.Fatal(err)
		}
	}
	n.caughtUp()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunScheduler(sctx, n.cli, n.st, &SchedulerOptions{Prefix: prefix(t), Candidate: "a", Logger: quiet})
	}()
	t.Cleanup(func() { stop(); <-done })
	statusUntil(t, n.st, "ghost", "deleted", func(_ PublishedStatus, ok bool) bool { return !ok })
	n.apply(member("later", "claude")) // one more pass
	fleetUntil(t, n.st, "later bound", func(f Fleet) bool { return boundTo(f, "later", "alive") })
	n.caughtUp()
	for _, name := range []string{"alive-ghost", "kept"} {
		if _, ok := n.st.Status(name); !ok {
			t.Errorf("%s's status was deleted", name)
		}
	}
}
