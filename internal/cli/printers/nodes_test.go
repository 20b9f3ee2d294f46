package printers

import (
	"bytes"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func sampleNodes() []Object {
	started := printNow.Add(-3 * time.Hour)
	since := printNow.Add(-90 * time.Second)
	ready := func(status, reason, msg string) []v1alpha1.Condition {
		return []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, LastTransitionTime: since}}
	}
	return []Object{
		&v1alpha1.Node{
			ObjectMeta: v1alpha1.ObjectMeta{Name: "buildbox", Labels: map[string]string{"gpu": "a100", "zone": "rack1"}, CreationTimestamp: &started},
			Spec:       v1alpha1.NodeSpec{MaxMembers: 8, GatewayURL: "http://10.0.0.2:8080/mcp"},
			Status: v1alpha1.NodeStatus{Members: 3, FleetdVersion: "v0.9.0", Herdr: v1alpha1.NodeHerdr{Version: "0.7.1", Protocol: 22, Reachable: true, Since: &since},
				Conditions: ready(v1alpha1.ConditionTrue, v1alpha1.ReasonNodeReady, "registered; herdr answers")},
		},
		&v1alpha1.Node{
			ObjectMeta: v1alpha1.ObjectMeta{Name: "laptop", CreationTimestamp: &started},
			Spec:       v1alpha1.NodeSpec{GatewayURL: "http://127.0.0.1:8080/mcp"},
			Status: v1alpha1.NodeStatus{Members: 1, Herdr: v1alpha1.NodeHerdr{Version: "0.7.0", Protocol: 22},
				Conditions: ready(v1alpha1.ConditionFalse, v1alpha1.ReasonHerdrUnavailable, "registered, but its herdr does not answer")},
		},
	}
}

func TestPrintNodes(t *testing.T) {
	for _, tt := range []struct {
		name, output string
		nodes        []Object
	}{
		{"table", "", sampleNodes()},
		{"wide", "wide", sampleNodes()},
		{"empty", "", nil},
		{"name", "name", sampleNodes()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := (Printer{Kind: v1alpha1.KindNode, Plural: "nodes", Format: Format{name: tt.output}, Now: printNow}).PrintList(&buf, tt.nodes); err != nil {
				t.Fatal(err)
			}
			golden(t, "get-nodes-"+tt.name+".golden", buf.Bytes())
		})
	}
}

func TestDescribeNode(t *testing.T) {
	var buf bytes.Buffer
	if err := DescribeNode(&buf, sampleNodes()[0].(*v1alpha1.Node), printNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "describe-node.golden", buf.Bytes())
}
