package etcdtest

import (
	"fmt"
	"net"
	"testing"
)

// The ports a cluster's members keep across a restart are below the
// ephemeral range, where no listener on port 0 and no outgoing connection
// can take them while a member is stopped; each is free and distinct.
func TestFreePorts_BelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < portFloor || p >= low {
			t.Errorf("port %d is not in [%d, %d)", p, portFloor, low)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}
