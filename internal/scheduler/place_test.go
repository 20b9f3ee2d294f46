package scheduler

import (
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func TestPlace(t *testing.T) {
	ready := func(name string, max int, labels map[string]string) Node {
		return Node{Name: name, MaxMembers: max, Labels: labels, Ready: true}
	}
	down := Node{Name: "down"}
	gpu := map[string]string{"gpu": "a100"}
	nodes := []Node{ready("a", 0, nil), ready("b", 2, gpu), down}
	spec := func(name string, sel map[string]string) *v1alpha1.Member {
		return &v1alpha1.Member{Spec: v1alpha1.MemberSpec{NodeName: name, NodeSelector: sel}}
	}
	for _, tt := range []struct {
		name    string
		m       *v1alpha1.Member
		nodes   []Node
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
