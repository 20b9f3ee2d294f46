package etcdstore

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// caughtUp waits until the store's snapshot reflects etcd's current
// revision: everything written before the call has been watched.
func (n *node) caughtUp() {
	n.t.Helper()
	resp, err := n.cli.Get(context.Background(), "/")
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := n.st.waitRev(ctx, resp.Header.Revision); err != nil {
		n.t.Fatal(err)
	}
}

var ignoreTimes = cmpopts.IgnoreFields(v1alpha1.Condition{}, "LastTransitionTime")

// The store shows each registered node from its watch: labels, capacity,
// herdr and member count as the node updates them, Ready from herdr's
// reachability, and the node gone once its lease is.
func TestStore_NodesFollowRegistrations(t *testing.T) {
	st := startNode(t, nil)
	ctx := context.Background()
	reg, err := RegisterNode(ctx, st.cli, NodeInfo{Name: "buildbox", Labels: map[string]string{"gpu": "a100"}, MaxMembers: 4, GatewayURL: "http://10.0.0.2:8080/mcp", Version: "v1"},
		&NodeOptions{Prefix: prefix(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	stop := runNode(t, reg)
	st.caughtUp()
	nodes := st.st.Nodes()
	if len(nodes) != 1 {
		t.Fatalf("Nodes() = %+v, want buildbox", nodes)
	}
	got := nodes[0]
	want := v1alpha1.Node{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNode},
		ObjectMeta: v1alpha1.ObjectMeta{Name: "buildbox", Labels: map[string]string{"gpu": "a100"}, CreationTimestamp: got.CreationTimestamp},
		Spec:       v1alpha1.NodeSpec{MaxMembers: 4, GatewayURL: "http://10.0.0.2:8080/mcp"},
		Status: v1alpha1.NodeStatus{FleetdVersion: "v1", Herdr: v1alpha1.NodeHerdr{Since: got.Status.Herdr.Since},
			Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonHerdrUnavailable,
				Message: "registered, but its herdr does not answer: the node creates and recreates nothing"}}},
	}
	if diff := cmp.Diff(want, got, ignoreTimes); diff != "" || got.CreationTimestamp == nil {
		t.Errorf("registered node (-want +got):\n%s", diff)
	}

	// herdr answers and two members run: Ready, with herdr's version.
	if err := reg.Update(ctx, func(i *NodeInfo) {
		i.Herdr = v1alpha1.NodeHerdr{Version: "0.7.1", Protocol: 22, Reachable: true}
		i.Members = 2
	}); err != nil {
		t.Fatal(err)
	}
	st.caughtUp()
	got, ok := st.st.Node("buildbox")
	if !ok || nodeStatusOf(got) != v1alpha1.ConditionTrue || got.Status.Members != 2 || got.Status.Herdr.Version != "0.7.1" || got.Status.Herdr.Protocol != 22 {
		t.Errorf("after the update: %+v, want Ready with 2 members and herdr 0.7.1/22", got)
	}
	if got.Status.Herdr.Since == nil || got.Status.Herdr.Since.Before(*got.CreationTimestamp) {
		t.Errorf("herdr since %v, want the time reachability changed", got.Status.Herdr.Since)
	}

	// An update that changes nothing writes nothing.
	before, err := st.cli.Get(ctx, prefix(t)+"/nodes/buildbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Update(ctx, func(i *NodeInfo) { i.Members = 2 }); err != nil {
		t.Fatal(err)
	}
	after, err := st.cli.Get(ctx, prefix(t)+"/nodes/buildbox")
	if err != nil {
		t.Fatal(err)
	}
	if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Errorf("an unchanged update wrote the key (mod revision %d → %d)", before.Kvs[0].ModRevision, after.Kvs[0].ModRevision)
	}
	// An update that breaks the rules is refused and changes nothing.
	if err := reg.Update(ctx, func(i *NodeInfo) { i.Labels = map[string]string{"bad": "a\x07"} }); err == nil {
		t.Error("an update with a control character in a label was taken")
	}
	if got := reg.Info(); got.Labels["gpu"] != "a100" || len(got.Labels) != 1 {
		t.Errorf("after a refused update the node publishes %v", got.Labels)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	st.caughtUp()
	if nodes := st.st.Nodes(); len(nodes) != 0 {
		t.Errorf("after the node stopped: %+v, want none", nodes)
	}
}

func nodeStatusOf(n v1alpha1.Node) string { return n.ReadyCondition().Status }

// A registration written behind fleetd's back that does not decode, names
// another node or carries bad labels is left out; the good ones show.
func TestStore_NodesLeaveOutBadRegistrations(t *testing.T) {
	st := startNode(t, nil)
	ctx := context.Background()
	for key, value := range map[string]string{
		"/nodes/garbage":   "{not json",
		"/nodes/other":     `{"name":"someone-else","startedAt":"2026-01-01T00:00:00Z"}`,
		"/nodes/badlabels": `{"name":"badlabels","labels":{"k":"\u0007"},"startedAt":"2026-01-01T00:00:00Z"}`,
		"/nodes/unknown":   `{"name":"unknown","startedAt":"2026-01-01T00:00:00Z","extra":1}`,
		"/nodes/negative":  `{"name":"negative","maxMembers":-1,"startedAt":"2026-01-01T00:00:00Z"}`,
		"/nodes/good":      `{"name":"good","startedAt":"2026-01-01T00:00:00Z","herdr":{"reachable":true}}`,
	} {
		if _, err := st.cli.Put(ctx, prefix(t)+key, value); err != nil {
			t.Fatal(err)
		}
	}
	st.caughtUp()
	var names []string
	for _, n := range st.st.Nodes() {
		names = append(names, n.Name+"="+nodeStatusOf(n))
	}
	if diff := cmp.Diff([]string{"good=True"}, names); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if snap := st.st.Snapshot(); len(snap.Errors) != 0 || len(snap.Members) != 0 {
		t.Errorf("node keys leaked into the object snapshot: %+v", snap)
	}
}
