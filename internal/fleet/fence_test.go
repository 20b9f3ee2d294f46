package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// proxiedClient returns a client that reaches the package's etcd through
// a fault proxy (internal/etcdtest), both closed when the test ends.
func proxiedClient(t *testing.T) (*etcdtest.Proxy, *clientv3.Client) {
	t.Helper()
	p, err := etcdtest.StartProxy(cluster.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cut)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return p, cli
}

// A node cut off etcd (a black hole between them) holds at its first late
// renewal — no prompt, no start — and, past its fence deadline, loses every
// member not pinned to it, before another node may take them over (its
// lease's TTL plus the reschedule grace after its last renewal); etcd
// back, it registers again under a new lease, reads the bindings and is
// confirmed again.
func TestFence_HoldsThenLosesItsMembersBeforeAnotherNodeMayTakeThem(t *testing.T) {
	f := newFixture(t)
	p, cli := proxiedClient(t)
	const ttl, rescheduleAfter = 3 * time.Second, 8 * time.Second
	o := &Options{Prefix: f.prefix, Logger: quiet, RequestTimeout: 500 * time.Millisecond, RetryInterval: 100 * time.Millisecond}
	sess := session.New(cli, &session.Options{TTL: ttl, RequestTimeout: 500 * time.Millisecond, RetryInterval: 100 * time.Millisecond, Logger: quiet})
	if err := sess.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.run(sess.Run)
	reg, err := Register(context.Background(), cli, sess, NodeInfo{Name: "laptop"}, o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := etcdstore.New(cli, &etcdstore.Options{Prefix: f.prefix, Node: "laptop", Logger: quiet, RequestTimeout: 500 * time.Millisecond, RetryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.run(st.Run)
	nodes := NewNodes(cli, st, o)
	f.run(nodes.Run)
	f.run(func(ctx context.Context) error { return reg.Run(ctx, nodes) })
	fence := NewFence(sess, reg, st.BindingsRevision, &FenceOptions{Options: *o, Client: cli, Node: "laptop", RescheduleAfter: rescheduleAfter})
	f.run(func(ctx context.Context) error { return fence.Run(ctx, st.BindingsChanged) })

	free := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "free"}}
	pinned := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "pinned"}, Spec: v1alpha1.MemberSpec{NodeName: "laptop"}}
	if hold, lose := fence.Check(free); hold != nil || lose != nil {
		t.Fatalf("a registered node, renewing: hold %v, lose %v", hold, lose)
	}

	p.BlackHole()
	cut := time.Now()
	until(t, "holding", fence.Changed, func() bool { return fence.Hold() != nil })
	held := time.Since(cut)
	last := sess.Renewal().Sent
	if held > 2*ttl/3+time.Second {
		t.Errorf("held %s after the black hole; want within two renewal periods (%s)", held, 2*ttl/3)
	}
	if hold, lose := fence.Check(free); hold == nil || lose != nil || !strings.Contains(hold.Error(), "holding every prompt and start") {
		t.Errorf("holding: Check(free) = %v, %v", hold, lose)
	}
	until(t, "losing", fence.Changed, func() bool { _, lose := fence.Check(free); return lose != nil })
	lost := time.Now()
	if early, late := last.Add(ttl), last.Add(ttl+rescheduleAfter); lost.Before(early) || !lost.Before(late) {
		t.Errorf("lost its members %s after its last renewal; want after its TTL (%s) and before another node may take them (%s)",
			lost.Sub(last), ttl, ttl+rescheduleAfter)
	}
	if _, lose := fence.Check(pinned); lose != nil {
		t.Errorf("a member pinned to the node (spec.nodeName) is lost too: %v", lose)
	}

	p.Pass()
	confirmed := func() bool { return fence.Hold() == nil }
	for deadline := time.Now().Add(waitLimit); !confirmed(); {
		ch := fence.Changed()
		if time.Now().After(deadline) {
			t.Fatalf("not confirmed again within %s: %v; registration %+v, lease %+v, bindings read up to %d",
				waitLimit, fence.Hold(), reg.Registered(), sess.Renewal(), st.BindingsRevision())
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline) + time.Millisecond):
		}
	}
	if r := reg.Registered(); r.Lease != sess.Current().Lease() || st.BindingsRevision() < r.Since {
		t.Errorf("confirmed with registration %+v, lease %x, bindings read up to %d", r, sess.Current().Lease(), st.BindingsRevision())
	}
	if hold, lose := fence.Check(free); hold != nil || lose != nil {
		t.Errorf("confirmed again: Check(free) = %v, %v", hold, lose)
	}
}
