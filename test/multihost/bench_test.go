package multihost

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
)

// The fleet benchmarks' knobs (go test -args; BENCHARGS in make, shared
// with test/bench, so each flag here has a name of its own there).
var (
	fleetMembers = flag.Int("fleet-members", 100, "members per node of BenchmarkFleetConvergence (one node with N, three with 3N)")
	lostTTL      = flag.Duration("lost-ttl", session.DefaultTTL, "node lease TTL of BenchmarkFleetNodeLost")
	lostRuns     = flag.Int("lost-runs", 3, "kills of BenchmarkFleetNodeLost")
	idleSizes    = flag.String("idle-sizes", "10,100", "fleet sizes (members over three nodes) of BenchmarkFleetIdleEtcd; the first is the baseline")
	idleWindow   = flag.Duration("idle-window", 30*time.Second, "how long BenchmarkFleetIdleEtcd counts an idle fleet's etcd requests")
)

// memberValue is a free Member as a value in etcd.
func memberValue(name string) string {
	return `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"` + name + `"},"spec":{"profile":"claude"}}`
}

// writersPer100 is how many writers putMembers runs per 100 members: a
// fleet of more members gets its members as fast per member, as three
// one-node fleets writing their own would (BenchmarkFleetConvergence's
// separate-wall-ms).
const writersPer100 = 16

// putMembers writes n free Members m0000… under the fleet's prefix,
// writersPer100 at a time per 100 of them (16 at least).
func (f *hostFleet) putMembers(tb testing.TB, cli *clientv3.Client, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range max(writersPer100, (n*writersPer100+99)/100) {
		wg.Go(func() {
			for i := range next {
				name := fmt.Sprintf("m%04d", i)
				if _, err := cli.Put(context.Background(), f.prefix+"/members/"+name, memberValue(name)); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// untilNodes reads the registrations in the first host's GET /nodes
// until cond holds for them, for at most limit.
func (f *hostFleet) untilNodes(tb testing.TB, what string, limit time.Duration, cond func([]v1alpha1.Node) bool) {
	tb.Helper()
	untilListed(tb, f.hosts[0].running(), "/nodes", what, limit, cond)
}

// untilMembers reads the first host's GET /members (the fleet as it
// shows it: its own members and the statuses other nodes publish) until
// cond holds, for at most limit.
func (f *hostFleet) untilMembers(tb testing.TB, what string, limit time.Duration, cond func([]v1alpha1.Member) bool) {
	tb.Helper()
	untilListed(tb, f.hosts[0].running(), "/members", what, limit, cond)
}

// waitAllNodesReady waits until every host's registration is Ready in the
// first host's view.
func (f *hostFleet) waitAllNodesReady(tb testing.TB) {
	tb.Helper()
	f.untilNodes(tb, "all Ready", 30*time.Second, func(nodes []v1alpha1.Node) bool {
		ready := 0
		for _, n := range nodes {
			if n.ReadyCondition().Status == v1alpha1.ConditionTrue {
				ready++
			}
		}
		return ready == len(f.hosts)
	})
}

// waitReadyCount waits, woken by every status change of every node, until
// n members are Ready over the fleet's running nodes, and returns how many
// each runs.
func (f *hostFleet) waitReadyCount(tb testing.TB, n int, limit time.Duration) []int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	hosts := f.up()
	counts := make([]atomic.Int64, len(hosts))
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, h := range hosts {
		wg.Go(func() {
			_ = h.running().info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
				c := 0
				for _, m := range ms {
					if m.Status.Phase == v1alpha1.PhaseReady {
						c++
					}
				}
				counts[i].Store(int64(c))
				select {
				case changed <- struct{}{}:
				default:
				}
				return false
			})
		})
	}
	for {
		total := 0
		per := make([]int, len(hosts))
		for i := range counts {
			per[i] = int(counts[i].Load())
			total += per[i]
		}
		if total >= n {
			return per
		}
		select {
		case <-changed:
		case <-ctx.Done():
			tb.Fatalf("%d of %d members Ready within %s (per node %v)", total, n, limit, per)
		}
	}
}

// BenchmarkFleetConvergence: the wall time from writing the Members into
// etcd (16 writers per 100: putMembers) until every one is Ready on its node, for 3×N members
// over three nodes against N members on one node (-fleet-members N, 100 by
// default), in the same run on the same etcd (wall-ms; target ≤ 1.5×).
// The three nodes share this machine's cores and disk, which separate
// machines would not: separate-wall-ms is three one-node fleets of N
// converging at the same time on it, the same load without a fleet, so
// that wall-ms ÷ separate-wall-ms is what the fleet itself costs. The etcd
// requests per member, by method, are every node's, counted at its
// client.
func BenchmarkFleetConvergence(b *testing.B) {
	n := *fleetMembers
	type run struct {
		took, bound time.Duration
		per         []int
		// etcd requests of the whole fleet (every node's client) from the
		// first write until every member was Ready, per member, by method
		reqs map[string]float64
		// the mean time of a Txn (the scheduler's bindings) in that window
		txn time.Duration
	}
	measure := func(nodes []string, members int) run {
		counters := &etcdCounters{}
		f := newHostFleet(b, "/bench-converge", nodes, &hostOptions{Client: counters.hook})
		f.waitAllNodesReady(b)
		cli := etcdClient(b)
		before, tookBefore := counters.sum(), counters.took()
		start := time.Now()
		bound := make(chan time.Duration, 1)
		go func() { bound <- f.waitBound(cli, members, start) }()
		f.putMembers(b, cli, members)
		r := run{per: f.waitReadyCount(b, members, 5*time.Minute)}
		r.took = time.Since(start)
		r.bound = <-bound
		r.reqs = map[string]float64{}
		after := counters.sum()
		for m, c := range after {
			r.reqs[m] = float64(c-before[m]) / float64(members)
		}
		if txns := after["Txn"] - before["Txn"]; txns > 0 {
			r.txn = (counters.took()["Txn"] - tookBefore["Txn"]) / time.Duration(txns)
		}
		for _, h := range f.hosts {
			h.stop()
		}
		return r
	}
	// separate: three one-node fleets (prefixes of their own) converging
	// n members each at the same time, on the same machine — the same
	// load on the CPU and the disk as the three-node fleet, without the
	// fleet: no shared scheduler, no other node's members in a node's
	// watch.
	separate := func() time.Duration {
		var fleets []*hostFleet
		for _, name := range []string{"a", "b", "c"} {
			f := newHostFleet(b, "/bench-separate", []string{name}, nil)
			f.waitAllNodesReady(b)
			fleets = append(fleets, f)
		}
		cli := etcdClient(b)
		start := time.Now()
		var wg sync.WaitGroup
		for _, f := range fleets {
			wg.Go(func() {
				f.putMembers(b, cli, n)
				f.waitReadyCount(b, n, 5*time.Minute)
			})
		}
		wg.Wait()
		took := time.Since(start)
		for _, f := range fleets {
			for _, h := range f.hosts {
				h.stop()
			}
		}
		return took
	}
	for range b.N {
		one := measure([]string{"solo"}, n)
		three := measure([]string{"a", "b", "c"}, 3*n)
		apart := separate()
		reportPair(b, "wall-ms", ms(three.took), ms(one.took))
		reportPair(b, "separate-wall-ms", ms(apart), ms(one.took))
		// The figure the target is set on: the fleet against the same
		// load without it (the rows above are against the one-node fleet).
		reportPair(b, "wall-vs-separate-ms", ms(three.took), ms(apart))
		reportPair(b, "bound-ms", ms(three.bound), ms(one.bound))
		reportPair(b, "txn-ms", ms(three.txn), ms(one.txn))
		b.ReportMetric(float64(slices.Min(three.per)), "members-min/node")
		b.ReportMetric(float64(slices.Max(three.per)), "members-max/node")
		for _, m := range []string{"Txn", "Put", "Range", "Watch"} {
			reportPair(b, "etcd:"+m+"/member", three.reqs[m], one.reqs[m])
		}
	}
}

// waitBound polls etcd (every 5 ms, for at most 5 minutes) until n
// members are bound to a node, and returns how long after start that was
// (0 if never).
func (f *hostFleet) waitBound(cli *clientv3.Client, n int, start time.Time) time.Duration {
	deadline := start.Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := cli.Get(context.Background(), f.prefix+"/bindings/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count >= int64(n) {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// etcdCounters hands each node started an etcdCounter of its own.
type etcdCounters struct {
	mu  sync.Mutex
	all []*etcdCounter
}

func (cs *etcdCounters) hook(string) func(*clientv3.Config) {
	c := newEtcdCounter()
	cs.mu.Lock()
	cs.all = append(cs.all, c)
	cs.mu.Unlock()
	return c.hook
}

// sum is every node's requests so far, by method (its last path element).
func (cs *etcdCounters) sum() map[string]int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := map[string]int{}
	for _, c := range cs.all {
		sent, _ := c.snapshot()
		for m, n := range sent {
			out[m[strings.LastIndex(m, "/")+1:]] += n
		}
	}
	return out
}

// took is every node's time in unary calls so far, by method.
func (cs *etcdCounters) took() map[string]time.Duration {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := map[string]time.Duration{}
	for _, c := range cs.all {
		c.mu.Lock()
		for m, d := range c.took {
			out[m[strings.LastIndex(m, "/")+1:]] += d
		}
		c.mu.Unlock()
	}
	return out
}

// BenchmarkFleetNodeLost: node a (one member) is killed — cut off etcd,
// then stopped, so its lease is not revoked — and the delay from the cut
// until its registration is gone from etcd (gone-ms), until node b's GET
// /nodes shows it NotReady NodeLost (node-lost-ms) and until b's GET
// /members shows its member NodeLost (member-lost-ms), each the worst of
// -lost-runs kills, against the target of the lease TTL + 1 s
// (-lost-ttl, fleetd's default 10 s).
func BenchmarkFleetNodeLost(b *testing.B) {
	for range b.N {
		f := newHostFleet(b, "/bench-lost", []string{"a", "b"}, &hostOptions{NodeTTL: *lostTTL})
		ha, hb := f.host("a"), f.host("b")
		f.waitAllNodesReady(b)
		if code, resp := hb.running().do(b, "POST", "/members", pinned("lost", "a")); code != http.StatusCreated {
			b.Fatalf("POST /members = %d %s", code, resp)
		}
		f.waitReadyCount(b, 1, time.Minute)
		cli := etcdClient(b)
		var gone, nodeLost, memberLost time.Duration
		for range *lostRuns {
			g, nl, ml := measureNodeLost(b, cli, f, ha, hb)
			gone, nodeLost, memberLost = max(gone, g), max(nodeLost, nl), max(memberLost, ml)
			ha.start()
			f.waitAllNodesReady(b)
			f.waitReadyCount(b, 1, time.Minute)
		}
		target := ms(*lostTTL + time.Second)
		reportPair(b, "gone-ms", ms(gone), target)
		reportPair(b, "node-lost-ms", ms(nodeLost), target)
		reportPair(b, "member-lost-ms", ms(memberLost), target)
	}
}

// measureNodeLost kills a and returns the three delays of
// BenchmarkFleetNodeLost, each observed by its own goroutine, started
// before the kill.
func measureNodeLost(b *testing.B, cli *clientv3.Client, f *hostFleet, a, other *fleetHost) (gone, nodeLost, memberLost time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), *lostTTL+time.Minute)
	defer cancel()
	key := f.prefix + "/nodes/" + a.name
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		b.Fatalf("a's registration: %v %v", resp, err)
	}
	watch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	n := other.running()
	var cut time.Time
	var cutMu sync.Mutex
	since := func() time.Duration { cutMu.Lock(); defer cutMu.Unlock(); return time.Since(cut) }
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		<-started
		for wr := range watch {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					gone = since()
					return
				}
			}
		}
	})
	poll := func(path string, lost func(string) bool, out *time.Duration) {
		wg.Go(func() {
			<-started
			for ctx.Err() == nil {
				if _, body := n.do(b, "GET", path, ""); lost(body) {
					*out = since()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	poll("/nodes/"+a.name, func(body string) bool {
		var node v1alpha1.Node
		return json.Unmarshal([]byte(body), &node) == nil && node.ReadyCondition().Reason == v1alpha1.ReasonNodeLost
	}, &nodeLost)
	poll("/members/lost", func(body string) bool {
		var m v1alpha1.Member
		return json.Unmarshal([]byte(body), &m) == nil && readyOf(m).Reason == v1alpha1.ReasonNodeLost
	}, &memberLost)
	cutMu.Lock()
	cut = time.Now()
	cutMu.Unlock()
	close(started)
	a.kill()
	wg.Wait()
	if ctx.Err() != nil {
		b.Fatalf("node a's loss not seen within %s: gone %s, node lost %s, member lost %s", *lostTTL+time.Minute, gone, nodeLost, memberLost)
	}
	return gone, nodeLost, memberLost
}

// etcdCounter counts one node's requests to etcd at its client: unary
// calls by method, and messages sent on streams (a lease keep-alive, a
// watch request) by method; messages received on streams (watch events,
// keep-alive answers) apart.
type etcdCounter struct {
	mu       sync.Mutex
	sent     map[string]int
	took     map[string]time.Duration // unary calls' time, by method
	received int
}

func newEtcdCounter() *etcdCounter {
	return &etcdCounter{sent: map[string]int{}, took: map[string]time.Duration{}}
}

func (c *etcdCounter) add(method string) {
	c.mu.Lock()
	c.sent[method]++
	c.mu.Unlock()
}

// hook is the node's EtcdConfig.Client: interceptors that count.
func (c *etcdCounter) hook(cfg *clientv3.Config) {
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			start := time.Now()
			err := invoker(ctx, method, req, reply, cc, opts...)
			c.mu.Lock()
			c.took[method] += time.Since(start)
			c.mu.Unlock()
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countedStream{ClientStream: s, c: c, method: method}, nil
		}))
}

// snapshot returns the counts so far.
func (c *etcdCounter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.sent {
		out[k] = v
	}
	return out, c.received
}

type countedStream struct {
	grpc.ClientStream
	c      *etcdCounter
	method string
}

func (s *countedStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.c.mu.Lock()
		s.c.received++
		s.c.mu.Unlock()
	}
	return err
}

// BenchmarkFleetIdleEtcd: the etcd requests each node of an idle,
// converged three-node fleet makes per minute, counted at its client
// (unary calls and stream messages sent, by method) over -idle-window,
// for the fleet sizes of -idle-sizes; the first size is the baseline of
// the others. The target is O(1): the figure does not grow with the
// members.
func BenchmarkFleetIdleEtcd(b *testing.B) {
	var sizes []int
	for _, s := range strings.Split(*idleSizes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n <= 0 {
			b.Fatalf("bad -idle-sizes entry %q", s)
		}
		sizes = append(sizes, n)
	}
	type idle struct {
		perMin   float64
		byMethod map[string]float64
		recvMin  float64
	}
	measure := func(members int) idle {
		counters := map[string]*etcdCounter{}
		var mu sync.Mutex
		f := newHostFleet(b, "/bench-idle", []string{"a", "b", "c"}, &hostOptions{Client: func(node string) func(*clientv3.Config) {
			mu.Lock()
			defer mu.Unlock()
			c := newEtcdCounter()
			counters[node] = c
			return c.hook
		}})
		f.waitAllNodesReady(b)
		f.putMembers(b, etcdClient(b), members)
		f.waitReadyCount(b, members, 5*time.Minute)
		f.waitQuiet(b, members)
		before := map[string]map[string]int{}
		recvBefore := map[string]int{}
		for node, c := range counters {
			before[node], recvBefore[node] = c.snapshot()
		}
		time.Sleep(*idleWindow) // the measured window: the fleet is left alone
		perMinute := float64(time.Minute) / float64(*idleWindow)
		out := idle{byMethod: map[string]float64{}}
		for node, c := range counters {
			sent, recv := c.snapshot()
			for method, n := range sent {
				d := float64(n-before[node][method]) * perMinute / float64(len(counters))
				out.perMin += d
				out.byMethod[method[strings.LastIndex(method, "/")+1:]] += d
			}
			out.recvMin += float64(recv-recvBefore[node]) * perMinute / float64(len(counters))
		}
		for _, h := range f.hosts {
			h.stop()
		}
		return out
	}
	for range b.N {
		base := measure(sizes[0])
		for _, n := range sizes[1:] {
			got := measure(n)
			reportPair(b, fmt.Sprintf("members=%d/req/node/min", n), got.perMin, base.perMin)
			reportPair(b, fmt.Sprintf("members=%d/recv/node/min", n), got.recvMin, base.recvMin)
			methods := map[string]bool{}
			for m := range got.byMethod {
				methods[m] = true
			}
			for m := range base.byMethod {
				methods[m] = true
			}
			for m := range methods {
				if got.byMethod[m] != 0 || base.byMethod[m] != 0 {
					reportPair(b, fmt.Sprintf("members=%d/req:%s/node/min", n, m), got.byMethod[m], base.byMethod[m])
				}
			}
		}
	}
}

// waitQuiet waits until a fleet converging n members is done writing:
// the nodes' registrations count them, and every node's statuses are
// published (the first node shows every member Ready with its agent idle,
// most of them from the statuses the others publish; until then the
// publishers are still writing what convergence changed).
func (f *hostFleet) waitQuiet(tb testing.TB, n int) {
	tb.Helper()
	f.waitRegisteredMembers(tb, n)
	f.untilMembers(tb, fmt.Sprintf("%d members Ready and idle", n), time.Minute, func(ms []v1alpha1.Member) bool {
		c := 0
		for _, m := range ms {
			if m.Status.Phase == v1alpha1.PhaseReady && m.Status.AgentStatus == "idle" && readyOf(m).Status == v1alpha1.ConditionTrue {
				c++
			}
		}
		return c == n
	})
}

// waitRegisteredMembers waits until the nodes' registrations count n
// members in all: the last write a converging node makes.
func (f *hostFleet) waitRegisteredMembers(tb testing.TB, n int) {
	tb.Helper()
	f.untilNodes(tb, fmt.Sprintf("counting %d members", n), time.Minute, func(nodes []v1alpha1.Node) bool {
		total := 0
		for _, node := range nodes {
			total += node.Status.Members
		}
		return total == n
	})
}

// reportPair reports a figure and its baseline (test/bench's convention:
// its benchtable shows them side by side with their ratio).
func reportPair(b *testing.B, unit string, v, base float64) {
	b.ReportMetric(v, unit)
	b.ReportMetric(base, "base-"+unit)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
