package multihost

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// The fence's watchdog (docs/multi-host.md#fencing): node a is a `fleetd
// serve` process beside a herdr that outlives it, node b one in this
// process. a is stopped with SIGSTOP — its fleetd runs nothing, its herdr
// and agents run on, its lease expires. a's watchdog, a process of its own,
// closes the panes of a's free members at a's fence deadline, before b may
// start them; the member pinned to a keeps its pane. A watch of both
// herdrs, every 5 ms from before the stop until the fleet converged again
// after SIGCONT, sees no member's agent in both. Stopped cleanly at the
// end, a takes its watchdog with it.
func TestFence_AStoppedFleetdsWatchdogClosesItsPanes(t *testing.T) {
	t.Parallel()
	bin := fleetdBinary(t)
	const rescheduleAfter = 4 * time.Second
	// etcd's own request timeout, not the tests' 1 s: b's etcd is never
	// cut off here, and a write that took over a second under make test's
	// load failed the set-up with a 503.
	f := newHostFleet(t, "/fence-stop", []string{"b"}, &hostOptions{Validate: true, RescheduleAfter: rescheduleAfter, RequestTimeout: etcdstore.DefaultRequestTimeout})
	b := f.host("b")

	dir := t.TempDir()
	aHerdr, err := validated.Start(&herdrsim.Options{SocketPath: filepath.Join(dir, "herdr.sock"), InitialWorkspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aHerdr.Close() })
	var out bytes.Buffer // written by a and its watchdog, read once they exited
	a := exec.Command(bin, "serve", "--store", "etcd", "--etcd-endpoints", strings.Join(clusterOf(f.prefix).Endpoints(), ","),
		"--etcd-prefix", f.prefix, "--node", "a", "--reschedule-after", rescheduleAfter.String(),
		"--herdr-socket", aHerdr.SocketPath(), "--state-dir", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--log-level", "warn")
	a.Stdout, a.Stderr = &out, &out
	a.WaitDelay = 10 * time.Second
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- a.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if stopped {
			a.Process.Signal(syscall.SIGCONT)
		}
		a.Process.Signal(syscall.SIGTERM)
		<-exited
	})

	// a registered and Ready before the members come, so that some are
	// placed on it.
	f.untilNodes(t, "a Ready", time.Minute, func(nodes []v1alpha1.Node) bool {
		return slices.ContainsFunc(nodes, func(n v1alpha1.Node) bool {
			return n.Name == "a" && n.ReadyCondition().Status == v1alpha1.ConditionTrue
		})
	})
	if code, resp := b.running().do(t, "POST", "/members", pinned("keep", "a")); code != 201 {
		t.Fatalf("POST /members = %d %s", code, resp)
	}
	free := []string{"f1", "f2", "f3", "f4"}
	for _, name := range free {
		b.running().apply(t, name)
	}
	all := append([]string{"keep"}, free...)
	// Each member's agent in one of the two herdrs, keep's on a; onA are
	// the free members on a.
	placedOnce := func() string {
		inA, inB := herdrPanes(aHerdr), herdrPanes(b.herdr)
		for _, name := range all {
			if len(inA[name])+len(inB[name]) != 1 {
				return fmt.Sprintf("%s in a's herdr %v, b's %v", name, inA[name], inB[name])
			}
		}
		if len(inA["keep"]) != 1 {
			return "keep is not on a"
		}
		return ""
	}
	waitFor(t, "every member's agent in one herdr", time.Minute, placedOnce)
	var onA []string
	for _, name := range free {
		if len(herdrPanes(aHerdr)[name]) == 1 {
			onA = append(onA, name)
		}
	}
	keepPane := herdrPanes(aHerdr)["keep"][0]
	if len(onA) == 0 {
		t.Fatalf("no free member on a: b runs %v", herdrPanes(b.herdr))
	}

	live := watchLiveAgents(f, map[string]*herdrsim.Server{"a": aHerdr})
	stop := time.Now()
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped = true
	// a's watchdog closes a's free members' panes; keep's stays.
	waitFor(t, "a's free members closed", 30*time.Second, func() string {
		for _, name := range onA {
			if ps := herdrPanes(aHerdr)[name]; len(ps) != 0 {
				return name + " still runs on a"
			}
		}
		return ""
	})
	closed := time.Since(stop)
	waitFor(t, "a's free members on b", time.Minute, func() string {
		for _, name := range onA {
			if ps := herdrPanes(b.herdr)[name]; len(ps) != 1 {
				return fmt.Sprintf("%s in b's herdr %v", name, ps)
			}
		}
		return ""
	})
	if ps := herdrPanes(aHerdr)["keep"]; !slices.Equal(ps, []string{keepPane}) {
		t.Errorf("keep (pinned to a) in a's herdr %v while a was stopped; want its pane %s kept", ps, keepPane)
	}

	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	waitFor(t, "converged again", time.Minute, placedOnce)
	if ps := herdrPanes(aHerdr)["keep"]; ps[0] != keepPane {
		t.Errorf("keep runs in pane %s of a after the stop; want the pane it had, %s", ps[0], keepPane)
	}
	for _, name := range onA {
		if len(herdrPanes(b.herdr)[name]) != 1 {
			t.Errorf("%s is not on b after the stop; want it there, where it was taken over", name)
		}
	}
	twice, samples := live.end()
	if len(twice) != 0 {
		t.Errorf("two live agents for one member, in %d of %d samples: %v", len(twice), samples, twice)
	}

	a.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Errorf("a exited with %v", err)
	}
	exited <- nil // for the cleanup
	log := out.String()
	if !strings.Contains(log, "fence watchdog: closed the tab of a member another node may take over") {
		t.Errorf("a's watchdog logged no closed tab; a's output:\n%s", log)
	}
	if pids := watchdogsOf(t, aHerdr.SocketPath()); len(pids) != 0 {
		t.Errorf("a's watchdog (pid %v) outlived a's clean stop", pids)
	}
	t.Logf("%d samples, none with two live agents for one member; a's watchdog closed %v %s after the stop",
		samples, onA, closed.Round(time.Millisecond))
}

// watchdogsOf returns the pids of the fence watchdogs running on socket.
func watchdogsOf(t *testing.T, socket string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "fence-watchdog") && slices.Contains(args, socket) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
