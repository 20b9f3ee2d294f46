package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/mcp"
)

const manifests = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: claude}
spec: {harness: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer}
spec: {profile: claude}
---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: bridged}
spec: {profile: claude, transport: stdio}
`

// startDaemon runs a daemon with the simulated herdr and returns its info
// once it is listening; the daemon stops when the test ends.
func startDaemon(t *testing.T, stateDir string) (Info, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	return runDaemon(t, Config{ManifestsDir: dir, StateDir: stateDir})
}

// runDaemon runs a daemon with cfg on a free loopback port and the
// simulated herdr, and returns its info once it is listening; the daemon
// stops when the test ends.
func runDaemon(t *testing.T, cfg Config) (Info, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	cfg.Listen, cfg.Sim = "127.0.0.1:0", true
	if cfg.SimValidator == nil {
		cfg.SimValidator = validated.Schema()
	}
	cfg.Ready = func(i Info) { ready <- i }
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case info := <-ready:
		return info, done
	case err := <-done:
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	return Info{}, nil
}

func getJSON(t *testing.T, url, token string, out any) int {
	t.Helper()
	code, body := do(t, http.MethodGet, url, token, "")
	if out != nil && code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
	}
	return code
}

func TestRun_SimServesReadyMembers(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	info, _ := startDaemon(t, stateDir)

	primary, err := os.ReadFile(statedir.At(stateDir).PrimaryToken())
	if err != nil {
		t.Fatalf("primary token not created: %v", err)
	}
	if fi, _ := os.Stat(statedir.At(stateDir).PrimaryToken()); fi.Mode().Perm() != 0o600 {
		t.Errorf("primary.token mode = %v, want 0600", fi.Mode().Perm())
	}
	token := strings.TrimSpace(string(primary))

	if code := getJSON(t, info.URL+"/members", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /members without token = %d, want 401", code)
	}
	// The members come up asynchronously: wait on the controller's status
	// notifications, then check the API shows the same.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		ready := 0
		for _, m := range ms {
			if m.Status.Phase == v1alpha1.PhaseReady && m.Status.PaneID != "" {
				ready++
			}
		}
		return ready == 2
	})
	if err != nil {
		t.Fatalf("members not Ready: %v", err)
	}
	var list mcp.MemberList
	if code := getJSON(t, info.URL+"/members", token, &list); code != http.StatusOK {
		t.Fatalf("GET /members = %d", code)
	}
	for _, m := range list.Items {
		if m.Status.Phase != v1alpha1.PhaseReady {
			t.Errorf("GET /members: %s is %s, want Ready", m.Name, m.Status.Phase)
		}
	}
	if code := getJSON(t, info.URL+"/readyz", "", nil); code != http.StatusOK {
		t.Errorf("/readyz = %d", code)
	}
	resp, err := http.Get(info.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`fleetd_members{phase="Ready"} 2`, "go_goroutines", "process_open_fds", `fleetd_herdr_requests_total{code="ok",method="agent.start"} 2`} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}
	if strings.Contains(string(body), token) {
		t.Error("/metrics leaks the primary token")
	}
}

// The same command run twice: the second is told who holds the state
// directory, not that the (same) port is in use.
func TestRun_SecondDaemonOnSameStateDirRefused(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	info, _ := startDaemon(t, stateDir)
	addr := strings.TrimPrefix(info.URL, "http://")
	err := Run(context.Background(), Config{ManifestsDir: t.TempDir(), StateDir: stateDir, Listen: addr, Sim: true})
	if !errors.Is(err, statedir.ErrLocked) {
		t.Fatalf("second Run = %v, want ErrStateDirLocked", err)
	}
	if !strings.Contains(err.Error(), "pid") {
		t.Errorf("error %q does not name the holder's pid", err)
	}
}

func TestRun_PortInUse(t *testing.T) {
	t.Parallel()
	info, _ := startDaemon(t, t.TempDir())
	addr := strings.TrimPrefix(info.URL, "http://")
	err := Run(context.Background(), Config{ManifestsDir: t.TempDir(), StateDir: t.TempDir(), Listen: addr, Sim: true})
	if err == nil || !strings.Contains(err.Error(), "listen on "+addr) {
		t.Fatalf("Run on a busy port = %v, want a listen error naming %s", err, addr)
	}
}
