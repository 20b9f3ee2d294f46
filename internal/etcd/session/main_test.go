package session

import (
	"os"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real etcd, started once and shared.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 1, func(c *etcdtest.Cluster) { cluster = c }, nil))
}
