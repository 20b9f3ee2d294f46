package multihost

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real etcd (three members), shared by its tests,
// each under a prefix of its own.
var cluster *etcdtest.Cluster

func TestMain(m *testing.M) {
	c, err := etcdtest.Start(3, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	c.Close()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	if code == 0 {
		// Every goroutine a daemon started has ended once Run returned;
		// only etcd's own peer connections may outlive the cluster.
		if err := goleak.Find(etcdtest.LeakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
