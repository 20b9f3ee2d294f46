package fleet

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
