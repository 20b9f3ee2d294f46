// Command etcd-demo is `make run-cluster`: a fleet of two fleetd nodes on
// one machine. It starts a single-member etcd on loopback inside this
// process (etcd's server is linked here, never into fleetd), starts two
// `fleetd serve --store etcd --herdr=sim` nodes (laptop, labelled
// kind=laptop, and buildbox, labelled gpu=a100) with their own state
// directories and ports, at once and with nothing copied between them (the
// first to claim the fleet's primary token mints it; the command line gets
// it from `fleetd token --show` on that node, as FLEETD_TOKEN), applies the
// example Profiles and manifests/cluster
// through the first (`fleetd apply -f`), waits until both nodes are Ready
// and every member is Ready on its node or no Ready node can take it,
// prints `fleetd get nodes` and `fleetd get
// members -o wide`, and sends a message through laptop to a member on
// buildbox (`fleetd send`, answered by the simulated agent). Then it runs
// until interrupted (or, with -once, stops everything and exits).
//
// The nodes listen on free loopback ports, or, with -listen HOST:PORT, the
// first on that address and the second on the next port. Ctrl-C (SIGINT)
// or SIGTERM stops the nodes and etcd and exits 0: `make run-cluster` runs
// the built binary, not `go run`, which exits 1 whenever its child was
// interrupted, so that make reports no error either.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

func main() {
	var o options
	flag.StringVar(&o.fleetd, "fleetd", "bin/fleetd", "the fleetd binary")
	flag.StringVar(&o.dir, "dir", "", "where etcd and the nodes keep their state (default: a temporary directory, removed at the end)")
	flag.StringVar(&o.profiles, "profiles", "manifests/profiles.yaml", "the Profiles to apply")
	flag.StringVar(&o.members, "members", "manifests/cluster", "the Members to apply")
	flag.BoolVar(&o.once, "once", false, "print the fleet once it is placed, then stop everything and exit")
	flag.StringVar(&o.listen, "listen", "", "HOST:PORT of the first node's listener; the next node listens on the next port (default: free loopback ports)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-demo:", err)
		os.Exit(1)
	}
}

type options struct {
	fleetd, dir, profiles, members string
	once                           bool
	listen                         string // the first node's; "" for free ports
}

// nodeListen is the --listen of node i (0 is the first): the port after
// the one before it when o.listen is set, else a free port.
func (o options) nodeListen(i int) (string, error) {
	if o.listen == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return "", fmt.Errorf("-listen %s: want HOST:PORT", o.listen)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+i > 65535 {
		return "", fmt.Errorf("-listen %s: want a port from 1 to %d", o.listen, 65535-i)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i)), nil
}

// demoNode is one fleetd node of the demo.
type demoNode struct {
	name, labels, listen, state, url string
	cmd                              *exec.Cmd
	done                             chan error
	// token is the fleet's primary token, which the command line is
	// given (FLEETD_TOKEN) whichever node it asks.
	token string
}

const prefix = "/fleetd"

func run(ctx context.Context, o options, out io.Writer) (err error) {
	if o.dir == "" {
		dir, err := os.MkdirTemp("", "fleetd-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.dir = dir
	}
	nodes := []*demoNode{{name: "laptop", labels: "kind=laptop"}, {name: "buildbox", labels: "gpu=a100"}}
	for i, n := range nodes {
		if n.listen, err = o.nodeListen(i); err != nil {
			return err
		}
	}
	cluster, err := etcdtest.Start(1, &etcdtest.Options{Dir: filepath.Join(o.dir, "etcd"), TickMs: 100, ElectionMs: 1000})
	if err != nil {
		return err
	}
	defer cluster.Close()
	endpoint := cluster.Endpoint(0)
	fmt.Fprintf(out, "etcd (embedded, single member) on %s\n", endpoint)

	defer func() {
		for _, n := range nodes {
			if n.cmd != nil {
				n.cmd.Process.Signal(syscall.SIGTERM)
				if werr := <-n.done; werr != nil && err == nil {
					err = fmt.Errorf("node %s: %w", n.name, werr)
				}
			}
		}
	}()
	// Both nodes start at once, with nothing copied between them: the
	// first to claim the fleet's primary token mints it; the other accepts
	// it from etcd.
	started := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { started <- n.start(ctx, o, endpoint) }()
	}
	for range nodes {
		if serr := <-started; serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		return err
	}
	for _, n := range nodes {
		fmt.Fprintf(out, "node %s (%s) on %s, state %s\n", n.name, n.labels, n.url, n.state)
	}
	// The command line takes the fleet's token from FLEETD_TOKEN, printed
	// by `fleetd token` on the node that minted it.
	minter, token, err := mintedBy(ctx, o, nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s minted the fleet's primary token; the fleetd command line uses it as FLEETD_TOKEN (fleetd token --show on %s)\n", minter.name, minter.name)
	for _, n := range nodes {
		n.token = token
	}
	first := nodes[0]
	fmt.Fprintf(out, "\n$ fleetd apply -f %s -f %s   (asking node %s)\n", o.profiles, o.members, first.name)
	msg, err := first.fleetctl(ctx, o, "apply", "-f", o.profiles, "-f", o.members)
	if err != nil {
		return fmt.Errorf("apply %s and %s: %w\n%s", o.profiles, o.members, err, msg)
	}
	fmt.Fprint(out, msg)
	if err := waitPlaced(ctx, nodes); err != nil {
		return err
	}
	for _, args := range [][]string{{"get", "nodes"}, {"get", "members", "-o", "wide"}} {
		fmt.Fprintf(out, "\n$ fleetd %s   (asking node %s)\n", strings.Join(args, " "), first.name)
		text, err := first.fleetctl(ctx, o, args...)
		if err != nil {
			return fmt.Errorf("fleetd %s: %w\n%s", strings.Join(args, " "), err, text)
		}
		fmt.Fprint(out, text)
	}
	// A send that crosses machines: trainer runs on buildbox, the primary
	// asks laptop; the simulated agent's reply comes back in the call.
	fmt.Fprintf(out, "\n$ fleetd send trainer \"hello from laptop\"   (asking node %s; trainer runs on buildbox)\n", first.name)
	text, err := first.fleetctl(ctx, o, "send", "trainer", "hello from laptop", "--timeout", "30s")
	if err != nil {
		return fmt.Errorf("fleetd send trainer: %w\n%s", err, text)
	}
	fmt.Fprint(out, text)
	if o.once {
		return nil
	}
	fmt.Fprintf(out, "\nTry: FLEETD_TOKEN=$(%s token --show --state-dir %s) %s get members -o wide --server %s\nCtrl-C stops the nodes and etcd.\n",
		o.fleetd, minter.state, o.fleetd, first.url)
	<-ctx.Done()
	fmt.Fprintln(out, "\nStopping the nodes and etcd; the simulated herdrs and their agents stop with them.")
	return nil
}

// mintedBy returns the node whose state directory holds the fleet's
// primary token, and the token, as `fleetd token --show` prints it there.
func mintedBy(ctx context.Context, o options, nodes []*demoNode) (*demoNode, string, error) {
	for _, n := range nodes {
		if _, err := os.Stat(statedir.At(n.state).PrimaryToken()); err != nil {
			continue
		}
		tok, err := exec.CommandContext(ctx, o.fleetd, "token", "--show", "--state-dir", n.state, "--server", n.url).Output()
		if err != nil {
			return nil, "", fmt.Errorf("fleetd token on node %s: %w", n.name, err)
		}
		return n, strings.TrimSpace(string(tok)), nil
	}
	return nil, "", fmt.Errorf("no node holds the fleet's primary token")
}

// start runs `fleetd serve` for the node and reads its URL from the banner.
func (n *demoNode) start(ctx context.Context, o options, endpoint string) error {
	n.state = filepath.Join(o.dir, n.name)
	if err := os.MkdirAll(n.state, 0o700); err != nil {
		return err
	}
	n.cmd = exec.Command(o.fleetd, "serve", "--store", "etcd", "--etcd-endpoints", endpoint, "--etcd-prefix", prefix,
		"--node", n.name, "--node-labels", n.labels, "--herdr", "sim", "--listen", n.listen, "--state-dir", n.state, "--log-level", "error")
	n.cmd.Env = append(os.Environ(), "ACME_FLEETD_TOKEN=sim-demo-credential")
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	n.cmd.Stderr = os.Stderr
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return fmt.Errorf("start node %s: %w", n.name, err)
	}
	n.done = make(chan error, 1)
	lines := bufio.NewScanner(stdout)
	banner := make(chan string, 1)
	go func() {
		if lines.Scan() {
			banner <- lines.Text()
		}
		close(banner)
		for lines.Scan() {
		}
		n.done <- n.cmd.Wait()
	}()
	select {
	case line, ok := <-banner:
		i := strings.LastIndex(line, " on http://") // the banner names etcd's endpoint first
		if !ok || i < 0 {
			return fmt.Errorf("node %s printed no banner (%q)", n.name, line)
		}
		n.url = strings.Fields(line[i+len(" on "):])[0]
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %s did not start within 30 s", n.name)
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// fleetctl runs a fleetd client command against the node.
func (n *demoNode) fleetctl(ctx context.Context, o options, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, o.fleetd, append(args, "--server", n.url)...)
	cmd.Env = append(os.Environ(), "FLEETD_TOKEN="+n.token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitPlaced waits (up to a minute, reading the first node's members
// every 200 ms) until, as the first node sees the fleet (the other nodes
// publish their members' status), every node of the demo is Ready, every
// node's registration counts the members bound to it, and every member is
// either Ready on the node that runs it or Unschedulable because no Ready
// node can take it — so what the demo prints next is the fleet placed.
func waitPlaced(ctx context.Context, nodes []*demoNode) error {
	deadline := time.Now().Add(time.Minute)
	for {
		settled, total, err := placed(ctx, nodes)
		if err == nil && total > 0 && settled == total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute %d of %d members are placed and Ready (%v)", settled, total, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// placed counts the members that are placed in the first node's view:
// Ready on their node, or Unschedulable where the scheduler's rule finds
// no Ready node for them. None is while a node of the demo is not
// registered Ready yet: a member no node can take then (each node's herdr
// answers only some time after it starts) may be one a node takes next; a
// member the scheduler has not bound yet (Scheduling) is not placed
// either. A node whose published member count is not yet what is bound to
// it counts none of its members.
func placed(ctx context.Context, nodes []*demoNode) (settled, total int, err error) {
	var registered struct{ Items []v1alpha1.Node }
	if err := nodes[0].read(ctx, "/nodes", &registered); err != nil {
		return 0, 0, err
	}
	published := map[string]int{}
	var ready []scheduler.Node
	for _, node := range registered.Items {
		published[node.Name] = node.Status.Members
		ready = append(ready, scheduler.Node{Name: node.Name, Labels: node.Labels, MaxMembers: node.Spec.MaxMembers,
			Ready: node.ReadyCondition().Status == v1alpha1.ConditionTrue})
	}
	var list struct{ Items []v1alpha1.Member }
	if err := nodes[0].read(ctx, "/members", &list); err != nil {
		return 0, 0, err
	}
	for _, n := range nodes {
		if !slices.ContainsFunc(ready, func(r scheduler.Node) bool { return r.Name == n.name && r.Ready }) {
			return 0, len(list.Items), fmt.Errorf("node %s is not Ready yet", n.name)
		}
	}
	bound := map[string]int{}
	for _, m := range list.Items {
		bound[m.Status.NodeName]++
	}
	for _, m := range list.Items {
		switch {
		case m.Status.NodeName != "" && bound[m.Status.NodeName] != published[m.Status.NodeName]:
			// its node's registration lags: not settled yet
		case m.Status.NodeName != "" && m.Status.Phase == v1alpha1.PhaseReady:
			settled++
		case m.Status.NodeName == "" && readyReason(m) == v1alpha1.ReasonUnschedulable:
			if node, _ := scheduler.Place(&m, ready, bound); node == "" {
				settled++
			}
		}
	}
	return settled, len(list.Items), nil
}

// read GETs path from the node's REST API with the fleet's primary token.
func (n *demoNode) read(ctx context.Context, path string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func readyReason(m v1alpha1.Member) string {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}
