package multihost

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// ownEtcd starts an etcd of the test's own (one member): the fleet's, or
// the one an operator restored in its place.
func ownEtcd(t *testing.T) (*etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	c, err := etcdtest.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return c, cli
}

// nodeOn runs node "a" of the fleet under /fleetd on endpoints, on herdr
// srv and the state directory state, until the returned stop (or the
// test's end). Its token is the primary token in state: the fleet's, as
// the node minted it.
func nodeOn(t *testing.T, endpoints []string, srv *herdrsim.Server, state string) (*fleetNode, func()) {
	return nodeWith(t, &daemon.EtcdConfig{Endpoints: endpoints}, srv, state)
}

// nodeWith is nodeOn with more of the etcd configuration: its prefix and
// node name are /fleetd and a.
func nodeWith(t *testing.T, etcd *daemon.EtcdConfig, srv *herdrsim.Server, state string) (*fleetNode, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	etcd.Prefix, etcd.Node = "/fleetd", "a"
	cfg := daemon.Config{Etcd: etcd, StateDir: state,
		Listen: "127.0.0.1:0", HerdrSocket: srv.SocketPath(), Logger: slog.New(slog.DiscardHandler), Ready: func(i daemon.Info) { ready <- i }}
	go func() { done <- daemon.Run(ctx, cfg) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	select {
	case info := <-ready:
		tok, err := os.ReadFile(statedir.At(state).PrimaryToken())
		if err != nil {
			t.Fatal(err)
		}
		return &fleetNode{info: info, token: strings.TrimSpace(string(tok))}, stop
	case err := <-done:
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	return nil, nil
}

// threeOn applies the Profile claude and the members m1, m2, m3 (pinned
// to node a) through n and waits until they are Ready.
func threeOn(t *testing.T, n *fleetNode) {
	t.Helper()
	if code, body := n.do(t, "POST", "/profiles", claudeProfile); code != http.StatusCreated {
		t.Fatalf("POST /profiles = %d %s", code, body)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		if code, body := n.do(t, "POST", "/members", pinned(m, "a")); code != http.StatusCreated {
			t.Fatalf("POST /members %s = %d %s", m, code, body)
		}
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		n.waitFor(t, m+" Ready", readyOn(m))
	}
}

// panesOf returns the pane of each named member in srv; the test fails
// unless each has exactly one.
func panesOf(t *testing.T, srv *herdrsim.Server, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		ids := agentPanes(srv, n)
		if len(ids) != 1 {
			t.Fatalf("%s runs in panes %v, want one", n, ids)
		}
		out[n] = ids[0]
	}
	return out
}

// closedSince counts the tab.close requests srv got after mark.
func closedSince(srv *herdrsim.Server, mark int) int {
	n := 0
	for _, r := range srv.Requests()[mark:] {
		if r.Method == "tab.close" {
			n++
		}
	}
	return n
}

// etcd restored empty while fleetd was stopped: the next start closes
// nothing and creates nothing (issue 21: it closed all three agents),
// /readyz fails with the reason and the recovery command, the members show
// StoreUnavailable, and writes are refused. `fleetd store accept` (fleetd
// stopped) accepts the empty etcd: the next start is ready and holds the
// members' prune (nothing closed at once) until `fleetd prune --confirm`.
func TestEtcdRestoredEmpty_NothingClosedUntilAccepted(t *testing.T) {
	t.Parallel()
	old, _ := ownEtcd(t)
	srv, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	state := t.TempDir()
	n, stop := nodeOn(t, old.Endpoints(), srv, state)
	threeOn(t, n)
	panes := panesOf(t, srv, "m1", "m2", "m3")
	stop()

	restored, _ := ownEtcd(t)
	mark := len(srv.Requests())
	n, stop = nodeOn(t, restored.Endpoints(), srv, state)
	lost := func(c v1alpha1.Condition) bool {
		return c.Reason == v1alpha1.ReasonStoreUnavailable && strings.Contains(c.Message, "store lost")
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		n.untilMember(t, m, "ManifestValid Unknown (StoreUnavailable, store lost)", func(m v1alpha1.Member) bool {
			c := conditionOf(m, v1alpha1.ConditionManifestValid)
			return c.Status == v1alpha1.ConditionUnknown && lost(c)
		})
	}
	code, body := n.do(t, "GET", "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "etcd holds no fleet identity") ||
		!strings.Contains(body, "fleetd store accept --state-dir "+state) {
		t.Errorf("/readyz = %d %q; want 503 with the reason and the recovery command", code, body)
	}
	if code, body := n.do(t, "POST", "/members", pinned("m4", "a")); code != http.StatusServiceUnavailable || !strings.Contains(body, "store lost") {
		t.Errorf("POST /members on a lost store = %d %s; want 503 saying the store is lost", code, body)
	}
	time.Sleep(2 * time.Second) // past the controllers' first reconciles and a store recheck
	if got := closedSince(srv, mark); got != 0 {
		t.Errorf("%d tabs closed at the start on etcd restored empty; want none", got)
	}
	if now := panesOf(t, srv, "m1", "m2", "m3"); now["m1"] != panes["m1"] || now["m2"] != panes["m2"] || now["m3"] != panes["m3"] {
		t.Errorf("panes %v after the start, were %v", now, panes)
	}
	stop()

	cmd := exec.Command(fleetdBinary(t), "store", "accept", "--state-dir", state)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "this node had found etcd lost") || !strings.Contains(string(out), "accepts the etcd it finds") {
		t.Fatalf("fleetd store accept: %v\n%s", err, out)
	}

	n, _ = nodeOn(t, restored.Endpoints(), srv, state)
	for _, m := range []string{"m1", "m2", "m3"} {
		n.untilMember(t, m, "held", func(m v1alpha1.Member) bool {
			return conditionOf(m, v1alpha1.ConditionManifestValid).Reason == v1alpha1.ReasonPruneHeld
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for code, body = n.do(t, "GET", "/readyz", ""); code != http.StatusOK; code, body = n.do(t, "GET", "/readyz", "") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the accept = %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := closedSince(srv, mark); got != 0 {
		t.Errorf("%d tabs closed after the accept, before the prune was confirmed", got)
	}
	code, stdout, stderr := n.cli(t, "prune")
	if code != 0 || strings.Count(stdout, "/fleetd/members/m") != 3 || !strings.Contains(stderr, "prune --confirm") {
		t.Errorf("fleetd prune: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = n.cli(t, "prune", "--confirm")
	if code != 0 || stdout != "member/m1 pruned\nmember/m2 pruned\nmember/m3 pruned\n" {
		t.Errorf("fleetd prune --confirm: exit %d\n%s%s", code, stdout, stderr)
	}
	n.waitFor(t, "the members gone", func(ms []v1alpha1.Member) bool { return len(ms) == 0 })
}

// conditionOf returns a member's condition of type typ.
func conditionOf(m v1alpha1.Member, typ string) v1alpha1.Condition {
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return v1alpha1.Condition{}
}

// etcd restored from an older backup under a running node, behind the
// same endpoint (the backup lacks m3, created after it): the node notices
// that etcd's revision went back, /readyz fails saying so, nothing is
// closed, and writes are refused with the reason and write nothing —
// where a create answered 409 although it was stored, and a delete of the
// listed m3 answered 404.
func TestEtcdRestoredUnderARunningNode_WritesRefusedNothingClosed(t *testing.T) {
	t.Parallel()
	fleetEtcd, fleetCli := ownEtcd(t)
	proxy, err := etcdtest.StartProxy(fleetEtcd.Endpoint(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Cut)
	srv, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	state := t.TempDir()
	n, _ := nodeWith(t, &daemon.EtcdConfig{Endpoints: []string{proxy.URL()}, CheckInterval: time.Second}, srv, state)
	threeOn(t, n)
	panes := panesOf(t, srv, "m1", "m2", "m3")

	// The backup: the fleet's identity, objects and bindings but m3, at its
	// own revisions, well below those the node has seen since — as an older
	// backup is. The fleet's etcd moves on by writes of others (outside the
	// fleet's prefix), and the backup is taken once the node remembers a
	// revision past them: the node's own writes to the restored etcd before
	// it checks (its registration, its members' statuses) cannot bring the
	// backup's revision up to it.
	var top int64
	for i := range 200 {
		resp, err := fleetCli.Put(context.Background(), "/elsewhere/pad", strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		top = resp.Header.Revision
	}
	untilRemembered(t, state, top)
	backup, backupCli := ownEtcd(t)
	resp, err := fleetCli.Get(context.Background(), "/fleetd/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if strings.HasSuffix(k, "/m3") {
			continue
		}
		if k == "/fleetd/identity" || strings.HasPrefix(k, "/fleetd/members/") || strings.HasPrefix(k, "/fleetd/profiles/") || strings.HasPrefix(k, "/fleetd/bindings/") {
			if _, err := backupCli.Put(context.Background(), k, string(kv.Value)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark := len(srv.Requests())
	if err := proxy.Switch(backup.Endpoint(0)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	code, body := n.do(t, "GET", "/readyz", "")
	for ; !strings.Contains(body, "behind revision"); code, body = n.do(t, "GET", "/readyz", "") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the restore = %d %q; want it to say etcd's revision went back", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d %q, want 503", code, body)
	}
	if code, body := n.do(t, "POST", "/members", pinned("m4", "a")); code != http.StatusServiceUnavailable || !strings.Contains(body, "store lost") {
		t.Errorf("POST /members m4 = %d %s; want 503, the store lost", code, body)
	}
	if code, body := n.do(t, "DELETE", "/members/m3", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "store lost") {
		t.Errorf("DELETE /members/m3 = %d %s; want 503, the store lost", code, body)
	}
	if resp, err := backupCli.Get(context.Background(), "/fleetd/members/m4"); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("m4 was written to the restored etcd: %v %v", resp.Kvs, err)
	}
	if ms := n.untilMember(t, "m3", "listed", func(v1alpha1.Member) bool { return true }); ms.Status.Phase != v1alpha1.PhaseReady {
		t.Errorf("m3 is %s, want Ready on its last definition", ms.Status.Phase)
	}
	time.Sleep(time.Second)
	if got := closedSince(srv, mark); got != 0 {
		t.Errorf("%d tabs closed after etcd went back; want none", got)
	}
	if now := panesOf(t, srv, "m1", "m2", "m3"); now["m3"] != panes["m3"] {
		t.Errorf("m3 runs in %s, was %s", now["m3"], panes["m3"])
	}
}

// untilRemembered waits until the node on state remembers etcd revision
// rev as seen (its etcd-store.json, written within a second of a change).
func untilRemembered(t *testing.T, state string, rev int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("revision %d remembered", rev), 30*time.Second, func() string {
		var mem struct {
			Revision int64 `json:"revision"`
		}
		data, err := os.ReadFile(statedir.At(state).EtcdStore())
		if err == nil && json.Unmarshal(data, &mem) == nil && mem.Revision >= rev {
			return ""
		}
		return fmt.Sprintf("the node remembers revision %d (%v)", mem.Revision, err)
	})
}
