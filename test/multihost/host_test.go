package multihost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// A hostFleet is a fleet of machines for the tests that kill and restart
// nodes: each fleetHost is a fleetd node next to a simulated herdr of its
// own that outlives the node (a fleetd killed and started again finds its
// agents where it left them), on a state directory and a listen address
// kept across its runs, so that the FLEETD_URL in its panes' environment
// still names its gateway. A node reaches etcd through one proxy per etcd
// member; killing it cuts them first, so it cannot revoke its lease on the
// way down, as a machine that dies does not.
type hostFleet struct {
	tb     testing.TB
	prefix string
	opts   hostOptions
	hosts  []*fleetHost
}

// hostOptions configure a hostFleet; the zero value is the etcd store's
// defaults with a 1 s request timeout.
type hostOptions struct {
	// NodeTTL, RescheduleAfter and RequestTimeout go to every node's
	// EtcdConfig.
	NodeTTL, RescheduleAfter, RequestTimeout time.Duration
	// Behavior is the default behaviour of every herdr's agents.
	Behavior herdrsim.Behavior
	// Client, if set, returns the etcd client hook of the named node
	// (EtcdConfig.Client).
	Client func(node string) func(*clientv3.Config)
	// Validate checks every herdr request against herdr's schema (the
	// tests do; the benchmarks leave it off, as fleetd does).
	Validate bool
	// Messaging tunes every node's messaging core; nil is its defaults.
	Messaging *messaging.Options
	// ToolCallRate is every node's daemon.Config.ToolCallRate: 0 is mcp's
	// limit, negative none (a benchmark's sends back to back are what the
	// limit refuses).
	ToolCallRate float64
	// Cluster is the etcd the fleet is on; nil is the package's.
	Cluster *etcdtest.Cluster
	// FencePolicy is every node's --fence-policy; "" is close.
	FencePolicy daemon.FencePolicy
}

// fleetHost is one machine of a hostFleet.
type fleetHost struct {
	f     *hostFleet
	name  string
	herdr *herdrsim.Server
	state string
	// listen is the address of the first run, kept for the next ones.
	listen string

	mu      sync.Mutex
	node    *fleetNode // nil while the node is down
	proxies []*etcdtest.Proxy
	cancel  context.CancelFunc
	done    chan error
}

// newHostFleet starts the herdrs and nodes of names under a prefix of its
// own made from base, with the Profile claude in it; everything stops when
// the test ends.
func newHostFleet(tb testing.TB, base string, names []string, opts *hostOptions) *hostFleet {
	tb.Helper()
	f := &hostFleet{tb: tb}
	if opts != nil {
		f.opts = *opts
	}
	f.prefix = prefixOn(tb, f.opts.Cluster, base)
	if f.opts.RequestTimeout == 0 {
		f.opts.RequestTimeout = time.Second
	}
	putProfile(tb, f.prefix)
	for _, name := range names {
		f.hosts = append(f.hosts, f.newHost(name))
	}
	for _, h := range f.hosts {
		h.start()
	}
	return f
}

func (f *hostFleet) newHost(name string) *fleetHost {
	f.tb.Helper()
	dir, err := os.MkdirTemp("", "host-")
	if err != nil {
		f.tb.Fatal(err)
	}
	f.tb.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	opts := &herdrsim.Options{SocketPath: filepath.Join(dir, "herdr.sock"), InitialWorkspace: true, Behavior: f.opts.Behavior}
	var srv *herdrsim.Server
	if f.opts.Validate {
		srv, err = validated.Start(opts)
	} else {
		srv, err = herdrsim.Start(opts)
	}
	if err != nil {
		f.tb.Fatal(err)
	}
	h := &fleetHost{f: f, name: name, herdr: srv, state: state, listen: "127.0.0.1:0"}
	// Registered before the node's own cleanup (start): the node stops
	// first, then its herdr.
	f.tb.Cleanup(func() { srv.Close() })
	return h
}

// host returns the named host.
func (f *hostFleet) host(name string) *fleetHost {
	for _, h := range f.hosts {
		if h.name == name {
			return h
		}
	}
	f.tb.Fatalf("no host %s", name)
	return nil
}

// up returns the hosts whose node is running.
func (f *hostFleet) up() []*fleetHost {
	var out []*fleetHost
	for _, h := range f.hosts {
		if h.running() != nil {
			out = append(out, h)
		}
	}
	return out
}

// start runs the host's node and waits until it listens (registered in
// etcd, the desired state read once).
func (h *fleetHost) start() {
	tb := h.f.tb
	tb.Helper()
	var proxies []*etcdtest.Proxy
	var endpoints []string
	for _, e := range clusterOf(h.f.prefix).Endpoints() {
		p := startProxy(tb, e)
		proxies = append(proxies, p)
		endpoints = append(endpoints, p.URL())
	}
	o := h.f.opts
	etcd := &daemon.EtcdConfig{Endpoints: endpoints, Prefix: h.f.prefix, Node: h.name,
		NodeTTL: o.NodeTTL, RescheduleAfter: o.RescheduleAfter, RequestTimeout: o.RequestTimeout, FencePolicy: o.FencePolicy}
	if o.Client != nil {
		etcd.Client = o.Client(h.name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	cfg := daemon.Config{Etcd: etcd, StateDir: h.state, Listen: h.listen, HerdrSocket: h.herdr.SocketPath(),
		Messaging: o.Messaging, ToolCallRate: o.ToolCallRate, Logger: slog.New(slog.DiscardHandler), Ready: func(i daemon.Info) { ready <- i }}
	go func() { done <- daemon.Run(ctx, cfg) }()
	select {
	case info := <-ready:
		token := fleetToken(tb, h.f.prefix, h.state) // the first node's, every node accepts it
		h.mu.Lock()
		h.node = &fleetNode{info: info, token: token}
		h.proxies, h.cancel, h.done = proxies, cancel, done
		h.listen = strings.TrimPrefix(info.URL, "http://")
		h.mu.Unlock()
		tb.Cleanup(h.stop)
	case err := <-done:
		cancel()
		tb.Fatalf("node %s: Run ended before listening: %v", h.name, err)
	case <-time.After(30 * time.Second):
		cancel()
		tb.Fatalf("node %s did not start listening", h.name)
	}
}

// kill cuts the node off etcd, then stops it: its lease stays until it
// expires, its agents keep running in its herdr.
func (h *fleetHost) kill() {
	h.mu.Lock()
	proxies := h.proxies
	h.mu.Unlock()
	for _, p := range proxies {
		p.Cut()
	}
	h.stop()
}

// stop stops the node (if it runs) and waits for Run to return.
func (h *fleetHost) stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.node, h.cancel, h.done = nil, nil, nil
	h.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		h.f.tb.Errorf("node %s: Run: %v", h.name, err)
	}
}

// running returns the running node; nil while it is down.
func (h *fleetHost) running() *fleetNode {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node
}

// local returns the members the running node reconciles, with their
// status (its controllers' view); nil while the node is down.
func (h *fleetHost) local() []v1alpha1.Member {
	n := h.running()
	if n == nil {
		return nil
	}
	var out []v1alpha1.Member
	_ = n.info.WaitFor(context.Background(), func(ms []v1alpha1.Member) bool { out = ms; return true })
	return out
}

// panes returns the panes of the host's herdr by the agent they run.
func (h *fleetHost) panes() map[string][]string { return herdrPanes(h.herdr) }

// herdrPanes returns the panes of a herdr by the agent they run.
func herdrPanes(srv *herdrsim.Server) map[string][]string {
	out := map[string][]string{}
	for _, p := range srv.Panes() {
		if p.AgentName != "" {
			out[p.AgentName] = append(out[p.AgentName], p.ID)
		}
	}
	return out
}

// mark is how many requests the host's herdr has had so far, for
// tabsCreatedSince.
func (h *fleetHost) mark() int { return len(h.herdr.Requests()) }

// tabsCreatedSince returns the tab.create requests (the creation of a
// member's pane: fleetd makes one tab per member) the host's herdr got
// after mark, as their raw lines.
func (h *fleetHost) tabsCreatedSince(mark int) []string {
	var out []string
	for _, r := range h.herdr.Requests()[mark:] {
		if r.Method == "tab.create" {
			out = append(out, string(r.Line))
		}
	}
	return out
}

// placed is where a member runs: the host whose node runs it Ready, and
// its pane there.
type placed struct {
	Host, Pane string
	Restarts   int32
}

// fleetState is what the fleet runs now, from the running nodes' own views
// and their herdrs.
type fleetState struct {
	// ready: members whose agent runs on a running node (Ready=True:
	// phase Ready, or Degraded after a crash loop), by name, with every
	// node that says so.
	ready map[string][]placed
	// panes: each member's panes in the herdrs of the running nodes, as
	// host/pane.
	panes map[string][]string
}

func (f *hostFleet) state() fleetState {
	s := fleetState{ready: map[string][]placed{}, panes: map[string][]string{}}
	for _, h := range f.up() {
		for _, m := range h.local() {
			// The agent runs: Ready, or Degraded after a crash loop
			// (the chaos kills one member's pane again and again).
			if readyOf(m).Status == v1alpha1.ConditionTrue && m.Status.PaneID != "" {
				s.ready[m.Name] = append(s.ready[m.Name], placed{Host: h.name, Pane: m.Status.PaneID, Restarts: m.Status.Restarts})
			}
		}
		for name, ids := range h.panes() {
			for _, id := range ids {
				s.panes[name] = append(s.panes[name], h.name+"/"+id)
			}
		}
	}
	return s
}

// twoReady names every member that two running nodes both say they run
// Ready: two live agents for one member, whatever the panes.
func (s fleetState) twoReady() []string {
	var out []string
	for name, r := range s.ready {
		if len(r) > 1 {
			out = append(out, fmt.Sprintf("%s on %v", name, r))
		}
	}
	slices.Sort(out)
	return out
}

// converged says why the fleet does not run exactly want (member names),
// each Ready on one running node with one pane there and nowhere else; ""
// when it does.
func (s fleetState) converged(want []string) string {
	var why []string
	for _, name := range want {
		r, ps := s.ready[name], s.panes[name]
		switch {
		case len(r) != 1:
			why = append(why, fmt.Sprintf("%s Ready on %v", name, r))
		case len(ps) != 1 || ps[0] != r[0].Host+"/"+r[0].Pane:
			why = append(why, fmt.Sprintf("%s Ready on %s in pane %s, panes %v", name, r[0].Host, r[0].Pane, ps))
		}
	}
	for name, ps := range s.panes {
		if !slices.Contains(want, name) {
			why = append(why, fmt.Sprintf("%s (not wanted) in %v", name, ps))
		}
	}
	slices.Sort(why)
	return strings.Join(why, "; ")
}

// until reads the fleet's state (every 10 ms, at most limit) until cond
// says nothing is missing ("") and returns it; the test fails with cond's
// last word otherwise.
func (f *hostFleet) until(what string, limit time.Duration, cond func(fleetState) string) fleetState {
	f.tb.Helper()
	var s fleetState
	waitFor(f.tb, "fleet "+what, limit, func() string { s = f.state(); return cond(s) })
	return s
}

// waitFor checks cond every 10 ms until it says nothing is missing (""),
// failing the test with its last word after limit.
func waitFor(tb testing.TB, what string, limit time.Duration, cond func() string) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for why := cond(); why != ""; why = cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not %s within %s: %s", what, limit, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitConverged waits until the fleet runs exactly names, each Ready on one
// node with its one pane.
func (f *hostFleet) waitConverged(names ...string) fleetState {
	f.tb.Helper()
	return f.until("converged", 30*time.Second, func(s fleetState) string { return s.converged(names) })
}

// apply writes a free Member (no nodeName, no selector) through node n's
// REST API.
func (n *fleetNode) apply(tb testing.TB, name string) {
	tb.Helper()
	if code, body := n.do(tb, "POST", "/members", `{"profile":"claude","name":"`+name+`"}`); code != 201 {
		tb.Fatalf("POST /members %s = %d %s", name, code, body)
	}
}

// remove deletes a Member through node n's REST API.
func (n *fleetNode) remove(tb testing.TB, name string) {
	tb.Helper()
	if code, body := n.do(tb, "DELETE", "/members/"+name, ""); code != 200 {
		tb.Fatalf("DELETE /members/%s = %d %s", name, code, body)
	}
}
