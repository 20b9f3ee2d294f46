package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// nextEvent returns the next event of a watch, or fails the test.
func nextEvent(t *testing.T, ch clientv3.WatchChan) *clientv3.Event {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		select {
		case resp, ok := <-ch:
			if !ok || resp.Err() != nil {
				t.Fatalf("watch ended: %v", resp.Err())
			}
			if len(resp.Events) > 0 {
				return resp.Events[0]
			}
		case <-deadline.C:
			t.Fatalf("no event within %s", waitLimit)
		}
	}
}

// (herdr.since starts at the registration time, too.)
var cmpIgnoreStart = cmp.FilterPath(func(p cmp.Path) bool { s := p.Last().String(); return s == ".StartedAt" || s == ".Since" }, cmp.Ignore())

// A node registers under its session's lease; a second one beside it; the
// first, stopping, revokes its lease (its key goes at once); the same name
// may register again at once; a bad name is refused.
func TestRegister_UnderTheNodesLease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, _, stopA := f.register(NodeInfo{Name: "laptop", Labels: map[string]string{"os": "linux"}, GatewayURL: "http://127.0.0.1:8080/mcp"}, 0)

	resp, err := f.cli.Get(ctx, f.prefix+"/nodes/laptop")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("node key: %v %v, want one key under a lease", resp, err)
	}
	var info NodeInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(NodeInfo{Name: "laptop", Labels: map[string]string{"os": "linux"}, GatewayURL: "http://127.0.0.1:8080/mcp"}, info,
		cmpIgnoreStart); diff != "" || info.StartedAt.IsZero() {
		t.Errorf("registered info (-want +got):\n%s", diff)
	}
	ttl, err := f.cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != 10 {
		t.Errorf("lease: %+v %v, want a granted TTL of 10 s", ttl, err)
	}

	_, sessB, _ := f.register(NodeInfo{Name: "buildbox"}, 0)
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := f.cli.Get(ctx, f.prefix+"/nodes/laptop"); len(resp.Kvs) != 0 {
		t.Error("laptop's key is left after it stopped")
	}
	if resp, _ := f.cli.Get(ctx, f.prefix+"/nodes/buildbox"); len(resp.Kvs) != 1 {
		t.Error("buildbox's key went with laptop's")
	}
	if _, err := Register(ctx, f.cli, sessB, NodeInfo{Name: "buildbox"}, f.opts()); err != nil {
		t.Errorf("the same node registering again: %v", err)
	}
	if _, err := Register(ctx, f.cli, sessB, NodeInfo{Name: "Bad Name"}, f.opts()); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("a bad node name: %v", err)
	}
}

// A node whose lease is lost (revoked here; expired after a partition) is
// registered again under the new lease its session is granted.
func TestRegister_AgainUnderANewLease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	key := f.prefix + "/nodes/kept"
	watch := f.cli.Watch(ctx, key)
	_, sess, _ := f.register(NodeInfo{Name: "kept"}, 3*time.Second)
	nextEvent(t, watch) // registered
	first := sess.Current().Lease()
	if _, err := f.cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.DELETE {
		t.Fatalf("event %v, want the revoked key's delete", ev.Type)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.PUT || clientv3.LeaseID(ev.Kv.Lease) == first {
		t.Fatalf("event %v, want the node registered again under a new lease", ev.Type)
	}
}

// A second fleetd with a live node's name — another instance, whose
// registration is under a lease that lives — is refused, and told which
// fleetd holds the name; the same instance (a fleetd started again on the
// same state directory, its old lease not expired yet) takes the
// registration over at once, and so does any fleetd once the first's key
// has gone.
func TestRegister_RefusesASecondFleetdWithALiveNodesName(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	newSession := func() *session.Session {
		sess := session.New(f.cli, &session.Options{Logger: quiet})
		if err := sess.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return sess
	}
	// The first fleetd registers, then dies; its lease lives on (for its
	// TTL, in life; here until the test revokes it).
	first := NodeInstance{ID: "0123456789abcdef0123456789abcdef", Host: "laptop", PID: 4242}
	old := newSession()
	if _, err := Register(ctx, f.cli, old, NodeInfo{Name: "laptop", Instance: first}, f.opts()); err != nil {
		t.Fatal(err)
	}
	sess := newSession()
	other := NodeInstance{ID: "fedcba9876543210fedcba9876543210", Host: "desktop", PID: 7}
	_, err := Register(ctx, f.cli, sess, NodeInfo{Name: "laptop", Instance: other}, f.opts())
	if !errors.Is(err, ErrNodeTaken) || !strings.Contains(err.Error(), "pid 4242 on host laptop") {
		t.Errorf("a second fleetd with the name of a live node: %v; want ErrNodeTaken naming pid 4242 on host laptop", err)
	}
	if _, err := Register(ctx, f.cli, sess, NodeInfo{Name: "laptop", Instance: first}, f.opts()); err != nil {
		t.Errorf("the same instance registering again at once: %v", err)
	}
	resp, err := f.cli.Get(ctx, f.prefix+"/nodes/laptop")
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != sess.Current().Lease() {
		t.Fatalf("laptop's key after the restart: %v %v; want it under the new lease %x", resp, err, sess.Current().Lease())
	}
	if _, err := f.cli.Revoke(ctx, old.Current().Lease()); err != nil { // the dead fleetd's lease expires
		t.Fatal(err)
	}
	if resp, _ := f.cli.Get(ctx, f.prefix+"/nodes/laptop"); len(resp.Kvs) != 1 {
		t.Fatal("the restarted node's key went with the old lease")
	}
	if _, err := f.cli.Delete(ctx, f.prefix+"/nodes/laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(ctx, f.cli, sess, NodeInfo{Name: "laptop", Instance: other}, f.opts()); err != nil {
		t.Errorf("another fleetd taking a name nobody holds: %v", err)
	}
}

// A registration deleted, or overwritten with something else, behind the
// node's back is written again by the node (its watch of the
// registrations sees it); one that another fleetd wrote under a lease of
// its own is not fought over: Registered reports the conflict (the
// node's fence then loses its members) until that key goes, and the node
// writes its own again.
func TestRegistration_WritesItsKeyAgainWhenSomeoneElseChangesIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	me := NodeInstance{ID: "0123456789abcdef0123456789abcdef", Host: "laptop", PID: 1}
	reg, sess, _ := f.register(NodeInfo{Name: "laptop", Instance: me, Labels: map[string]string{"os": "linux"}}, 0)
	key := f.prefix + "/nodes/laptop"
	ours := func() bool {
		resp, err := f.cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		var info NodeInfo
		return json.Unmarshal(resp.Kvs[0].Value, &info) == nil && info.Instance == me && info.Labels["os"] == "linux" &&
			clientv3.LeaseID(resp.Kvs[0].Lease) == sess.Current().Lease()
	}
	watchUntil := func(what string, cond func() bool) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		w := f.cli.Watch(wctx, key)
		for !cond() {
			select {
			case <-w:
			case <-wctx.Done():
				t.Fatalf("not %s within %s", what, waitLimit)
			}
		}
	}
	if _, err := f.cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	watchUntil("registered again after a delete", ours)
	if _, err := f.cli.Put(ctx, key, `{"name":"laptop","labels":{"os":"tampered"}}`); err != nil {
		t.Fatal(err)
	}
	watchUntil("registered again after an overwrite", ours)
	if _, err := f.cli.Put(ctx, key, `not json`); err != nil {
		t.Fatal(err)
	}
	watchUntil("registered again after garbage", ours)

	// Another fleetd's registration, under its own live lease.
	lease, err := f.cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := json.Marshal(NodeInfo{Name: "laptop", Instance: NodeInstance{ID: "fedcba9876543210fedcba9876543210", Host: "desktop", PID: 9}})
	if _, err := f.cli.Put(ctx, key, string(theirs), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	until(t, "the conflict reported", reg.Changed, func() bool { return reg.Registered().Conflict != nil })
	if c := reg.Registered().Conflict; !errors.Is(c, ErrNodeTaken) || !strings.Contains(c.Error(), "on host desktop") {
		t.Errorf("conflict = %v; want ErrNodeTaken naming the fleetd on host desktop", c)
	}
	if resp, _ := f.cli.Get(ctx, key); len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != string(theirs) {
		t.Errorf("the node wrote over another fleetd's live registration: %v", resp.Kvs)
	}
	if _, err := f.cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	watchUntil("registered again once the other's key went", ours)
	until(t, "the conflict cleared", reg.Changed, func() bool { return reg.Registered().Conflict == nil })
}

// A registration write waiting on etcd holds no reader: Registered (which
// the fence reads on every reconcile) and Info answer at once while an
// Update's request is lost in a partition (before, both waited the
// request's timeout).
func TestRegistration_ReadersDoNotWaitForAWriteInFlight(t *testing.T) {
	f := newFixture(t)
	p, cli := proxiedClient(t)
	const timeout = 3 * time.Second
	sess := session.New(cli, &session.Options{TTL: 10 * time.Second, RequestTimeout: timeout, Logger: quiet})
	if err := sess.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.run(sess.Run)
	reg, err := Register(context.Background(), cli, sess, NodeInfo{Name: "laptop"}, &Options{Prefix: f.prefix, Logger: quiet, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	p.BlackHole()
	defer p.Pass()
	updated := make(chan error, 1)
	go func() {
		updated <- reg.Update(context.Background(), func(i *NodeInfo) { i.Labels = map[string]string{"zone": "b"} })
	}()
	// Read until the update's new info shows (its request then waits on
	// etcd), and a while after; every read answers at once.
	var seen time.Time
	for seen.IsZero() || time.Since(seen) < timeout/2 {
		start := time.Now()
		_ = reg.Registered()
		info := reg.Info()
		if took := time.Since(start); took > timeout/3 {
			t.Fatalf("Registered and Info took %s while a write waited on etcd; want at once", took)
		}
		if seen.IsZero() && info.Labels["zone"] == "b" {
			seen = time.Now()
		}
		time.Sleep(5 * time.Millisecond) // the readers' pace; not a wait for a condition
	}
	if err := <-updated; !errors.Is(err, etcdstore.ErrUnavailable) {
		t.Errorf("Update through a partition = %v; want ErrUnavailable", err)
	}
}
