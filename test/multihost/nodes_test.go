package multihost

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/daemon"
)

// untilListed reads GET path on n (a list: /members or /nodes) every
// 20 ms until cond holds for its items, for at most limit, and returns
// them. What a node serves comes through its etcd watch asynchronously,
// so the read is repeated; the failure shows the last body read.
func untilListed[T any](tb testing.TB, n *fleetNode, path, what string, limit time.Duration, cond func([]T) bool) []T {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		code, body := n.do(tb, "GET", path, "")
		var list struct {
			Items []T `json:"items"`
		}
		if code == http.StatusOK && json.Unmarshal([]byte(body), &list) == nil && cond(list.Items) {
			return list.Items
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not %s within %s; GET %s = %d %.2000s", path, what, limit, path, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// untilNamed is untilListed for one named item of the list: it returns
// the first item called name for which cond holds (within 30 s).
func untilNamed[T any](tb testing.TB, n *fleetNode, path, name, what string, nameOf func(T) string, cond func(T) bool) T {
	tb.Helper()
	var found T
	untilListed(tb, n, path, name+" "+what, 30*time.Second, func(items []T) bool {
		for _, it := range items {
			if nameOf(it) == name && cond(it) {
				found = it
				return true
			}
		}
		return false
	})
	return found
}

// untilNode reads GET /nodes until cond holds for the named node.
func (n *fleetNode) untilNode(t testing.TB, name, what string, cond func(v1alpha1.Node) bool) v1alpha1.Node {
	t.Helper()
	return untilNamed(t, n, "/nodes", name, what, func(node v1alpha1.Node) string { return node.Name }, cond)
}

// A node registers its labels, capacity and gateway, and keeps its herdr
// (version, reachability) and member count current; GET /nodes serves it
// from the watch, Ready while its herdr answers.
func TestNodes_RegistrationShowsLabelsCapacityHerdrAndMembers(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-nodes")
	putProfile(t, prefix)
	n := startNodeWith(t, &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "laptop",
		NodeLabels: map[string]string{"os": "linux", "zone": "home"}, MaxMembers: 5})

	got := n.untilNode(t, "laptop", "Ready", func(node v1alpha1.Node) bool {
		return node.ReadyCondition().Status == v1alpha1.ConditionTrue
	})
	if got.Labels["os"] != "linux" || got.Labels["zone"] != "home" || got.Spec.MaxMembers != 5 || got.Spec.GatewayURL != n.info.MCPURL {
		t.Errorf("node %+v, want labels os=linux,zone=home, maxMembers 5, gateway %s", got, n.info.MCPURL)
	}
	if !got.Status.Herdr.Reachable || got.Status.Herdr.Version == "" || got.Status.Herdr.Protocol == 0 {
		t.Errorf("node herdr %+v, want the simulated herdr's version and protocol, reachable", got.Status.Herdr)
	}

	if code, body := n.do(t, "POST", "/members?wait=true", `{"profile":"claude","name":"coder"}`); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, body)
	}
	n.untilNode(t, "laptop", "running 1 member", func(node v1alpha1.Node) bool { return node.Status.Members == 1 })

	// The simulated herdr goes away: the node is NotReady (HerdrUnavailable);
	// it comes back: Ready again.
	if err := n.info.Sim.Stop(); err != nil {
		t.Fatal(err)
	}
	down := n.untilNode(t, "laptop", "NotReady", func(node v1alpha1.Node) bool {
		return node.ReadyCondition().Status == v1alpha1.ConditionFalse
	})
	if c := down.ReadyCondition(); c.Reason != v1alpha1.ReasonHerdrUnavailable || down.Status.Herdr.Reachable {
		t.Errorf("after herdr stopped: %+v, want Ready=False HerdrUnavailable", c)
	}

	if err := n.info.Sim.Restart(); err != nil {
		t.Fatal(err)
	}
	n.untilNode(t, "laptop", "Ready again", func(node v1alpha1.Node) bool {
		return node.ReadyCondition().Status == v1alpha1.ConditionTrue && node.Status.Herdr.Reachable
	})

	code, body := n.do(t, "GET", "/nodes/laptop", "")
	var one v1alpha1.Node
	if err := json.Unmarshal([]byte(body), &one); code != http.StatusOK || err != nil || one.Name != "laptop" || one.Kind != v1alpha1.KindNode {
		t.Errorf("GET /nodes/laptop = %d %s", code, body)
	}
}
