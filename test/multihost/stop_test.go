package multihost

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/mcp"
)

// A member that runs on node b, deleted through node a with ?wait=true:
// a answers once b reports it no longer runs the member (its published
// status of it gone) — not after waiting for a pane of its own, which
// never closes — and b's pane closes.
func TestStop_AMemberOnAnotherNodeWaitsForThatNode(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/stop-remote")
	putProfile(t, prefix)
	a := startNode(t, prefix, "a")
	b := startNode(t, prefix, "b")
	untilReady(t, []*fleetNode{a, b}, "a", "b")
	if code, body := a.do(t, "POST", "/members?wait=true", pinned("remote", "b")); code != http.StatusCreated {
		t.Fatalf("POST /members?wait=true on a = %d %s", code, body)
	}
	if panes := agentPanes(b.info.Sim, "remote"); len(panes) != 1 {
		t.Fatalf("b's herdr runs remote in %v", panes)
	}

	start := time.Now()
	code, body := a.do(t, "DELETE", "/members/remote?wait=true", "")
	took := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("DELETE /members/remote?wait=true on a = %d %s", code, body)
	}
	if took >= mcp.DefaultStopTimeout/2 {
		t.Errorf("DELETE ?wait=true took %s: it waited for a report that never comes (the stop timeout is %s)", took, mcp.DefaultStopTimeout)
	}
	if resp, err := etcdClient(t).Get(context.Background(), prefix+"/status/remote", clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("a answered while b still publishes remote's status (%v, %v)", resp, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(agentPanes(b.info.Sim, "remote")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("b still runs remote in %v after 10 s", agentPanes(b.info.Sim, "remote"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A member whose node is down but not yet lost (cut off etcd, its lease
// not expired) never reports its pane closed: bridge_stop with wait
// through another node says so when its timeout passes, rather than
// answering that it stopped.
func TestStop_AMemberOnANodeThatDoesNotReportIsAnError(t *testing.T) {
	t.Parallel()
	f := newHostFleet(t, "/stop-silent", []string{"a", "b"}, &hostOptions{NodeTTL: time.Minute})
	a, b := f.host("a").running(), f.host("b").running()
	untilReady(t, []*fleetNode{a, b}, "a", "b")
	if code, body := a.do(t, "POST", "/members?wait=true", pinned("remote", "b")); code != http.StatusCreated {
		t.Fatalf("POST /members?wait=true on a = %d %s", code, body)
	}
	a.untilMember(t, "remote", "Ready on b", func(m v1alpha1.Member) bool {
		return m.Status.NodeName == "b" && m.Status.Phase == v1alpha1.PhaseReady
	})
	f.host("b").kill()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := toolCall[mcp.StopOutput](ctx, a.primary(t, ctx), "bridge_stop", map[string]any{"paneId": "remote", "wait": true, "timeoutMs": 1500})
	took := time.Since(start)
	te, ok := err.(*mcp.ToolError)
	if !ok || te.Code != "unavailable" || !strings.Contains(te.Message, "node b") {
		t.Fatalf("bridge_stop of a member on a silent node = %v; want unavailable, naming node b", err)
	}
	if took < 1500*time.Millisecond || took > 10*time.Second {
		t.Errorf("bridge_stop answered after %s; want its 1.5 s timeout", took)
	}
	if code, _ := a.do(t, "GET", "/members/remote", ""); code != http.StatusNotFound {
		t.Errorf("GET /members/remote after the stop = %d; want the member deleted all the same", code)
	}
}
