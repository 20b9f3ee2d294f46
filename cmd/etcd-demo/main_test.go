package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// The demo starts etcd and two nodes at once, with no token copied
// between them, places the example members on both
// (by name, by selector, spread), shows each Ready with its node's status
// and the one no node can take as Pending, sends through one node to a
// member on the other and gets its reply, then stops everything.
func TestRun_PlacesMembersOnBothNodes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fleetd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetd-dev/fleetd/cmd/fleetd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	dir := t.TempDir()
	err := run(ctx, options{fleetd: bin, dir: dir, profiles: "../../manifests/profiles.yaml", members: "../../manifests/cluster", once: true}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^profile/claude created\nprofile/codex created\nmember/reviewer created\n`, // the Profiles through fleetd apply, before the Members
		`(?m)^buildbox\s+Ready\s+gpu=a100\s+2\s`,
		`(?m)^laptop\s+Ready\s+kind=laptop\s+2\s`,
		`(?m)^reviewer\s+Ready\s.*\slaptop\s`,
		`(?m)^trainer\s+Ready\s+idle\s+w\d+:p\d+\s.*\sbuildbox\s`, // buildbox's status, as laptop shows it
		`(?m)^tpu-job\s+Pending\s.*\s-\s+codex\s`,
		`(?m)^echo: hello from laptop$`, // the send through laptop to trainer on buildbox
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("output has no line matching %s:\n%s", want, text)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("state under %s: %v, want etcd, laptop and buildbox", dir, entries)
	}
	// One primary token, in the state directory of the node that minted
	// it alone: nothing was copied.
	minted := 0
	for _, node := range []string{"laptop", "buildbox"} {
		if _, err := os.Stat(filepath.Join(dir, node, "primary.token")); err == nil {
			minted++
		}
	}
	if minted != 1 {
		t.Errorf("%d nodes hold a primary.token; want the one that minted the fleet's", minted)
	}
	if !regexp.MustCompile(`(?m)^  (laptop|buildbox) minted the fleet's primary token; the fleetd command line uses it as FLEETD_TOKEN`).MatchString(text) {
		t.Errorf("output does not say which node minted the token:\n%s", text)
	}
}

// TestDemo_CtrlCExitsZeroOnTheAskedPorts runs the demo as `make
// run-cluster LISTEN=…` does — the built binary with -listen — and presses
// Ctrl-C once it waits: the nodes listen on the asked port and the next,
// and the demo stops everything and exits 0 (make then reports no error).
func TestDemo_CtrlCExitsZeroOnTheAskedPorts(t *testing.T) {
	dir := t.TempDir()
	fleetd, demo := filepath.Join(dir, "fleetd"), filepath.Join(dir, "etcd-demo")
	for bin, pkg := range map[string]string{fleetd: "./cmd/fleetd", demo: "./cmd/etcd-demo"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	port := freePortPair(t)
	cmd := exec.Command(demo, "-fleetd", fleetd, "-dir", filepath.Join(dir, "state"), "-listen", "127.0.0.1:"+strconv.Itoa(port),
		"-profiles", "../../manifests/profiles.yaml", "-members", "../../manifests/cluster")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	waiting := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			out.WriteString(lines.Text() + "\n")
			if strings.HasPrefix(lines.Text(), "Ctrl-C stops") {
				close(waiting)
			}
		}
	}()
	select {
	case <-waiting:
	case <-copied:
		_ = cmd.Wait()
		t.Fatalf("the demo ended before it waited for Ctrl-C:\n%s\nstderr:\n%s", out.String(), stderr.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-copied
		_ = cmd.Wait()
		t.Fatalf("the demo did not reach Ctrl-C within 2 minutes:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-copied
	if err := cmd.Wait(); err != nil {
		t.Errorf("after Ctrl-C the demo exited with %v, want 0; stderr:\n%s", err, stderr.String())
	}
	text := out.String()
	for _, want := range []string{
		"node laptop (kind=laptop) on http://127.0.0.1:" + strconv.Itoa(port) + ",",
		"node buildbox (gpu=a100) on http://127.0.0.1:" + strconv.Itoa(port+1) + ",",
		"Stopping the nodes and etcd; the simulated herdrs and their agents stop with them.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output has no %q:\n%s", want, text)
		}
	}
}

// freePortPair is a loopback port that is free, with the next one free too.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1))
		a.Close()
		if err == nil {
			b.Close()
			return port
		}
	}
	t.Fatal("no two free consecutive loopback ports")
	return 0
}

func TestNodeListen(t *testing.T) {
	for _, tt := range []struct {
		listen string
		i      int
		want   string
		err    string
	}{
		{"", 1, "127.0.0.1:0", ""},
		{"127.0.0.1:18080", 0, "127.0.0.1:18080", ""},
		{"127.0.0.1:18080", 1, "127.0.0.1:18081", ""},
		{"[::1]:9000", 1, "[::1]:9001", ""},
		{"18080", 0, "", "want HOST:PORT"},
		{"127.0.0.1:65535", 1, "", "want a port from 1 to 65534"},
	} {
		got, err := options{listen: tt.listen}.nodeListen(tt.i)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("nodeListen(%q, %d) = %q, %v; want %q, error %q", tt.listen, tt.i, got, err, tt.want, tt.err)
		}
	}
}

// The demo prints the fleet only once it is placed: both nodes Ready, and
// each member Ready on its node or Pending because no Ready node can take
// it. A member Unschedulable while a node is not Ready yet, or one the
// scheduler has not bound yet (Unschedulable too, "waiting for the
// scheduler to bind it"), is not placed. (The demo printed every member
// Pending and laptop NotReady when it read the fleet that early.)
func TestPlaced_CountsAMemberOnlyWhereNoReadyNodeCanTakeIt(t *testing.T) {
	node := func(name string, ready bool, members int, labels map[string]string) v1alpha1.Node {
		st := v1alpha1.ConditionFalse
		if ready {
			st = v1alpha1.ConditionTrue
		}
		return v1alpha1.Node{ObjectMeta: v1alpha1.ObjectMeta{Name: name, Labels: labels},
			Status: v1alpha1.NodeStatus{Members: members, Conditions: []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: st}}}}
	}
	member := func(name, node, phase string, selector map[string]string) v1alpha1.Member {
		m := v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberSpec{NodeSelector: selector},
			Status: v1alpha1.MemberStatus{NodeName: node, Phase: phase}}
		if node == "" {
			m.Status.Conditions = []v1alpha1.Condition{{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse, Reason: v1alpha1.ReasonUnschedulable}}
		}
		return m
	}
	gpu, tpu := map[string]string{"gpu": "a100"}, map[string]string{"accelerator": "tpu"}
	for _, tt := range []struct {
		name    string
		nodes   []v1alpha1.Node
		members []v1alpha1.Member
		settled int
	}{
		{"laptop's herdr not answering yet",
			[]v1alpha1.Node{node("laptop", false, 0, nil), node("buildbox", true, 0, gpu)},
			[]v1alpha1.Member{member("trainer", "", v1alpha1.PhasePending, gpu), member("tpu-job", "", v1alpha1.PhasePending, tpu)}, 0},
		{"trainer not bound yet",
			[]v1alpha1.Node{node("laptop", true, 0, nil), node("buildbox", true, 0, gpu)},
			[]v1alpha1.Member{member("trainer", "", v1alpha1.PhasePending, gpu), member("tpu-job", "", v1alpha1.PhasePending, tpu)}, 1},
		{"placed",
			[]v1alpha1.Node{node("laptop", true, 0, nil), node("buildbox", true, 1, gpu)},
			[]v1alpha1.Member{member("trainer", "buildbox", v1alpha1.PhaseReady, gpu), member("tpu-job", "", v1alpha1.PhasePending, tpu)}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/nodes":
					json.NewEncoder(w).Encode(map[string]any{"items": tt.nodes})
				case "/members":
					json.NewEncoder(w).Encode(map[string]any{"items": tt.members})
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			nodes := []*demoNode{{name: "laptop", url: srv.URL}, {name: "buildbox", url: srv.URL}}
			settled, total, _ := placed(context.Background(), nodes)
			if settled != tt.settled || total != len(tt.members) {
				t.Errorf("placed = %d of %d; want %d of %d", settled, total, tt.settled, len(tt.members))
			}
		})
	}
}
