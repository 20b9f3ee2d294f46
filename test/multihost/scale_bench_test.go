package multihost

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFleetScale's knobs.
var (
	scaleNodes   = flag.String("scale-nodes", "3,10,30", "fleet sizes (nodes) of BenchmarkFleetScale; the first is the baseline")
	scaleMembers = flag.Int("scale-members", 50, "members per node of BenchmarkFleetScale")
	scaleIdle    = flag.Duration("scale-idle", 5*time.Second, "how long BenchmarkFleetScale counts a converged fleet's etcd requests")
)

// scaleRun is one fleet size's figures in BenchmarkFleetScale.
type scaleRun struct {
	nodes, members int
	took, bound    time.Duration
	written        time.Duration // until the last Member was written
	per            []int         // members Ready on each node
	convergingRate float64       // etcd requests per second, every node's, first write to all Ready
	idleRate       float64       // the same over -scale-idle once converged
	heapPerNode    float64       // MiB: the process's live heap growth per node (node and its simulated herdr)
	elections      int64         // etcd raft term changes while converging: a starved machine loses its leaders
}

// BenchmarkFleetScale: N simulated nodes — each an in-process fleetd node
// next to a simulated herdr of its own, reaching the package's etcd
// through its proxies — converge -scale-members members each (50), for
// each N of -scale-nodes (3, 10, 30). Per size it reports the wall time
// from writing the Members into etcd until every one is Ready (wall-ms),
// the binding throughput (members bound per second from the first write:
// bind-members/s; written-ms is how long the writers (putMembers) took to write
// them, its floor), the etcd requests per second of the whole fleet while
// converging and over -scale-idle once converged (counted at each node's
// client: unary calls and stream messages sent), and the live heap per
// node after a GC (the process's growth over the fleet's start and
// convergence, divided by N: a node with its fake herdr and 50 members).
// wall-ms and its base are the largest size and the first: the target
// is ≤ 2×.
func BenchmarkFleetScale(b *testing.B) {
	var sizes []int
	for _, s := range strings.Split(*scaleNodes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n <= 0 {
			b.Fatalf("bad -scale-nodes entry %q", s)
		}
		sizes = append(sizes, n)
	}
	for range b.N {
		var runs []scaleRun
		for _, n := range sizes {
			runs = append(runs, measureScale(b, n, n**scaleMembers))
		}
		base, top := runs[0], runs[len(runs)-1]
		reportPair(b, "wall-ms", ms(top.took), ms(base.took))
		reportPair(b, "bind-members/s", float64(top.members)/top.bound.Seconds(), float64(base.members)/base.bound.Seconds())
		for _, r := range runs {
			p := fmt.Sprintf("nodes=%d/", r.nodes)
			b.ReportMetric(ms(r.took), p+"wall-ms")
			b.ReportMetric(ms(r.bound), p+"bound-ms")
			b.ReportMetric(ms(r.written), p+"written-ms")
			b.ReportMetric(float64(r.members)/r.bound.Seconds(), p+"bind-members/s")
			b.ReportMetric(r.convergingRate, p+"etcd-req/s-converging")
			b.ReportMetric(r.idleRate, p+"etcd-req/s-idle")
			b.ReportMetric(r.heapPerNode, p+"heap-MiB/node")
			b.ReportMetric(float64(r.elections), p+"etcd-elections")
			b.ReportMetric(float64(slices.Min(r.per)), p+"members-min/node")
			b.ReportMetric(float64(slices.Max(r.per)), p+"members-max/node")
		}
	}
}

// measureScale starts a fleet of n nodes, converges members over it and
// counts, then stops it.
func measureScale(b *testing.B, n, members int) scaleRun {
	b.Helper()
	heap := func() uint64 {
		runtime.GC()
		var st runtime.MemStats
		runtime.ReadMemStats(&st)
		return st.HeapAlloc
	}
	heapBefore := heap()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%02d", i)
	}
	counters := &etcdCounters{}
	f := newHostFleet(b, "/bench-scale", names, &hostOptions{Client: counters.hook})
	defer func() {
		for _, h := range f.hosts {
			h.stop()
		}
	}()
	f.waitAllNodesReady(b)
	cli := etcdClient(b)
	requests := func() int {
		total := 0
		for _, c := range counters.sum() {
			total += c
		}
		return total
	}
	r := scaleRun{nodes: n, members: members}
	before, term := requests(), raftTerm(b, cli)
	start := time.Now()
	bound := make(chan time.Duration, 1)
	go func() { bound <- f.waitBound(cli, members, start) }()
	f.putMembers(b, cli, members)
	r.written = time.Since(start)
	r.per = f.waitReadyCount(b, members, 5*time.Minute)
	r.took = time.Since(start)
	r.convergingRate = float64(requests()-before) / r.took.Seconds()
	r.elections = raftTerm(b, cli) - term
	if r.bound = <-bound; r.bound == 0 {
		b.Fatalf("%d nodes: %d members not bound within 5 minutes", n, members)
	}
	f.waitQuiet(b, members)
	heapAfter := heap()
	r.heapPerNode = float64(heapAfter-min(heapBefore, heapAfter)) / float64(n) / (1 << 20)
	idleFrom := requests()
	time.Sleep(*scaleIdle) // the measured window: the fleet is left alone
	r.idleRate = float64(requests()-idleFrom) / scaleIdle.Seconds()
	return r
}

// raftTerm is the highest raft term of the package's etcd members: it
// grows with every election.
func raftTerm(b *testing.B, cli *clientv3.Client) int64 {
	b.Helper()
	var term uint64
	for _, ep := range cluster.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil {
			term = max(term, st.RaftTerm)
		}
	}
	return int64(term)
}
