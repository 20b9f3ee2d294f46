package multihost

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/mcp"
)

// readyOn reports whether the named member runs (Ready) on the node whose
// view this is.
func readyOn(name string) func([]v1alpha1.Member) bool { return phaseOf(name, v1alpha1.PhaseReady) }

// Two fleetd nodes on one prefix, each on its own herdr: members written
// through either node are placed by spec.nodeName, spec.nodeSelector or
// spread, each runs on its node only, and GET /members on one node shows
// the whole fleet with each member's node; a member no node can take is
// Ready=False Unschedulable, saying why.
func TestPlacement_TwoNodesRunTheirOwnMembers(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-two")
	putProfile(t, prefix)
	laptop := startNodeWith(t, &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "laptop", NodeLabels: map[string]string{"kind": "laptop"}})
	buildbox := startNodeWith(t, &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "buildbox", NodeLabels: map[string]string{"gpu": "a100"}})
	for _, n := range []*fleetNode{laptop, buildbox} {
		n.untilNode(t, "laptop", "Ready", nodeReady)
		n.untilNode(t, "buildbox", "Ready", nodeReady)
	}

	for _, body := range []string{
		pinned("pinned", "laptop"),
		"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: trainer}\nspec: {profile: claude, nodeSelector: {gpu: a100}}\n",
		"apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: nowhere}\nspec: {profile: claude, nodeSelector: {gpu: h100}}\n",
	} {
		if code, resp := laptop.do(t, "POST", "/members", body); code != http.StatusCreated {
			t.Fatalf("POST /members = %d %s", code, resp)
		}
	}
	laptop.waitFor(t, "pinned ready on laptop", readyOn("pinned"))
	buildbox.waitFor(t, "trainer ready on buildbox", readyOn("trainer"))

	// Each herdr holds only its own node's agents.
	if got := agentNames(laptop); !equalSet(got, "pinned") {
		t.Errorf("laptop's herdr runs %v, want pinned only", got)
	}
	if got := agentNames(buildbox); !equalSet(got, "trainer") {
		t.Errorf("buildbox's herdr runs %v, want trainer only", got)
	}

	// GET /members on either node: the whole fleet, each with its node.
	code, body := buildbox.do(t, "GET", "/members", "")
	var list mcp.MemberList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /members = %d %s", code, body)
	}
	got := map[string]v1alpha1.Member{}
	for _, m := range list.Items {
		got[m.Name] = m
	}
	if got["trainer"].Status.NodeName != "buildbox" || got["trainer"].Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("trainer on buildbox's view: %+v", got["trainer"].Status)
	}
	if got["pinned"].Status.NodeName != "laptop" {
		t.Errorf("pinned on buildbox's view: %+v, want node laptop", got["pinned"].Status)
	}
	// …and, once laptop published it, the status laptop keeps of it.
	buildbox.untilMember(t, "pinned", "Ready on laptop", func(m v1alpha1.Member) bool {
		return m.Status.NodeName == "laptop" && m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != ""
	})
	// The scheduler's verdict on nowhere is written once it has seen the
	// member, not necessarily before trainer and pinned are ready.
	buildbox.untilMember(t, "nowhere", "Ready=False Unschedulable saying no node matches", func(m v1alpha1.Member) bool {
		c := readyOf(m)
		return m.Status.NodeName == "" && c.Status == v1alpha1.ConditionFalse && c.Reason == v1alpha1.ReasonUnschedulable &&
			c.Message == "0/2 nodes are available: 2 do not match nodeSelector gpu=h100."
	})

	// Spread: two free members go one to each node (each has one now).
	for _, name := range []string{"free-a", "free-b"} {
		if code, resp := laptop.do(t, "POST", "/members", `{"profile":"claude","name":"`+name+`"}`); code != http.StatusCreated {
			t.Fatalf("POST /members = %d %s", code, resp)
		}
	}
	laptop.waitFor(t, "one free member on laptop", func(ms []v1alpha1.Member) bool { return countReady(ms, "free-a", "free-b") == 1 })
	buildbox.waitFor(t, "one free member on buildbox", func(ms []v1alpha1.Member) bool { return countReady(ms, "free-a", "free-b") == 1 })

	// The nodes count their members.
	laptop.untilNode(t, "laptop", "running 2", func(n v1alpha1.Node) bool { return n.Status.Members == 2 })
	laptop.untilNode(t, "buildbox", "running 2", func(n v1alpha1.Node) bool { return n.Status.Members == 2 })
}

func readyOf(m v1alpha1.Member) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	return v1alpha1.Condition{}
}

// countReady counts the named members that are Ready in a node's own view
// (the controllers': only what the node runs).
func countReady(ms []v1alpha1.Member, names ...string) int {
	n := 0
	for _, m := range ms {
		for _, name := range names {
			if m.Name == name && m.Status.Phase == v1alpha1.PhaseReady {
				n++
			}
		}
	}
	return n
}

// agentNames are the agents the node's simulated herdr runs.
func agentNames(n *fleetNode) []string {
	var names []string
	for _, p := range n.info.Sim.Panes() {
		if p.AgentName != "" {
			names = append(names, p.AgentName)
		}
	}
	return names
}

func equalSet(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, g := range got {
		seen[g] = true
	}
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}
