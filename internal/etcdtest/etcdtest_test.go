package etcdtest

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The ports a cluster's members keep across a restart are below the
// ephemeral range, where no listener on port 0 and no outgoing connection
// can take them while a member is stopped; each is free and distinct.
func TestFreePorts_BelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, claims, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.release()
	seen := map[int]bool{}
	for _, p := range ports {
		if p < portFloor || p >= low {
			t.Errorf("port %d is not in [%d, %d)", p, portFloor, low)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}

// A port one cluster claimed is not another's while the first holds it —
// its member stopped and the port free — whether the other is in this
// process or another; once released it can be claimed again.
func TestPortClaims_HeldUntilReleased(t *testing.T) {
	ports, first, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	defer first.release()
	second := &portClaims{}
	defer second.release()
	for _, p := range ports {
		if ok, err := second.claim(p); err != nil || ok {
			t.Errorf("port %d claimed again while held: %v, %v", p, ok, err)
		}
	}
	// Another process: a claim is the kernel's, not this process's.
	cmd := exec.Command("flock", "--nonblock", filepath.Join(claimDir(), strconv.Itoa(ports[0])), "true")
	if err := cmd.Run(); err == nil {
		t.Errorf("another process claimed port %d while held", ports[0])
	} else if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("flock(1): %v", err)
	}
	first.release()
	if ok, err := second.claim(ports[0]); err != nil || !ok {
		t.Errorf("port %d not claimable once released: %v, %v", ports[0], ok, err)
	}
}

// WaitCompacted returns once every member has applied a compaction, and
// says so when one has not: a read below a revision that was never
// compacted is not ErrCompacted.
func TestWaitCompacted_EveryMemberOrAnError(t *testing.T) {
	c, err := Start(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	var rev int64
	for i := range 3 {
		resp, err := cli.Put(ctx, "k", strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev-1); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitCompacted(ctx, rev-1); err != nil {
		t.Errorf("after a compaction at %d: %v", rev-1, err)
	}
	if err := c.WaitCompacted(ctx, rev); err == nil {
		t.Errorf("WaitCompacted(%d) with etcd compacted at %d only: nil, want an error", rev, rev-1)
	}
}
