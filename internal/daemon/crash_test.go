package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/statedb"
)

// crashingFile kills its process with SIGKILL at the at-th write of the
// state database (counted across every file it opens): before writing a
// byte, or, torn, after writing half of the batch. Nothing of fleetd runs
// after it: no deferred call, no shutdown, no flush.
type crashingFile struct {
	statedb.File
	n    *atomic.Int32
	at   int32
	torn bool
}

func (f *crashingFile) Write(p []byte) (int, error) {
	if f.n.Add(1) == f.at {
		if f.torn {
			f.File.Write(p[:len(p)/2])
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not handled: nothing comes back from here
	}
	return f.File.Write(p)
}

// crashAt is a Config.stateFile that kills the process at the at-th write.
func crashAt(at int, torn bool) func(statedb.File) statedb.File {
	var n atomic.Int32
	return func(f statedb.File) statedb.File { return &crashingFile{File: f, n: &n, at: int32(at), torn: torn} }
}

// TestCrash_AtEveryStateWriteNothingOwnedIsForgottenOrAdoptedTwice kills
// fleetd at every write of its state database, one run per write point —
// before the write and with the write torn in half — while it does what
// writes the most: a member's pane closed while fleetd was down is
// replaced (its record dropped, its token revoked, a new token minted, a
// new record, the token bound), a new member is created, a deleted member's
// tab is closed and its memory forgotten. A fleetd started again on the
// same state directory and herdr must then show that every record a pane
// depended on was durable before herdr acted on it:
//   - every pane in which the killed fleetd started an agent is the
//     member's pane after the restart (adopted, not closed and started
//     again): its ownership record was durable before agent.start;
//   - every member has one tab, and no tab fleetd labels is left over:
//     nothing is adopted twice;
//   - the token in each member's pane authenticates: its hash was durable
//     before the pane that carries it was created.
//
// The last run is the one that finishes without reaching its write point
// (a SIGTERM stops it, and the flush at shutdown is a write point too).
func TestCrash_AtEveryStateWriteNothingOwnedIsForgottenOrAdoptedTwice(t *testing.T) {
	t.Parallel()
	for _, torn := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed before the write", true: "killed mid-write"}[torn], func(t *testing.T) {
			t.Parallel()
			for at := 1; ; at++ {
				if !crashRun(t, at, torn) {
					t.Logf("%d write points, each crashed at", at-1)
					return
				}
				if at == 64 {
					t.Fatal("64 write points and the run still reaches the next: the scenario does not end")
				}
			}
		})
	}
}

const crashFleet = profileOnly + `---
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: beta}
spec: {profile: claude}
`

func memberDoc(name string) string {
	return "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec: {profile: claude}\n"
}

// crashRun plays the scenario with fleetd killed at its at-th write and
// checks the restart; it reports whether fleetd reached that write.
func crashRun(t *testing.T, at int, torn bool) (crashed bool) {
	t.Helper()
	ctx := testCtx(t)
	srv := startHerdr(t)
	dir, state := t.TempDir(), t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("fleet.yaml", crashFleet)
	write("alpha.yaml", memberDoc("alpha"))
	cfg := Config{ManifestsDir: dir, StateDir: state, HerdrSocket: srv.SocketPath()}

	// An earlier fleetd ran alpha and beta and stopped.
	info, stop := serveInProcess(t, cfg)
	before := waitReady(t, ctx, info, "alpha", "beta")
	stop()
	// While fleetd was down: alpha deleted, gamma declared, beta's pane
	// closed.
	if err := os.Remove(filepath.Join(dir, "alpha.yaml")); err != nil {
		t.Fatal(err)
	}
	write("gamma.yaml", memberDoc("gamma"))
	if err := srv.KillPane(before["beta"].PaneID); err != nil {
		t.Fatal(err)
	}
	starts, closes := srv.Calls()["agent.start"], srv.Calls()["tab.close"]
	seen := len(srv.Requests())

	crashed = runCrashChild(t, ctx, srv, childConfig{Manifests: dir, State: state, Listen: "127.0.0.1:0", Herdr: srv.SocketPath(), CrashAt: at, Torn: torn},
		func(ctx context.Context) error {
			// Done: beta replaced, gamma started, alpha's tab closed.
			if err := srv.WaitCalls(ctx, "agent.start", starts+2); err != nil {
				return err
			}
			return srv.WaitCalls(ctx, "tab.close", closes+1)
		})
	started := agentStartsSince(t, srv, seen) // member → pane, by the killed fleetd

	// fleetd started again.
	info, _ = serveInProcess(t, cfg)
	after := waitReady(t, ctx, info, "beta", "gamma")
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool { return len(ms) == 2 }); err != nil {
		t.Fatalf("write %d: alpha, deleted, is still listed: %v", at, err)
	}
	for member, pane := range started {
		if after[member].PaneID != pane {
			t.Errorf("write %d: fleetd started %s's agent in pane %s before it was killed, and then gave it pane %s: the pane was not adopted",
				at, member, pane, after[member].PaneID)
		}
	}
	labelled := fleetdTabs(t, ctx, srv)
	want := map[string]string{after["beta"].TabID: controllers.TabLabelPrefix + "beta", after["gamma"].TabID: controllers.TabLabelPrefix + "gamma"}
	if fmt.Sprint(labelled) != fmt.Sprint(want) {
		t.Errorf("write %d: fleetd's tabs after the restart %v; want one per member %v", at, labelled, want)
	}
	for _, m := range []string{"beta", "gamma"} {
		env, _ := srv.PaneEnv(after[m].PaneID)
		if code := postMCP(t, info.MCPURL, env[harness.TokenEnv], ""); code == http.StatusUnauthorized {
			t.Errorf("write %d: %s's token in its pane %s is refused after the restart", at, m, after[m].PaneID)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return crashed
}

// serveInProcess runs a daemon with cfg on a free port until stop (or the
// end of the test).
func serveInProcess(t *testing.T, cfg Config) (Info, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Info, 1)
	done := make(chan error, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Ready = func(i Info) { ready <- i }
	go func() { done <- Run(ctx, cfg) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case info := <-ready:
		return info, stop
	case err := <-done:
		stopped = true
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start listening")
	}
	return Info{}, nil
}

// waitReady waits until the members are Ready and returns their status.
func waitReady(t *testing.T, ctx context.Context, info Info, names ...string) map[string]v1alpha1.MemberStatus {
	t.Helper()
	got := map[string]v1alpha1.MemberStatus{}
	err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		clear(got)
		for _, m := range ms {
			if m.Status.Phase == v1alpha1.PhaseReady {
				got[m.Name] = m.Status
			}
		}
		for _, n := range names {
			if _, ok := got[n]; !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%v not Ready: %v (Ready: %v)", names, err, got)
	}
	return got
}

// runCrashChild runs fleetd in a child process killed at its cc.CrashAt-th
// write of the state database. If it finishes the scenario (done returns
// nil) first, it is stopped with SIGTERM, and its shutdown may still reach
// the write point. It reports whether the child was killed at the write.
func runCrashChild(t *testing.T, ctx context.Context, srv *herdrsim.Server, cc childConfig, done func(context.Context) error) bool {
	t.Helper()
	raw, _ := json.Marshal(cc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var log strings.Builder
	cmd.Stderr = &log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // drain "ready URL"
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	finished := make(chan error, 1)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { finished <- done(dctx) }()
	var waitErr error
	select {
	case waitErr = <-exited:
	case err := <-finished:
		if err != nil {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("write %d: the scenario did not finish: %v\n%s", cc.CrashAt, err, log.String())
		}
		cmd.Process.Signal(syscall.SIGTERM)
		waitErr = <-exited
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		return true
	case waitErr != nil:
		t.Fatalf("write %d: fleetd ended with %v, neither killed at the write nor stopped\n%s", cc.CrashAt, waitErr, log.String())
	}
	return false
}

// agentStartsSince returns, per member, the pane of the last agent.start
// herdr got after its first seen requests, if that pane runs the member's
// agent now: herdr records a request before it answers, and refuses some
// (a pane whose shell is still starting is busy) — those started nothing
// that could be adopted.
func agentStartsSince(t *testing.T, srv *herdrsim.Server, seen int) map[string]string {
	t.Helper()
	running := map[string]string{} // pane → its agent
	for _, p := range srv.Panes() {
		running[p.ID] = p.AgentName
	}
	out := map[string]string{}
	for _, r := range srv.Requests()[seen:] {
		if r.Method != "agent.start" {
			continue
		}
		var p struct {
			Name   string `json:"name"`
			PaneID string `json:"pane_id"`
		}
		if err := json.Unmarshal(r.Params, &p); err != nil {
			t.Fatal(err)
		}
		out[p.Name] = p.PaneID
	}
	for member, pane := range out {
		if running[pane] != member {
			delete(out, member)
		}
	}
	return out
}

// fleetdTabs returns every tab herdr has that fleetd labels, by id.
func fleetdTabs(t *testing.T, ctx context.Context, srv *herdrsim.Server) map[string]string {
	t.Helper()
	c := herdr.New(&herdr.Options{SocketPath: srv.SocketPath()})
	wss, err := c.ListWorkspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ws := range wss {
		tabs, err := c.ListTabs(ctx, ws.WorkspaceID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tab := range tabs {
			if strings.HasPrefix(tab.Label, controllers.TabLabelPrefix) {
				out[tab.TabID] = tab.Label
			}
		}
	}
	return out
}
