package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// NodeInstance names the fleetd behind a registration: the identity of
// its state directory (kept in STATE_DIR/node-id across restarts), and
// the host and process it runs as, so that a fleetd refused a node's name
// is told which other one holds it.
type NodeInstance struct {
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

func (i NodeInstance) String() string {
	return fmt.Sprintf("pid %d on host %s (instance %s)", i.PID, i.Host, i.ID)
}

// instanceIDBytes is the size of a node id, before hex encoding.
const instanceIDBytes = 16

// LoadInstance returns this fleetd as a node instance: the state
// directory's node id, made now if it has none, with the host name and
// the pid.
func LoadInstance(state statedir.Layout) (NodeInstance, error) {
	id, err := readNodeID(state.NodeID())
	if errors.Is(err, fs.ErrNotExist) {
		var b [instanceIDBytes]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
		err = atomicfile.Write(state.NodeID(), []byte(id+"\n"), statedir.FileMode)
	}
	if err != nil {
		return NodeInstance{}, fmt.Errorf("this node's identity: %w", err)
	}
	host, _ := os.Hostname()
	return NodeInstance{ID: id, Host: host, PID: os.Getpid()}, nil
}

func readNodeID(path string) (string, error) {
	f, err := statedir.Open(path, os.O_RDONLY, statedir.MaxTokenBytes)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	id := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(id); err != nil || len(raw) != instanceIDBytes {
		return "", fmt.Errorf("%s holds %q, not a node id fleetd wrote; delete it and fleetd makes a new one", path, id)
	}
	return id, nil
}
