package multihost

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real etcd (three members), shared by its tests,
// each under a prefix of its own. The tests that stop its members
// (TestEtcdStore_QuorumLostKeepsTheNodeServing, TestFleetChaos,
// TestFleet_OneEtcdMemberDownKeepsTheFleetWorking) run alone, first; the
// others run in parallel after them. Every goroutine a daemon started has
// ended once Run returned, so etcdtest.Main's leak check (only etcd's own
// peer connections may outlive the cluster) holds for them too.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 3, func(c *etcdtest.Cluster) { cluster = c }, func() {
		if binary != "" {
			os.RemoveAll(filepath.Dir(binary))
		}
	}))
}
