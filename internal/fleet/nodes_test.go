package fleet

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

var ignoreTimes = cmpopts.IgnoreFields(v1alpha1.Condition{}, "LastTransitionTime")

func readyOf(n v1alpha1.Node) string { return n.ReadyCondition().Status }

// Every node reads each registration: labels, capacity, herdr and member
// count as the node updates them, Ready from herdr's reachability, and the
// node gone once its lease is. An update that changes nothing writes
// nothing; one that breaks the rules is refused.
func TestNodes_FollowRegistrations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nodes := f.nodes(f.store(""))
	reg, _, stop := f.register(NodeInfo{Name: "buildbox", Labels: map[string]string{"gpu": "a100"}, MaxMembers: 4, GatewayURL: "http://10.0.0.2:8080/mcp", Version: "v1"}, 0)
	until(t, "buildbox registered", nodes.Changed, func() bool { return len(nodes.Nodes()) == 1 })
	got := nodes.Nodes()[0]
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
	until(t, "buildbox Ready", nodes.Changed, func() bool { n, _ := nodes.Node("buildbox"); return readyOf(n) == v1alpha1.ConditionTrue })
	got, _ = nodes.Node("buildbox")
	if got.Status.Members != 2 || got.Status.Herdr.Version != "0.7.1" || got.Status.Herdr.Protocol != 22 {
		t.Errorf("after the update: %+v, want 2 members and herdr 0.7.1/22", got)
	}
	if got.Status.Herdr.Since == nil || got.Status.Herdr.Since.Before(*got.CreationTimestamp) {
		t.Errorf("herdr since %v, want the time reachability changed", got.Status.Herdr.Since)
	}

	before, err := f.cli.Get(ctx, f.prefix+"/nodes/buildbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Update(ctx, func(i *NodeInfo) { i.Members = 2 }); err != nil {
		t.Fatal(err)
	}
	after, err := f.cli.Get(ctx, f.prefix+"/nodes/buildbox")
	if err != nil {
		t.Fatal(err)
	}
	if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Errorf("an unchanged update wrote the key (mod revision %d → %d)", before.Kvs[0].ModRevision, after.Kvs[0].ModRevision)
	}
	if err := reg.Update(ctx, func(i *NodeInfo) { i.Labels = map[string]string{"bad": "a\x07"} }); err == nil {
		t.Error("an update with a control character in a label was taken")
	}
	if got := reg.Info(); got.Labels["gpu"] != "a100" || len(got.Labels) != 1 {
		t.Errorf("after a refused update the node publishes %v", got.Labels)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	until(t, "buildbox gone", nodes.Changed, func() bool { return len(nodes.Nodes()) == 0 })
}

// A registration written behind fleetd's back that does not decode, names
// another node or carries bad labels is left out; the good ones show.
func TestNodes_LeaveOutBadRegistrations(t *testing.T) {
	f := newFixture(t)
	st := f.store("")
	nodes := f.nodes(st)
	for key, value := range map[string]string{
		"/nodes/garbage":   "{not json",
		"/nodes/other":     `{"name":"someone-else","startedAt":"2026-01-01T00:00:00Z"}`,
		"/nodes/badlabels": `{"name":"badlabels","labels":{"k":"\u0007"},"startedAt":"2026-01-01T00:00:00Z"}`,
		"/nodes/unknown":   `{"name":"unknown","startedAt":"2026-01-01T00:00:00Z","extra":1}`,
		"/nodes/negative":  `{"name":"negative","maxMembers":-1,"startedAt":"2026-01-01T00:00:00Z"}`,
	} {
		f.put(key, value)
	}
	rev := f.put("/nodes/good", `{"name":"good","startedAt":"2026-01-01T00:00:00Z","herdr":{"reachable":true}}`)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := nodes.inf.WaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Nodes() {
		names = append(names, n.Name+"="+readyOf(n))
	}
	if diff := cmp.Diff([]string{"good=True"}, names); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if snap := st.Snapshot(); len(snap.Errors) != 0 || len(snap.Members) != 0 {
		t.Errorf("node keys leaked into the object snapshot: %+v", snap)
	}
}
