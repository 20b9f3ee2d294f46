package multihost

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/fleet"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// fleetdBinary builds cmd/fleetd once for the package's tests; TestMain
// removes it.
func fleetdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "fleetd")
		buildOut, buildErr = exec.Command("go", "build", "-o", binary, "github.com/fleetd-dev/fleetd/cmd/fleetd").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/fleetd: %v\n%s", buildErr, buildOut)
	}
	return binary
}

// `fleetd serve --store etcd …`, from flags or from the environment,
// registers the node in etcd, serves the fleet there and, stopped,
// removes its registration at once.
func TestServe_EtcdStoreFromFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	bin := fleetdBinary(t)
	endpoints := strings.Join(cluster.Endpoints(), ",")
	cli := etcdClient(t)
	flagPrefix, envPrefix := uniquePrefix("/cli-flags"), uniquePrefix("/cli-env")
	for _, tc := range []struct {
		name, prefix, node string
		args, env          []string
		labels             map[string]string
		maxMembers         int
	}{
		{"flags", flagPrefix, "flagged", []string{"--store", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", flagPrefix, "--node", "flagged",
			"--node-labels", "zone=a,gpu=yes", "--max-members", "3"}, nil, map[string]string{"zone": "a", "gpu": "yes"}, 3},
		{"environment", envPrefix, "from-env", nil, []string{"FLEETD_STORE=etcd", "FLEETD_ETCD_ENDPOINTS=" + endpoints, "FLEETD_ETCD_PREFIX=" + envPrefix, "FLEETD_NODE=from-env",
			"FLEETD_NODE_LABELS=zone=b", "FLEETD_MAX_MEMBERS=2"}, map[string]string{"zone": "b"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix, node := tc.prefix, tc.node
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--herdr", "sim", "--listen", "127.0.0.1:0",
				"--state-dir", t.TempDir(), "--log-level", "error"}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			if !lines.Scan() {
				cmd.Wait()
				t.Fatalf("serve printed nothing; stderr:\n%s", stderr.String())
			}
			want := "fleetd is serving etcd " + prefix + " on " + endpoints + " as node " + node + " on http://127.0.0.1:"
			if first := lines.Text(); !strings.HasPrefix(first, want) {
				t.Errorf("first line %q, want prefix %q", first, want)
			}
			resp, err := cli.Get(ctx, prefix+"/nodes/"+node)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("node key while serving: %v %v", resp, err)
			}
			var info fleet.NodeInfo
			if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil || !maps.Equal(info.Labels, tc.labels) || info.MaxMembers != tc.maxMembers {
				t.Errorf("registered %s (%v), want labels %v and maxMembers %d", resp.Kvs[0].Value, err, tc.labels, tc.maxMembers)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			for lines.Scan() {
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("serve exited with %v; stderr:\n%s", err, stderr.String())
			}
			if resp, _ := cli.Get(ctx, prefix+"/nodes/"+node); len(resp.Kvs) != 0 {
				t.Error("the node's key outlived a clean stop")
			}
		})
	}
}
