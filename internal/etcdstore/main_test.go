package etcdstore

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

// cluster is the package's real 3-member etcd, started once: tests share
// it, each under a prefix of its own, and a test that stops members starts
// them again before it ends.
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
	if code == 0 {
		if err := goleak.Find(etcdtest.LeakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
