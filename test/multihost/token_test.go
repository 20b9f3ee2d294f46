package multihost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// status returns the HTTP status of GET path on n with token.
func (n *fleetNode) status(t *testing.T, token, path string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.info.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// One primary token for the fleet: the first node mints it and etcd holds
// only its hash; every node's gateway accepts it; a node started with a
// primary.token of its own keeps the file but refuses that token; a node
// without one creates none. Worker tokens stay each node's own. A new hash
// in etcd reaches every node without a restart.
func TestFleetToken_OneTokenAtEveryGateway(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix("/fleet-token")
	putProfile(t, prefix)
	cli := etcdClient(t)
	ctx := context.Background()
	a := startNode(t, prefix, "a")
	resp, err := cli.Get(ctx, prefix+"/tokens/primary")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the fleet's token hash: %v %v", resp, err)
	}
	var stored struct{ SHA256, Node string }
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil || stored.SHA256 != hashOf(a.token) || stored.Node != "a" {
		t.Errorf("etcd holds %s (%v), want a's token's hash and node a", resp.Kvs[0].Value, err)
	}
	if strings.Contains(string(resp.Kvs[0].Value), a.token) {
		t.Error("etcd holds the primary token itself")
	}

	stateB := t.TempDir()
	b, _ := runDaemon(t, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: stateB,
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "b"}})
	if _, err := os.Stat(statedir.At(stateB).PrimaryToken()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b, started in a fleet with a token, has a primary.token of its own (%v); want none", err)
	}

	// c comes with a primary.token of its own, from before it joined.
	stateC := t.TempDir()
	own := "c-own-token-0123456789abcdefghijklmnopqrstuvwxyz"
	if err := os.WriteFile(filepath.Join(stateC, "primary.token"), []byte(own+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := runDaemon(t, daemon.Config{Sim: true, SimValidator: validated.Schema(), StateDir: stateC,
		Etcd: &daemon.EtcdConfig{Endpoints: cluster.Endpoints(), Prefix: prefix, Node: "c"}})
	for name, n := range map[string]*fleetNode{"a": a, "b": b, "c": c} {
		if got := n.status(t, a.token, "/members"); got != http.StatusOK {
			t.Errorf("the fleet's token at %s's gateway: %d, want 200", name, got)
		}
		if got := n.status(t, own, "/members"); got != http.StatusUnauthorized {
			t.Errorf("c's own token at %s's gateway: %d, want 401", name, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(stateC, "primary.token")); err != nil || string(b) != own+"\n" {
		t.Errorf("c's primary.token is now %q (%v); want it untouched", b, err)
	}

	// A worker's token is good at its own node's gateway only.
	if code, body := a.do(t, "POST", "/members?wait=true", pinned("w", "b")); code != http.StatusCreated {
		t.Fatalf("POST /members = %d %s", code, body)
	}
	m := b.untilMember(t, "w", "Ready", func(m v1alpha1.Member) bool { return m.Status.Phase == v1alpha1.PhaseReady })
	env, _ := b.info.Sim.PaneEnv(m.Status.PaneID)
	worker := env["FLEETD_TOKEN"]
	if worker == "" {
		t.Fatal("w's pane has no FLEETD_TOKEN")
	}
	if got := b.status(t, worker, "/members/w/logs"); got != http.StatusOK {
		t.Errorf("w's worker token at b (its node): %d, want 200", got)
	}
	if got := a.status(t, worker, "/members/w/logs"); got != http.StatusUnauthorized {
		t.Errorf("w's worker token at a: %d, want 401 (worker tokens are each node's own)", got)
	}

	// A new hash in etcd (the token rotated): every node takes it at once.
	rotated := "rotated-token-0123456789abcdefghijklmnopqrstuvwxyz"
	if _, err := cli.Put(ctx, prefix+"/tokens/primary", `{"sha256":"`+hashOf(rotated)+`","node":"c"}`); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*fleetNode{"a": a, "b": b, "c": c} {
		deadline := time.Now().Add(30 * time.Second)
		for n.status(t, rotated, "/members") != http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not accept the rotated token after 30 s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := n.status(t, a.token, "/members"); got != http.StatusUnauthorized {
			t.Errorf("the old token at %s after the rotation: %d, want 401", name, got)
		}
	}
}
