package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// childEnv switches the test binary into a daemon: the durability test
// re-executes itself with this variable set to a JSON childConfig, so the
// daemon runs as a separate process that can be killed with SIGKILL,
// without building fleetd first.
const childEnv = "FLEETD_DAEMON_TEST_CHILD"

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	// Every goroutine a daemon started (controllers, the gateway's MCP
	// sessions, the messaging core, the simulated herdr) has ended once
	// Run returned.
	goleak.VerifyTestMain(m)
}

// childConfig is what a child daemon runs with.
type childConfig struct {
	Manifests, State, Listen, Herdr string
	PickupGrace                     time.Duration
	// CrashAt, if set, kills the child with SIGKILL at its CrashAt-th
	// write of the state database; Torn writes half of that batch first.
	CrashAt int
	Torn    bool
}

// runChild runs a daemon until SIGTERM (or SIGKILL). It prints "ready URL"
// on stdout once listening; logs go to stderr.
func runChild(raw string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := Config{
		ManifestsDir: cc.Manifests, StateDir: cc.State, Listen: cc.Listen, HerdrSocket: cc.Herdr,
		Messaging: &messaging.Options{PickupGrace: cc.PickupGrace},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Ready:     func(i Info) { fmt.Printf("ready %s\n", i.URL) },
	}
	if cc.CrashAt > 0 {
		cfg.stateFile = crashAt(cc.CrashAt, cc.Torn)
	}
	err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	return 0
}

// child is a daemon running in a subprocess.
type child struct {
	cmd     *exec.Cmd
	url     string
	exited  chan struct{} // closed once Wait returned
	waitErr error         // Wait's result, set before exited is closed
}

// startChild starts a daemon subprocess with cc and returns once it is
// listening. Its log is shown if the test fails; it is killed when the
// test ends if still running.
func startChild(t *testing.T, ctx context.Context, cc childConfig, logName string) *child {
	t.Helper()
	raw, _ := json.Marshal(cc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	logPath := filepath.Join(t.TempDir(), logName)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logFile.Close() // the child has its own descriptor
	c := &child{cmd: cmd, exited: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			<-c.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s:\n%s", logName, b)
		}
	})
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			t.Fatalf("child daemon said %q, want ready URL", line)
		}
		c.url = url
		return c
	case <-c.exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("child daemon exited before listening: %v\n%s", c.waitErr, b)
	case <-ctx.Done():
		t.Fatal("child daemon did not start listening")
	}
	return nil
}

// kill ends the child with SIGKILL (no shutdown code runs) and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL", c.waitErr)
	}
}

// startHerdr starts a fake herdr on a socket of its own that outlives any
// daemon of the test.
func startHerdr(t *testing.T) *herdrsim.Server {
	t.Helper()
	srv, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}
