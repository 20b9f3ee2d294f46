package multihost

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// startProxy starts a fault-injecting proxy (internal/etcdtest) to one
// etcd member (its client URL), closed when the test ends. Cut drops every
// connection through it and takes no new one, as when a machine dies: a
// node on it whose fleetd is stopped after the cut cannot revoke its
// lease, which expires.
func startProxy(t testing.TB, endpoint string) *etcdtest.Proxy {
	t.Helper()
	p, err := etcdtest.StartProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cut)
	return p
}

// runDaemon runs a daemon with cfg (its herdr given by the caller; on
// cfg.Listen if set, so that a restart keeps the gateway URL its agents
// were given) until the returned stop is called (or the test ends).
func runDaemon(t testing.TB, cfg daemon.Config) (*fleetNode, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	cfg.Listen, cfg.Logger = cmp.Or(cfg.Listen, "127.0.0.1:0"), slog.New(slog.DiscardHandler)
	cfg.Ready = func(i daemon.Info) { ready <- i }
	go func() { done <- daemon.Run(ctx, cfg) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case info := <-ready:
		return &fleetNode{info: info, token: fleetToken(t, cfg.Etcd.Prefix, cfg.StateDir)}, stop
	case err := <-done:
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	return nil, nil
}

// untilMember reads GET /members on n until cond holds for the named
// member, as untilNode does.
func (n *fleetNode) untilMember(t *testing.T, name, what string, cond func(v1alpha1.Member) bool) v1alpha1.Member {
	t.Helper()
	return untilNamed(t, n, "/members", name, what, func(m v1alpha1.Member) string { return m.Name }, cond)
}

// agentPanes are the panes of srv that run the named agent.
func agentPanes(srv *herdrsim.Server, name string) []string {
	var ids []string
	for _, p := range srv.Panes() {
		if p.AgentName == name {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// Node a is killed (its etcd connection cut, then its fleetd stopped: the
// lease is not revoked and expires); b sees a NotReady (NodeLost) and a's
// members Ready=Unknown NodeLost; after a's --reschedule-after the free member
// runs on b while the one pinned to a waits. a restarts on its herdr,
// which still holds the free member's old pane: a closes that pane in its
// first reconcile (the member is no longer in its snapshot) and creates
// nothing; the pinned member's pane is adopted. The free member's agent
// resumes on b the session it had on a (kept in etcd).
func TestNodeLoss_RescheduleAndTheReturningNodeClosesItsCopy(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-loss")
	putProfile(t, prefix)
	const ttl = 2 * time.Second
	b, _ := runDaemon(t, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: t.TempDir(),
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "b", NodeTTL: ttl, RescheduleAfter: 2 * time.Second}})
	herdrA, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { herdrA.Close() })
	stateA := t.TempDir()
	proxy := startProxy(t, cluster.Endpoints()[0])
	a, stopA := runDaemon(t, daemon.Config{HerdrSocket: herdrA.SocketPath(), StateDir: stateA, ResyncPeriod: time.Second, // reads agent sessions soon
		Etcd: &daemon.EtcdConfig{Endpoints: []string{proxy.URL()}, Prefix: prefix, Node: "a", NodeTTL: ttl, RescheduleAfter: 2 * time.Second, RequestTimeout: time.Second}})
	for _, name := range []string{"a", "b"} {
		b.untilNode(t, name, "Ready", nodeReady)
	}
	for _, body := range []string{
		pinned("keep", "a"),
		pinned("other", "b"),
	} {
		if code, resp := b.do(t, "POST", "/members", body); code != http.StatusCreated {
			t.Fatalf("POST /members = %d %s", code, resp)
		}
	}
	a.waitFor(t, "keep ready on a", readyOn("keep"))
	b.waitFor(t, "other ready on b", readyOn("other"))
	// One member each: the free one goes to a (by name on the tie).
	if code, resp := b.do(t, "POST", "/members", `{"profile":"claude","name":"free"}`); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, resp)
	}
	a.waitFor(t, "free ready on a", readyOn("free"))
	oldFree, oldKeep := agentPanes(herdrA, "free"), agentPanes(herdrA, "keep")
	if len(oldFree) != 1 || len(oldKeep) != 1 {
		t.Fatalf("a's herdr runs free %v, keep %v; want one pane each", oldFree, oldKeep)
	}
	// free's agent reports its own session; a keeps it in etcd.
	const session = "0b6b4c8e-6f1e-4c43-9d8e-3f3c1a2b9e10"
	if err := herdrA.SetAgentSession(oldFree[0], herdrsim.AgentSession{Source: "herdr:claude", Agent: "claude", Kind: "id", Value: session}); err != nil {
		t.Fatal(err)
	}
	cli := etcdClient(t)
	for kept := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		resp, err := cli.Get(context.Background(), prefix+"/sessions/free")
		if err == nil && len(resp.Kvs) == 1 && strings.Contains(string(resp.Kvs[0].Value), session) {
			break
		}
		if time.Since(kept) > 10*time.Second {
			t.Fatalf("a did not keep free's agent session in etcd within 10 s: %v, %v", resp, err)
		}
	}

	// Kill a: cut from etcd, then stopped; its lease expires.
	proxy.Cut()
	stopA()
	lost := b.untilNode(t, "a", "NotReady (NodeLost)", func(n v1alpha1.Node) bool { return n.ReadyCondition().Reason == v1alpha1.ReasonNodeLost })
	if lost.ReadyCondition().Status != v1alpha1.ConditionFalse || lost.Status.Members != 2 {
		t.Errorf("lost node a: %+v, members %d; want NotReady with its 2 members", lost.ReadyCondition(), lost.Status.Members)
	}
	m := b.untilMember(t, "keep", "NodeLost", func(m v1alpha1.Member) bool { return readyOf(m).Reason == v1alpha1.ReasonNodeLost })
	if c := readyOf(m); c.Status != v1alpha1.ConditionUnknown || m.Status.NodeName != "a" || !strings.Contains(c.Message, "spec.nodeName pins it there") {
		t.Errorf("keep while a is lost: node %q, Ready %+v", m.Status.NodeName, c)
	}

	// After the grace free runs on b, its agent's session resumed; keep
	// still waits for a.
	b.waitFor(t, "free ready on b", readyOn("free"))
	if fm := b.untilMember(t, "free", "on b", func(v1alpha1.Member) bool { return true }); fm.Status.ResumedSession == nil || fm.Status.ResumedSession.Value != session {
		t.Errorf("free on b: resumedSession %+v; want the session it had on a, %s", fm.Status.ResumedSession, session)
	}
	if m := b.untilMember(t, "keep", "still on a", func(v1alpha1.Member) bool { return true }); m.Status.NodeName != "a" || readyOf(m).Reason != v1alpha1.ReasonNodeLost {
		t.Errorf("keep after the grace: node %q, Ready %+v; want it to wait for a", m.Status.NodeName, readyOf(m))
	}
	if got := agentPanes(herdrA, "free"); len(got) != 1 || got[0] != oldFree[0] {
		t.Fatalf("a's herdr, a down: free panes %v, want the old one %v still there", got, oldFree)
	}

	// a comes back on the same herdr and state.
	since := uint64(0)
	if evs := herdrA.Events(); len(evs) > 0 {
		since = evs[len(evs)-1].Seq
	}
	restarted := time.Now()
	a, _ = runDaemon(t, daemon.Config{HerdrSocket: herdrA.SocketPath(), StateDir: stateA,
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "a", NodeTTL: ttl, RequestTimeout: time.Second}})
	for len(agentPanes(herdrA, "free")) != 0 {
		if time.Since(restarted) > 10*time.Second {
			t.Fatalf("a, restarted, still runs free in %v after 10 s: two live panes for free", agentPanes(herdrA, "free"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("a closed free's old pane %s after its restart", time.Since(restarted).Round(time.Millisecond))
	a.waitFor(t, "keep ready on a again", readyOn("keep"))
	if got := agentPanes(herdrA, "keep"); len(got) != 1 || got[0] != oldKeep[0] {
		t.Errorf("keep's panes on a after the restart: %v, want the adopted %v", got, oldKeep)
	}
	for _, ev := range herdrA.Events() {
		if ev.Seq > since && (ev.Kind == "pane_created" || ev.Kind == "tab_created") {
			t.Errorf("a created something after its restart: %s %s", ev.Kind, ev.Line)
		}
	}
	b.untilNode(t, "a", "Ready again", nodeReady)
	if got := agentPanes(b.info.Sim, "free"); len(got) != 1 {
		t.Errorf("b's herdr runs free in %v, want one pane", got)
	}
}

// A node started while etcd does not answer (a black hole between them)
// waits for it, saying so in its log, instead of exiting after one request
// timeout; once etcd answers, it registers, serves and is Ready.
func TestNode_StartedWhileEtcdDoesNotAnswerWaitsForIt(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-wait")
	putProfile(t, prefix)
	proxy := startProxy(t, cluster.Endpoints()[0])
	proxy.BlackHole()
	logs, state := &syncbuf.Buffer{}, t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = daemon.Run(ctx, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: state, Listen: "127.0.0.1:0",
			Logger: slog.New(slog.NewTextHandler(logs, nil)), Ready: func(i daemon.Info) { ready <- i },
			Etcd: &daemon.EtcdConfig{Endpoints: []string{proxy.URL()}, Prefix: prefix, Node: "a", RequestTimeout: time.Second}})
	}()
	t.Cleanup(func() { cancel(); <-exited })
	const said = "etcd did not answer this starting node in time; trying again"
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), said) < 2 {
		select {
		case <-exited:
			t.Fatalf("Run ended while etcd did not answer: %v", runErr)
		case <-ready:
			t.Fatal("the node served before etcd answered")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no word of the wait after 30s; the log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	proxy.Pass()
	select {
	case info := <-ready:
		n := &fleetNode{info: info, token: fleetToken(t, prefix, state)}
		n.untilNode(t, "a", "Ready", nodeReady)
	case <-exited:
		t.Fatalf("Run ended once etcd answered: %v", runErr)
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not serve within 30s of etcd answering; the log:\n%s", logs.String())
	}
}
