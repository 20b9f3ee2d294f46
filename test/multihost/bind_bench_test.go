package multihost

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

var bindMembers = flag.Int("bind-members", 300, "members of BenchmarkFleetBind, written at once over three nodes")

// bindWriteBatch is how many Members BenchmarkFleetBind writes in one
// transaction (etcd's default --max-txn-ops is 128).
const bindWriteBatch = 100

// BenchmarkFleetBind: the scheduler's own throughput. Three nodes
// registered, then -bind-members Members (300) are written in
// transactions of 100, so that the writes are not what is measured (as
// FleetConvergence's writers of one member each are, on a loaded
// machine); bind-members/s is the members bound per second from the
// first write until every member has a binding (waitBound: polled every
// 5 ms), written-ms how long the writes took, and bound-after-write-ms
// how long the last binding came after the last write; txns and txn-ms
// are the nodes' transactions meanwhile (the bindings, the statuses
// published) and their mean time.
func BenchmarkFleetBind(b *testing.B) {
	n := *bindMembers
	for range b.N {
		counters := &etcdCounters{}
		f := newHostFleet(b, "/bench-bind", []string{"a", "b", "c"}, &hostOptions{Client: counters.hook})
		f.waitAllNodesReady(b)
		cli := etcdClient(b)
		txns, txnTook := counters.sum()["Txn"], counters.took()["Txn"]
		start := time.Now()
		bound := make(chan time.Duration, 1)
		go func() { bound <- f.waitBound(cli, n, start) }()
		for first := 0; first < n; first += bindWriteBatch {
			var ops []clientv3.Op
			for i := first; i < min(first+bindWriteBatch, n); i++ {
				name := fmt.Sprintf("m%04d", i)
				ops = append(ops, clientv3.OpPut(f.prefix+"/members/"+name, memberValue(name)))
			}
			if _, err := cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
		}
		written := time.Since(start)
		took := <-bound
		if took == 0 {
			b.Fatalf("%d members not bound within 5 minutes", n)
		}
		txns, txnTook = counters.sum()["Txn"]-txns, counters.took()["Txn"]-txnTook
		for _, h := range f.hosts {
			h.stop()
		}
		if txns > 0 {
			b.ReportMetric(ms(txnTook/time.Duration(txns)), "txn-ms")
		}
		b.ReportMetric(float64(txns), "txns")
		b.ReportMetric(float64(n)/took.Seconds(), "bind-members/s")
		b.ReportMetric(ms(took), "bound-ms")
		b.ReportMetric(ms(written), "written-ms")
		b.ReportMetric(ms(took-written), "bound-after-write-ms")
	}
}
