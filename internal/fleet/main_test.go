package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// cluster is the package's real etcd, started once: tests share it, each
// under a prefix of its own.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 1, func(c *etcdtest.Cluster) { cluster = c }, nil))
}

// waitLimit bounds every wait for something etcd does; none takes more
// than a fraction of a second when things work.
const waitLimit = 20 * time.Second

var (
	prefixes atomic.Int64
	quiet    = slog.New(slog.DiscardHandler)
)

// fixture is a fleet under a prefix of its own on the package's etcd.
type fixture struct {
	t      *testing.T
	prefix string
	cli    *clientv3.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &fixture{t: t, prefix: fmt.Sprintf("/fleet-test-%d", prefixes.Add(1)), cli: cli}
}

func (f *fixture) opts() *Options { return &Options{Prefix: f.prefix, Logger: quiet} }

// run runs a part until the returned stop is called (or the test ends);
// stop returns the part's error.
func (f *fixture) run(run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	f.t.Cleanup(func() {
		if err := stop(); err != nil {
			f.t.Errorf("run: %v", err)
		}
	})
	return stop
}

// store runs a store of node's members ("": all of them).
func (f *fixture) store(node string) *etcdstore.Store {
	f.t.Helper()
	st, err := etcdstore.New(f.cli, &etcdstore.Options{Prefix: f.prefix, Node: node, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	f.run(st.Run)
	return st
}

// register registers a node under a session of its own (ttl: 0 for the
// default) and runs both; stop ends them, revoking the lease.
func (f *fixture) register(info NodeInfo, ttl time.Duration) (reg *Registration, sess *session.Session, stop func() error) {
	f.t.Helper()
	sess = session.New(f.cli, &session.Options{TTL: ttl, Logger: quiet})
	if err := sess.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	reg, err := Register(context.Background(), f.cli, sess, info, f.opts())
	if err != nil {
		f.t.Fatal(err)
	}
	nodes := f.nodes(f.store(""))
	stopReg := f.run(func(ctx context.Context) error { return reg.Run(ctx, nodes) })
	stopSess := f.run(sess.Run)
	return reg, sess, func() error { return cmpOrErr(stopReg(), stopSess()) }
}

func cmpOrErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// nodes runs the fleet's nodes as st's node reads them.
func (f *fixture) nodes(st *etcdstore.Store) *Nodes {
	n := NewNodes(f.cli, st, f.opts())
	f.run(n.Run)
	return n
}

// statuses runs the published statuses.
func (f *fixture) statuses() *Statuses {
	s := NewStatuses(f.cli, f.opts())
	f.run(s.Run)
	return s
}

func (f *fixture) put(key, value string) int64 {
	f.t.Helper()
	resp, err := f.cli.Put(context.Background(), f.prefix+key, value)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Header.Revision
}

// apply writes a Profile claude and a member of it through st.
func apply(t *testing.T, st *etcdstore.Store, names ...string) {
	t.Helper()
	ctx := context.Background()
	if err := st.Apply(ctx, &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		m := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberSpec{Profile: "claude"}}
		m.SetDefaults()
		if err := st.Apply(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// until returns once cond holds, checked at every change of changed.
func until(t *testing.T, what string, changed func() <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("not %s within %s", what, waitLimit)
		}
	}
}
