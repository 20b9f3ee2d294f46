package informer

import (
	"os"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real 3-member etcd, started once: tests share
// it, each under a prefix of its own, and a test that stops members starts
// them again before it ends.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 3, func(c *etcdtest.Cluster) { cluster = c }, nil))
}
