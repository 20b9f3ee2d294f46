package etcdtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// freePorts returns n loopback ports that were free a moment ago, below
// the kernel's ephemeral range, each claimed for the caller (portClaims)
// until it releases them.
//
// A member keeps its ports across Stop and Restart (its peers know them),
// so a port must stay its own while the member is stopped and nothing
// listens on it:
//   - a port from the ephemeral range could be taken meanwhile by any
//     listener on port 0 or any outgoing connection of the machine's other
//     tests, and the restart then failed with "address already in use",
//     leaving a shared cluster without its quorum;
//   - another cluster — of another test process: `go test ./...` runs
//     packages at once, each with its own cluster — picking the same free
//     port did the same; the claim keeps it out.
func freePorts(n int) ([]int, *portClaims, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	claims := &portClaims{}
	low := ephemeralLow()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			claims.release()
			return nil, nil, fmt.Errorf("etcdtest: no free loopback port below %d after %d tries", low, tries)
		}
		port := portFloor + rand.IntN(low-portFloor)
		ok, err := claims.claim(port)
		if err != nil {
			claims.release()
			return nil, nil, err
		}
		if !ok {
			continue // another cluster's, maybe stopped
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			claims.drop(port)
			continue // taken: another one
		}
		lns = append(lns, ln)
		out = append(out, port)
	}
	return out, claims, nil
}

// portFloor is the lowest port freePorts picks: above the ports services
// commonly listen on.
const portFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range), 32768 where it cannot be read or leaves too little
// room above portFloor.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil || low < portFloor+1000 {
		return 32768
	}
	return low
}

// portClaims are ports claimed for one cluster across the machine's
// processes: a claim is an exclusive flock of the port's file in
// claimDir, held while the file stays open. The kernel drops it when the
// process ends, however it ends, so no claim outlives its cluster's
// process; a second claim of a held port fails, in this process (another
// open file) as in another.
type portClaims struct {
	files map[int]*os.File
}

// claimDir is where the claims' files are, shared by the machine's
// processes.
func claimDir() string { return filepath.Join(os.TempDir(), "fleetd-etcdtest-ports") }

// claim claims port; false when another cluster holds it.
func (c *portClaims) claim(port int) (bool, error) {
	dir := claimDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("etcdtest: claim port %d: %w", port, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, fmt.Errorf("etcdtest: claim port %d: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("etcdtest: claim port %d: %w", port, err)
	}
	if c.files == nil {
		c.files = map[int]*os.File{}
	}
	c.files[port] = f
	return true, nil
}

// drop releases the claim of one port.
func (c *portClaims) drop(port int) {
	if f, ok := c.files[port]; ok {
		f.Close() // closing the only descriptor drops the lock
		delete(c.files, port)
	}
}

// release drops every claim; nil holds none.
func (c *portClaims) release() {
	if c == nil {
		return
	}
	for port := range c.files {
		c.drop(port)
	}
}
