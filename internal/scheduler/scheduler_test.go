package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// waitLimit bounds every wait for something etcd does.
const waitLimit = 20 * time.Second

var prefixes atomic.Int64

var quiet = slog.New(slog.DiscardHandler)

// fixture is a fleet under a prefix of its own: a client, a store that
// reads it (running until the test ends), and the nodes a scheduler sees.
type fixture struct {
	t      *testing.T
	prefix string
	cli    *clientv3.Client
	st     *etcdstore.Store
	nodes  []Node
}

func newFixture(t *testing.T, nodes ...Node) *fixture {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f := &fixture{t: t, prefix: fmt.Sprintf("/scheduler-test-%d", prefixes.Add(1)), cli: cli, nodes: nodes}
	f.st = f.newStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) newStore() *etcdstore.Store {
	st, err := etcdstore.New(f.cli, &etcdstore.Options{Prefix: f.prefix, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// frozen returns a store that read the fleet once, now, and follows no
// change after it.
func (f *fixture) frozen(t *testing.T) *etcdstore.Store {
	t.Helper()
	st := f.newStore()
	if err := st.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// The fixture is the scheduler's Source: the store's members and
// bindings, its own nodes, nothing lost, no orphans.
func (f *fixture) Fleet() Fleet {
	return Fleet{Assignments: f.st.Assignments(), Nodes: f.nodes, Lost: map[string]time.Time{}}
}
func (f *fixture) Orphans() []Orphan        { return nil }
func (f *fixture) Changed() <-chan struct{} { return f.st.Changed() }
func (f *fixture) WaitBindings(ctx context.Context, rev int64) error {
	return f.st.WaitBindings(ctx, rev)
}
func (f *fixture) BindingsRevision() int64 { return f.st.BindingsRevision() }

// apply writes a Profile claude and members named names.
func (f *fixture) apply(names ...string) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.st.Apply(ctx, &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}}); err != nil {
		f.t.Fatal(err)
	}
	for _, name := range names {
		m := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberSpec{Profile: "claude"}}
		m.SetDefaults()
		if err := f.st.Apply(ctx, m); err != nil {
			f.t.Fatal(err)
		}
	}
}

// leading returns a scheduler leading under a leadership key of the
// test's own (not an election: the test holds the key).
func (f *fixture) leading() *scheduler {
	f.t.Helper()
	leader := f.prefix + "/scheduler/test"
	resp, err := f.cli.Put(context.Background(), leader, "a")
	if err != nil {
		f.t.Fatal(err)
	}
	o := (&Options{Prefix: f.prefix, Clock: clock.Real{}, Logger: quiet}).withDefaults()
	return &scheduler{cli: f.cli, src: f, o: &o, leaderKey: leader, leaderRev: resp.Header.Revision}
}

// bindings returns the test's bindings in etcd by member name, with the
// revisions that wrote them.
func (f *fixture) bindings() map[string]int64 {
	f.t.Helper()
	resp, err := f.cli.Get(context.Background(), f.prefix+"/bindings/", clientv3.WithPrefix())
	if err != nil {
		f.t.Fatal(err)
	}
	got := map[string]int64{}
	for _, kv := range resp.Kvs {
		got[strings.TrimPrefix(string(kv.Key), f.prefix+"/bindings/")] = kv.ModRevision
	}
	return got
}

var nodeA = Node{Name: "a", Ready: true}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%03d", i)
	}
	return out
}

// One pass binds a hundred members in two transactions (batches of
// bindBatch), not one per member.
func TestScheduler_BindsInBatches(t *testing.T) {
	f := newFixture(t, nodeA)
	f.apply(names(100)...)
	s := f.leading()
	if _, err := s.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := f.bindings()
	revs := map[int64]bool{}
	for _, rev := range got {
		revs[rev] = true
	}
	if len(got) != 100 || len(revs) != 2 {
		t.Errorf("%d members bound in %d transactions; want 100 in 2", len(got), len(revs))
	}
}

// A batch with one member changed since it was placed binds all the
// others and not that one; a batch of a scheduler that no longer leads
// binds nothing — whether the batches go one after another, fenced on the
// bindings as counted, or at once.
func TestScheduler_StaleMemberHoldsBackOnlyItself(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			f := newFixture(t, nodeA)
			f.apply(names(140)...)
			s := f.leading()
			ctx := context.Background()
			fl := f.Fleet()
			var ws []bindingWrite
			for _, m := range fl.Members {
				var rev int64
				if _, err := fmt.Sscan(m.ResourceVersion, &rev); err != nil {
					t.Fatal(err)
				}
				ws = append(ws, s.planWrite(&fl, m.Name, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.memberKey(m.Name)), "=", rev)},
					clientv3.OpPut(etcdstore.BindingKey(f.prefix, m.Name), `{"node":"a","memberUID":"`+m.UID+`"}`), nil))
			}
			if len(ws) != 140 {
				t.Fatalf("%d members in the fleet, want 140", len(ws))
			}
			// m017 and m100 (in the first and the second batch) change
			// after they were placed: their fences no longer hold.
			for _, name := range []string{"m017", "m100"} {
				if _, err := f.cli.Put(ctx, f.prefix+"/members/"+name, `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"`+name+`","uid":"another-uid"},"spec":{"profile":"claude"}}`); err != nil {
					t.Fatal(err)
				}
			}

			lost := &scheduler{cli: s.cli, src: s.src, o: s.o, leaderKey: f.prefix + "/scheduler/gone", leaderRev: s.leaderRev, view: s.view}
			if err := lost.commit(ctx, ws, fenced); err != nil {
				t.Fatal(err)
			}
			if got := f.bindings(); len(got) != 0 {
				t.Fatalf("a scheduler that does not lead bound %d members", len(got))
			}

			if err := s.commit(ctx, ws, fenced); err != nil {
				t.Fatal(err)
			}
			got := f.bindings()
			_, ok17 := got["m017"]
			_, ok100 := got["m100"]
			if ok17 || ok100 || len(got) != 138 {
				t.Errorf("bound %d members (m017 among them: %v, m100: %v); want the 138 others", len(got), ok17, ok100)
			}
		})
	}
}

// A pass counts each node's members from a fleet that has seen this
// scheduler's own last bindings: one read before they came back through
// the watch (here a store frozen before them) binds nothing, rather than
// a member created meanwhile to the node they filled.
func TestScheduler_PassWaitsForItsOwnBindings(t *testing.T) {
	f := newFixture(t, Node{Name: "a", MaxMembers: 1, Ready: true})
	f.apply("m000")
	ctx := context.Background()
	before := f.frozen(t) // m000, unbound
	f.apply("a000")
	behind := f.frozen(t) // m000 and a000, not m000's binding to come

	s := f.leading()
	s.o.RequestTimeout = 200 * time.Millisecond
	f.st = before
	if _, err := s.pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.bindings(); len(got) != 1 {
		t.Fatalf("first pass bound %v; want m000 alone (node a takes one member)", got)
	}
	f.st = behind
	if _, err := s.pass(ctx); err == nil {
		t.Error("a pass on a fleet that has not seen the scheduler's last bindings succeeded")
	}
	if got := f.bindings(); len(got) != 1 {
		t.Errorf("bound %v on node a, which takes one member", got)
	}
}

// A scheduler that no longer holds its leadership key writes nothing.
func TestScheduler_WritesOnlyWhileItLeads(t *testing.T) {
	f := newFixture(t, nodeA)
	f.apply("m")
	s := f.leading()
	s.leaderKey, s.leaderRev = f.prefix+"/scheduler/gone", 1
	if _, err := s.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.bindings(); len(got) != 0 {
		t.Errorf("a scheduler without leadership bound %v", got)
	}
}

// Run campaigns under the node's session and, leading, binds what is
// unbound, and again at every change; a second candidate binds nothing
// while the first leads; stopped, the leader resigns at once, so that the
// other takes over without waiting for its lease.
func TestScheduler_RunLeadsUnderTheSessionAndResigns(t *testing.T) {
	f := newFixture(t, nodeA)
	run := func(candidate string) (stop func()) {
		sess := session.New(f.cli, &session.Options{TTL: 30 * time.Second, Logger: quiet})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		go func() { done <- sess.Run(ctx) }()
		go func() {
			done <- Run(ctx, f.cli, sess, f, &Options{Prefix: f.prefix, Candidate: candidate, Logger: quiet})
		}()
		stopped := false
		stop = func() {
			if !stopped {
				stopped = true
				cancel()
				<-done
				<-done
			}
		}
		t.Cleanup(stop)
		return stop
	}
	// until waits for cond, checked at every change under the prefix.
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := f.cli.Watch(wctx, f.prefix+"/", clientv3.WithPrefix())
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.NewTimer(waitLimit)
		defer deadline.Stop()
		for !cond() {
			select {
			case <-events:
			case <-deadline.C:
				t.Fatalf("not %s within %s: %v", what, waitLimit, f.bindings())
			}
		}
	}
	bound := func(name string) func() bool { return func() bool { return f.bindings()[name] != 0 } }
	stopA := run("a")
	f.apply("one")
	until("one bound", bound("one"))
	run("b")
	leader := func() string {
		resp, err := f.cli.Get(context.Background(), f.prefix+"/scheduler/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil || len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	if got := leader(); got != "a" {
		t.Fatalf("leader %q, want a", got)
	}
	start := time.Now()
	stopA()
	until("b leading", func() bool { return leader() == "b" })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("b took %s to lead: a did not resign (its lease is 30 s)", d)
	}
	f.apply("two")
	until("two bound by b", bound("two"))
}

// A binding write etcd took but answered with an error (its answer lost)
// leaves the scheduler not knowing what it wrote; the next pass, from a
// fleet read before those bindings came back (a store frozen before
// them), must not count node a short and bind a member created meanwhile
// to it: --max-members holds. (Before the bindings read were part of every
// write's fence, the second pass bound a000 to the full node.)
func TestScheduler_CapacityHoldsAfterAWriteWhoseAnswerWasLost(t *testing.T) {
	f := newFixture(t, Node{Name: "a", MaxMembers: 1, Ready: true})
	f.apply("m000")
	ctx := context.Background()
	before := f.frozen(t) // m000, unbound
	f.apply("a000")
	behind := f.frozen(t) // m000 and a000, not m000's binding to come

	// The scheduler's client loses the answer of its first binding write.
	var lose atomic.Bool
	lose.Store(true)
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil && strings.HasSuffix(method, "/Txn") && lose.CompareAndSwap(true, false) {
				return status.Error(codes.Unavailable, "the answer was lost")
			}
			return err
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := f.leading()
	s.cli = cli
	f.st = before
	if _, err := s.pass(ctx); err == nil {
		t.Fatal("the pass whose write's answer was lost reported no error")
	}
	if got := f.bindings(); len(got) != 1 {
		t.Fatalf("first pass wrote %v; want m000 alone, written although its answer was lost", got)
	}
	f.st = behind
	_, _ = s.pass(ctx)
	if got := f.bindings(); len(got) != 1 {
		t.Errorf("bound %v on node a, which takes one member", got)
	}
	// Once the fleet read has the write, the pass counts it: a000 stays
	// unbound for want of room, and nothing fails.
	f.st = f.frozen(t)
	if _, err := s.pass(ctx); err != nil {
		t.Errorf("a pass from a fleet that read every binding: %v", err)
	}
	if got := f.bindings(); len(got) != 1 {
		t.Errorf("bound %v on node a, which takes one member", got)
	}
}

// With no node of a capacity, a pass's batches go at once: the first
// binding transaction is still in flight when the second starts.
func TestScheduler_BatchesGoAtOnceWithoutACapacity(t *testing.T) {
	f := newFixture(t, nodeA, Node{Name: "b", Ready: true})
	f.apply(names(200)...)
	second := make(chan struct{})
	var txns atomic.Int64
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/Txn") {
				switch txns.Add(1) {
				case 1: // held until the second comes, or for a while
					select {
					case <-second:
					case <-time.After(waitLimit):
					}
				case 2:
					close(second)
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := f.leading()
	s.cli = cli
	if _, err := s.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
	default:
		t.Error("the second batch waited for the first")
	}
	if got := f.bindings(); len(got) != 200 {
		t.Errorf("%d members bound, want 200", len(got))
	}
}
