package multihost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

var prefixSeq atomic.Int64

// uniquePrefix returns a prefix no other test (or run, with -count) of the
// process uses on the shared cluster.
func uniquePrefix(base string) string { return fmt.Sprintf("%s-%d", base, prefixSeq.Add(1)) }

// fleetNode is one running fleetd on the etcd store.
type fleetNode struct {
	info  daemon.Info
	token string
}

// startNode runs a daemon on the simulated herdr with the etcd store under
// prefix, as node name; it stops when the test ends.
func startNode(t testing.TB, prefix, name string) *fleetNode {
	t.Helper()
	return startNodeWith(t, &daemon.EtcdConfig{Endpoints: clusterOf(prefix).Endpoints(), Prefix: prefix, Node: name})
}

// startNodeWith is startNode with the whole etcd configuration.
func startNodeWith(t testing.TB, etcd *daemon.EtcdConfig) *fleetNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	state := t.TempDir()
	cfg := daemon.Config{
		Etcd:         etcd,
		StateDir:     state,
		Listen:       "127.0.0.1:0",
		Sim:          true,
		SimValidator: validated.Schema(),
		Logger:       slog.New(slog.DiscardHandler),
		Ready:        func(i daemon.Info) { ready <- i },
	}
	go func() { done <- daemon.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case info := <-ready:
		return &fleetNode{info: info, token: fleetToken(t, etcd.Prefix, state)}
	case err := <-done:
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	return nil
}

// fleetTokens are the fleets' primary tokens by prefix, each read from
// the node that minted it.
var fleetTokens sync.Map

// fleetToken returns the primary token of the fleet under prefix, which
// every node of it accepts: the token in the primary.token of the node
// that minted it (the first of the fleet to start), whose hash etcd
// holds. state is the state directory of a node that just started.
func fleetToken(t testing.TB, prefix, state string) string {
	t.Helper()
	if b, err := os.ReadFile(statedir.At(state).PrimaryToken()); err == nil {
		tok := strings.TrimSpace(string(b))
		resp, err := etcdClientOn(t, clusterOf(prefix)).Get(context.Background(), prefix+"/tokens/primary")
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the fleet's primary token hash: %v %v", resp, err)
		}
		var hash struct{ SHA256 string }
		if err := json.Unmarshal(resp.Kvs[0].Value, &hash); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256([]byte(tok)); hex.EncodeToString(sum[:]) == hash.SHA256 {
			fleetTokens.Store(prefix, tok)
		}
	}
	tok, ok := fleetTokens.Load(prefix)
	if !ok {
		t.Fatalf("no node of %s holds the fleet's primary token", prefix)
	}
	return tok.(string)
}

func (n *fleetNode) do(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, n.info.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor returns once cond holds for the node's members (with status).
func (n *fleetNode) waitFor(t testing.TB, what string, cond func([]v1alpha1.Member) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.info.WaitFor(ctx, cond); err != nil {
		t.Fatalf("not %s: %v", what, err)
	}
}

func phaseOf(name string, phase string) func([]v1alpha1.Member) bool {
	return func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == name {
				return m.Status.Phase == phase
			}
		}
		return false
	}
}

func gone(name string) func([]v1alpha1.Member) bool {
	return func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name == name {
				return false
			}
		}
		return true
	}
}

func etcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	return etcdClientOn(t, cluster)
}

// etcdClientOn is etcdClient on cluster c.
func etcdClientOn(t testing.TB, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// One fleetd on the etcd store: a Profile put into etcd by hand (YAML, as
// etcdctl would) and Members written through REST or straight into etcd are
// reconciled into the node's herdr; a stale resourceVersion is a 409; a
// delete closes the pane.
func TestEtcdStore_OneNodeServesTheFleet(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-one")
	cli := etcdClient(t)
	ctx := context.Background()
	putProfile(t, prefix)
	n := startNode(t, prefix, "laptop")

	// bridge_spawn over REST: the member is written to etcd and runs.
	if code, body := n.do(t, "POST", "/members?wait=true", `{"profile":"claude","name":"coder"}`); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, body)
	}
	n.waitFor(t, "coder ready", phaseOf("coder", v1alpha1.PhaseReady))
	resp, err := cli.Get(ctx, prefix+"/members/coder")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("coder's key: %v %v", resp, err)
	}
	var stored map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil || stored["status"] != nil {
		t.Errorf("stored coder: %s (%v), want JSON without status", resp.Kvs[0].Value, err)
	}

	// A write over a stale resourceVersion is refused and changes nothing.
	stale := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder, resourceVersion: \"1\"}\nspec: {profile: claude, paused: true}\n"
	if code, body := n.do(t, "POST", "/members", stale); code != http.StatusConflict || !strings.Contains(body, `"conflict"`) {
		t.Errorf("POST with a stale resourceVersion = %d %s, want 409 conflict", code, body)
	}
	if again, _ := cli.Get(ctx, prefix+"/members/coder"); again.Kvs[0].ModRevision != resp.Kvs[0].ModRevision {
		t.Error("the refused write changed coder's key")
	}

	// GET shows the version, and a write at that version goes through
	// (the `get -o yaml`, edit, `apply` round trip).
	code, body := n.do(t, "GET", "/members/coder", "")
	var shown v1alpha1.Member
	if err := json.Unmarshal([]byte(body), &shown); code != http.StatusOK || err != nil {
		t.Fatalf("GET /members/coder = %d %s", code, body)
	}
	if want := strconv.FormatInt(resp.Kvs[0].ModRevision, 10); shown.ResourceVersion != want {
		t.Errorf("GET shows resourceVersion %q, want the key's mod revision %s", shown.ResourceVersion, want)
	}
	current := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder, resourceVersion: \"" + shown.ResourceVersion + "\", labels: {team: red}}\nspec: {profile: claude}\n"
	if code, body := n.do(t, "POST", "/members", current); code != http.StatusOK || !strings.Contains(body, `"configured"`) {
		t.Errorf("POST at the current resourceVersion = %d %s, want 200 configured", code, body)
	}

	// A Member written into etcd by someone else (another node's apply)
	// is reconciled here too.
	if _, err := cli.Put(ctx, prefix+"/members/reviewer", `{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"reviewer"},"spec":{"profile":"claude"}}`); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "reviewer ready", phaseOf("reviewer", v1alpha1.PhaseReady))

	// bridge_stop over REST: the key goes and the pane closes.
	if code, body := n.do(t, "DELETE", "/members/coder?wait=true", ""); code != http.StatusOK {
		t.Fatalf("DELETE /members/coder = %d %s", code, body)
	}
	n.waitFor(t, "coder gone", gone("coder"))
	if resp, _ := cli.Get(ctx, prefix+"/members/coder"); len(resp.Kvs) != 0 {
		t.Error("coder's key is still in etcd")
	}
}

// With TLS and client certificates: a node with the cluster's CA and a
// client certificate it signed serves the fleet; without a certificate,
// with one another CA signed, or without the CA, it does not start, and
// says why.
func TestEtcdStore_TLSWithClientCertificates(t *testing.T) {
	t.Parallel()
	secure, err := etcdtest.Start(1, &etcdtest.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	files := secure.TLS()
	run := func(c daemon.EtcdConfig) error {
		c.Endpoints, c.Prefix, c.Node, c.RequestTimeout = secure.Endpoints(), uniquePrefix("/tls"), "secure", time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- daemon.Run(ctx, daemon.Config{Etcd: &c, StateDir: t.TempDir(), Listen: "127.0.0.1:0", Sim: true,
				Logger: slog.New(slog.DiscardHandler), Ready: func(daemon.Info) { close(ready) }})
		}()
		select {
		case <-ready:
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run after serving: %v", err)
			}
			return nil
		case err := <-done:
			return err
		}
	}
	for _, tc := range []struct {
		name    string
		cfg     daemon.EtcdConfig
		wantErr string
	}{
		{"the cluster's CA and client certificate", daemon.EtcdConfig{CACert: files.CA, Cert: files.ClientCert, Key: files.ClientKey}, ""},
		{"no client certificate", daemon.EtcdConfig{CACert: files.CA}, "certificate required"},
		{"a client certificate of another CA", daemon.EtcdConfig{CACert: files.CA, Cert: files.OtherCert, Key: files.OtherKey}, "certificate required"}, // Go sends no certificate the server's CA list does not name
		{"another CA to trust", daemon.EtcdConfig{CACert: files.OtherCA, Cert: files.ClientCert, Key: files.ClientKey}, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "register node secure") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Run: %v, want it to say the node was not registered because of: %s", err, tc.wantErr)
			}
		})
	}
}

func manifestValid(name, status, msg string) func([]v1alpha1.Member) bool {
	return func(ms []v1alpha1.Member) bool {
		for _, m := range ms {
			if m.Name != name {
				continue
			}
			for _, c := range m.Status.Conditions {
				if c.Type == v1alpha1.ConditionManifestValid {
					return c.Status == status && strings.Contains(c.Message, msg)
				}
			}
		}
		return false
	}
}

// etcd without quorum: the node keeps its agent and serves reads, says it
// is not ready, refuses writes with 503 unavailable; with the quorum back
// it is ready again and writes go through.
func TestEtcdStore_QuorumLostKeepsTheNodeServing(t *testing.T) {
	t.Parallel()
	own := ownCluster(t)
	prefix := prefixOn(t, own, "/fleet-quorum")
	putProfile(t, prefix)
	n := startNode(t, prefix, "laptop")
	if code, body := n.do(t, "POST", "/members?wait=true", `{"profile":"claude","name":"coder"}`); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, body)
	}
	n.waitFor(t, "coder ready", phaseOf("coder", v1alpha1.PhaseReady))

	own.Stop(1)
	own.Stop(2)
	n.waitFor(t, "etcd reported unavailable", manifestValid("coder", v1alpha1.ConditionUnknown, "etcd unavailable"))
	if code, body := n.do(t, "GET", "/readyz", ""); code == http.StatusOK {
		t.Errorf("GET /readyz without quorum = %d %s, want not ready", code, body)
	}
	if code, body := n.do(t, "GET", "/members/coder", ""); code != http.StatusOK || !strings.Contains(body, `"Ready"`) {
		t.Errorf("GET /members/coder without quorum = %d %s, want the running member", code, body)
	}
	if code, body := n.do(t, "POST", "/members", `{"profile":"claude","name":"helper"}`); code != http.StatusServiceUnavailable || !strings.Contains(body, "etcd unavailable") {
		t.Errorf("POST /members without quorum = %d %s, want 503 saying etcd is unavailable", code, body)
	}

	if err := own.RestartAll(); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "etcd back", manifestValid("coder", v1alpha1.ConditionTrue, ""))
	n.waitFor(t, "coder still ready", phaseOf("coder", v1alpha1.PhaseReady))
	if code, body := n.do(t, "POST", "/members?wait=true", `{"profile":"claude","name":"helper"}`); code != http.StatusCreated {
		t.Fatalf("POST /members after recovery = %d %s", code, body)
	}
}
