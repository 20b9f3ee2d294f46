package etcdstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// runNode runs n's keep-alive until the returned stop is called (or the
// test ends) and returns Run's result from stop.
func runNode(t *testing.T, n *Node) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

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

func TestNode_RegistersUnderALease(t *testing.T) {
	cli := newClient(t)
	ctx := context.Background()
	opts := &NodeOptions{Prefix: prefix(t)}
	a, err := RegisterNode(ctx, cli, NodeInfo{Name: "laptop", Labels: map[string]string{"os": "linux"}, GatewayURL: "http://127.0.0.1:8080/mcp"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	stopA := runNode(t, a)

	resp, err := cli.Get(ctx, prefix(t)+"/nodes/laptop")
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
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil || ttl.GrantedTTL != 10 {
		t.Errorf("lease: %+v %v, want a granted TTL of 10 s", ttl, err)
	}

	// A second node registers beside it (placement decides who runs what).
	b, err := RegisterNode(ctx, cli, NodeInfo{Name: "buildbox"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, b)

	// The first node, stopping, revokes its lease: its key goes at once.
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := cli.Get(ctx, prefix(t)+"/nodes/laptop"); len(resp.Kvs) != 0 {
		t.Error("laptop's key is left after it stopped")
	}
	if resp, _ := cli.Get(ctx, prefix(t)+"/nodes/buildbox"); len(resp.Kvs) != 1 {
		t.Error("buildbox's key went with laptop's")
	}
	// The same name again (a restarted node) takes over at once.
	if _, err := RegisterNode(ctx, cli, NodeInfo{Name: "buildbox"}, opts); err != nil {
		t.Errorf("the same node registering again: %v", err)
	}
	if _, err := RegisterNode(ctx, cli, NodeInfo{Name: "Bad Name"}, opts); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("a bad node name: %v", err)
	}
}

// (herdr.since starts at the registration time, too.)
var cmpIgnoreStart = cmp.FilterPath(func(p cmp.Path) bool { s := p.Last().String(); return s == ".StartedAt" || s == ".Since" }, cmp.Ignore())

// A node that stops renewing (killed, cut off) is gone within its TTL; a
// running node whose lease was lost registers again.
func TestNode_LeaseExpiresAndIsRenewed(t *testing.T) {
	cli := newClient(t)
	ctx := context.Background()
	key := prefix(t) + "/nodes/gone"
	watch := cli.Watch(ctx, key)
	start := time.Now()
	if _, err := RegisterNode(ctx, cli, NodeInfo{Name: "gone"}, &NodeOptions{Prefix: prefix(t), TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.PUT {
		t.Fatalf("first event %v", ev.Type)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.DELETE {
		t.Fatalf("second event %v, want the key's expiry", ev.Type)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a node with a 1 s lease went after %s", d)
	}

	key = prefix(t) + "/nodes/kept"
	watch = cli.Watch(ctx, key)
	n, err := RegisterNode(ctx, cli, NodeInfo{Name: "kept"}, &NodeOptions{Prefix: prefix(t), TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, n)
	nextEvent(t, watch) // registered
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.DELETE {
		t.Fatalf("event %v, want the revoked key's delete", ev.Type)
	}
	if ev := nextEvent(t, watch); ev.Type != mvccpb.PUT || ev.Kv.Lease == resp.Kvs[0].Lease {
		t.Fatalf("event %v, want the node registered again under a new lease", ev.Type)
	}
}
