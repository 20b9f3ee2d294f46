package multihost

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real etcd (three members), shared by its tests,
// each under a prefix of its own; they run in parallel. A test that stops
// etcd members runs a cluster of its own (ownCluster) with its fleet under
// a prefix registered on it (prefixOn): the helpers that take a prefix
// reach the cluster it is on (clusterOf). Every goroutine a daemon started
// has ended once Run returned, so etcdtest.Main's leak check (only etcd's
// own peer connections may outlive the cluster) holds for them too.
var cluster *etcdtest.Cluster

// clusters are the clusters of the prefixes registered by prefixOn.
var clusters sync.Map // prefix → *etcdtest.Cluster

// ownCluster starts a three-member etcd for one test, closed when it ends.
func ownCluster(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	c, err := etcdtest.Start(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// prefixOn returns a new prefix (uniquePrefix) whose fleet is on c; nil
// is the package's cluster.
func prefixOn(t testing.TB, c *etcdtest.Cluster, base string) string {
	prefix := uniquePrefix(base)
	if c != nil {
		clusters.Store(prefix, c)
		t.Cleanup(func() { clusters.Delete(prefix) })
	}
	return prefix
}

// clusterOf is the cluster the fleet under prefix is on.
func clusterOf(prefix string) *etcdtest.Cluster {
	if c, ok := clusters.Load(prefix); ok {
		return c.(*etcdtest.Cluster)
	}
	return cluster
}

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 3, func(c *etcdtest.Cluster) { cluster = c }, func() {
		if binary != "" {
			os.RemoveAll(filepath.Dir(binary))
		}
	}))
}
