package multihost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// waitLeader returns the etcd member leading cluster, once the running
// members agree on one (within 10 s); other than not, when not is 0 or
// more.
func waitLeader(t testing.TB, cluster *etcdtest.Cluster, not int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lead, err := cluster.Leader()
		if err == nil && lead != not {
			return lead
		}
		if time.Now().After(deadline) {
			t.Fatalf("no etcd leader (other than member %d) within 10 s: %d, %v", not, lead, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three nodes, each on its own herdr, with every etcd member in their
// --etcd-endpoints; the etcd leader goes down (another is elected) and the
// fleet keeps working: a Member applied through one node's REST API is
// placed and runs Ready on its node, a Member deleted through another
// node's has its pane closed. With the etcd member back nothing that was
// running was recreated: the same panes, no restarts, and the only pane
// created anywhere is the new Member's.
func TestFleet_OneEtcdMemberDownKeepsTheFleetWorking(t *testing.T) {
	t.Parallel()
	own := ownCluster(t)
	// etcd's own request timeout, not the tests' 1 s: this test waits for
	// no failure, and a write that took over a second on a loaded machine
	// (four test packages on two cores) failed its set-up with a 503.
	f := newHostFleet(t, "/fleet-member-down", []string{"a", "b", "c"}, &hostOptions{Validate: true, Cluster: own, RequestTimeout: etcdstore.DefaultRequestTimeout})
	a, b := f.host("a").running(), f.host("b").running()
	for _, name := range []string{"one", "two", "three"} {
		a.apply(t, name)
	}
	before := f.waitConverged("one", "two", "three")
	mark := map[string]int{}
	for _, h := range f.hosts {
		mark[h.name] = h.mark()
	}

	leader := waitLeader(t, own, -1)
	own.Stop(leader)
	next := waitLeader(t, own, leader)
	t.Logf("etcd member %d (the leader) stopped; member %d leads now", leader, next)

	a.apply(t, "during")
	during := f.waitConverged("one", "two", "three", "during")
	b.remove(t, "two")
	f.waitConverged("one", "three", "during")
	if panes := f.host(before.ready["two"][0].Host).panes()["two"]; len(panes) != 0 {
		t.Errorf("two's panes after its delete: %v", panes)
	}

	if err := own.Restart(leader); err != nil {
		t.Fatal(err)
	}
	// A write with every member back goes through too.
	b.apply(t, "after")
	after := f.waitConverged("one", "three", "during", "after")
	for _, name := range []string{"one", "three"} {
		if diff := cmp.Diff(before.ready[name], after.ready[name]); diff != "" {
			t.Errorf("%s across the etcd member's outage (-before +after):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(during.ready["during"], after.ready["during"]); diff != "" {
		t.Errorf("during once the etcd member is back (-while down +after):\n%s", diff)
	}
	var created []string
	for _, h := range f.hosts {
		for range h.tabsCreatedSince(mark[h.name]) {
			created = append(created, h.name)
		}
	}
	want := []string{during.ready["during"][0].Host, after.ready["after"][0].Host}
	if !equalSet(created, want...) {
		t.Errorf("tabs created since the outage began, by host: %v, want only during's and after's (%v)", created, want)
	}
}

// EtcdConfig.Client is applied to the node's etcd client: interceptors it
// adds see the node register (a lease granted, its key written under it
// in a transaction) and watch the fleet — what BenchmarkFleetIdleEtcd
// counts.
func TestEtcdConfig_ClientHookSeesTheNodesRequests(t *testing.T) {
	t.Parallel()
	counters := &etcdCounters{}
	f := newHostFleet(t, "/fleet-hook", []string{"a"}, &hostOptions{Client: counters.hook})
	f.waitAllNodesReady(t)
	got := counters.sum()
	for _, method := range []string{"LeaseGrant", "Txn", "Range", "Watch"} {
		if got[method] == 0 {
			t.Errorf("no %s counted at the node's client; counted %v", method, got)
		}
	}
}
