package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// Options configure a Cluster. nil means defaults.
type Options struct {
	// Dir is where the members keep their data (one directory each); ""
	// makes a temporary directory that Close removes.
	Dir string
	// TickMs and ElectionMs are raft's heartbeat interval and election
	// timeout; default 50 ms and 500 ms, so that a lost leader is noticed
	// and a new one elected within a second, while a test process that
	// the race detector and a loaded machine slow down does not miss
	// heartbeats and hold elections it never asked for (at 10 ms and
	// 100 ms, a full -race run on two busy cores lost its leader often
	// enough for a plain Put to time out).
	TickMs, ElectionMs uint
	// StartTimeout bounds how long Start waits for the cluster to be
	// ready; default 30 s.
	StartTimeout time.Duration
	// TLS serves clients on https only, with a server certificate for
	// 127.0.0.1, and requires a client certificate signed by the cluster's
	// CA (Cluster.TLS has the files). Peers talk plain http on loopback.
	TLS bool
}

// Cluster is a real etcd cluster running in this process on loopback.
type Cluster struct {
	dir     string
	tempDir bool
	opts    Options
	members []*member
	initial string // the initial-cluster flag every member starts with
	tls     *TLSFiles
	claims  *portClaims // the members' ports, held until Close
}

type member struct {
	name            string
	dir             string
	peerURL, client url.URL
	mu              sync.Mutex
	etcd            *embed.Etcd // nil while stopped
}

// Start starts an n-member cluster and waits until every member is ready.
func Start(n int, opts *Options) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: a cluster needs at least one member, got %d", n)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TickMs == 0 {
		o.TickMs = 50
	}
	if o.ElectionMs == 0 {
		o.ElectionMs = 500
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	c := &Cluster{dir: o.Dir, opts: o}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: %w", err)
		}
		c.dir, c.tempDir = d, true
	}
	if o.TLS {
		files, err := writeTLS(filepath.Join(c.dir, "tls"))
		if err != nil {
			c.removeDir()
			return nil, err
		}
		c.tls = files
	}
	scheme := "http"
	if o.TLS {
		scheme = "https"
	}
	ports, claims, err := freePorts(2 * n)
	if err != nil {
		c.removeDir()
		return nil, err
	}
	c.claims = claims
	var initial []string
	for i := range n {
		m := &member{
			name:    fmt.Sprintf("m%d", i),
			peerURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			client:  url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		m.dir = filepath.Join(c.dir, m.name)
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	c.initial = strings.Join(initial, ",")
	// The members start together: none is ready before a quorum is up.
	for _, m := range c.members {
		if err := c.start(m, embed.ClusterStateFlagNew); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range c.members {
		if err := c.waitReady(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) start(m *member, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.ListenClientUrls = []url.URL{m.client}
	cfg.AdvertiseClientUrls = []url.URL{m.client}
	cfg.InitialCluster = c.initial
	cfg.InitialClusterToken = "etcdtest"
	cfg.ClusterState = state
	cfg.TickMs, cfg.ElectionMs = c.opts.TickMs, c.opts.ElectionMs
	cfg.UnsafeNoFsync = true // a test's data need not survive a power cut
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.EnableGRPCGateway = false
	if c.tls != nil {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = c.tls.ServerCert, c.tls.ServerKey
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = c.tls.CA, true
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: start member %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
	return nil
}

func (c *Cluster) waitReady(i int) error {
	m := c.members[i]
	m.mu.Lock()
	e := m.etcd
	m.mu.Unlock()
	if e == nil {
		return fmt.Errorf("etcdtest: member %s is stopped", m.name)
	}
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcdtest: member %s: %w", m.name, err)
	case <-time.After(c.opts.StartTimeout):
		return fmt.Errorf("etcdtest: member %s not ready within %s", m.name, c.opts.StartTimeout)
	}
}

// Endpoints returns every member's client URL, stopped members included
// (a client fails over between them).
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client.String()
	}
	return out
}

// WaitCompacted returns once every running member has applied the
// compaction at rev, so that a watch from below rev fails with
// ErrCompacted whichever member serves it. Compact returns once the member
// that took it has compacted; another one serves the revisions it still
// has until it applies the compaction, and a watch that caught up
// meanwhile is never cancelled by it. A linearizable read on a member
// waits for it to apply what was committed, the compaction too: a read
// below rev then fails with ErrCompacted.
func (c *Cluster) WaitCompacted(ctx context.Context, rev int64) error {
	for i, m := range c.members {
		m.mu.Lock()
		e := m.etcd
		m.mu.Unlock()
		if e == nil {
			continue // stopped: it applies the compaction when it restarts
		}
		cli := v3client.New(e.Server)
		_, err := cli.Get(ctx, "etcdtest-compacted", clientv3.WithRev(rev-1))
		cli.Close()
		if !errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("etcdtest: member %d, a read below the compaction at %d: %v; want ErrCompacted", i, rev, err)
		}
	}
	return nil
}

// TLS returns the certificate files of a cluster started with
// Options.TLS; nil otherwise.
func (c *Cluster) TLS() *TLSFiles { return c.tls }

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.members[i].client.String() }

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Leader returns the index of the member the running members agree
// leads the cluster; an error while they know of none or disagree (no
// quorum, an election under way). A test that wants the leader down waits
// on it: a cluster just started or just healed may still be electing.
func (c *Cluster) Leader() (int, error) {
	lead := -1
	for _, m := range c.members {
		m.mu.Lock()
		e := m.etcd
		m.mu.Unlock()
		if e == nil {
			continue
		}
		id := e.Server.Leader()
		if id == 0 {
			return -1, fmt.Errorf("etcdtest: member %s knows no leader", m.name)
		}
		at := -1
		for j, o := range c.members {
			o.mu.Lock()
			if o.etcd != nil && o.etcd.Server.MemberID() == id {
				at = j
			}
			o.mu.Unlock()
		}
		if at < 0 {
			return -1, fmt.Errorf("etcdtest: member %s follows %s, which is not running", m.name, id)
		}
		if lead >= 0 && lead != at {
			return -1, fmt.Errorf("etcdtest: members disagree on the leader (%s and %s)", c.members[lead].name, c.members[at].name)
		}
		lead = at
	}
	if lead < 0 {
		return -1, errors.New("etcdtest: no member is running")
	}
	return lead, nil
}

// Stop stops member i; its data stays for Restart.
func (c *Cluster) Stop(i int) {
	m := c.members[i]
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member i again on its data and ports and waits
// until it is ready, which needs a quorum of the cluster to be running.
func (c *Cluster) Restart(i int) error {
	m := c.members[i]
	m.mu.Lock()
	running := m.etcd != nil
	m.mu.Unlock()
	if running {
		return nil
	}
	if err := c.start(m, embed.ClusterStateFlagExisting); err != nil {
		return err
	}
	return c.waitReady(i)
}

// RestartAll restarts every stopped member, then waits for each; with a
// quorum stopped no single member can become ready alone.
func (c *Cluster) RestartAll() error {
	var stopped []int
	for i, m := range c.members {
		m.mu.Lock()
		if m.etcd == nil {
			stopped = append(stopped, i)
		}
		m.mu.Unlock()
	}
	for _, i := range stopped {
		if err := c.start(c.members[i], embed.ClusterStateFlagExisting); err != nil {
			return err
		}
	}
	var errs []error
	for _, i := range stopped {
		errs = append(errs, c.waitReady(i))
	}
	return errors.Join(errs...)
}

// Close stops every member and removes a temporary data directory.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
	c.removeDir()
}

func (c *Cluster) removeDir() {
	c.claims.release()
	c.claims = nil
	if c.tempDir {
		os.RemoveAll(c.dir)
	}
}

// Main is a TestMain for a package whose tests share one embedded etcd of
// members members: it starts the cluster and hands it to use, runs the
// tests, closes the cluster, calls after (nil: nothing), and — only when
// every test passed — fails on any goroutine left behind other than
// etcd's own (see leakOptions). It returns the code to pass to os.Exit.
// m is the package's *testing.M (an interface here, so that the binaries
// that start a cluster, such as cmd/etcd-demo, do not link package testing).
func Main(m interface{ Run() int }, members int, use func(*Cluster), after func()) int {
	c, err := Start(members, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	use(c)
	code := m.Run()
	c.Close()
	if after != nil {
		after()
	}
	if code == 0 {
		if err := goleak.Find(leakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// leakOptions are the goleak options for a package whose tests run an
// embedded etcd. Members talk to each other over HTTP (raft's peer
// transport), and those connections outlive embed.Etcd.Close: the server
// side reads on through etcd's connection multiplexer and the client side
// keeps its keep-alive loops. They are etcd's, not the tests'; a package
// that uses these options should have no HTTP client or server of its own
// whose leak they would hide.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/soheilhy/cmux.(*MuxConn).Read"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
}
