package statedir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Modes of everything in the state directory.
const (
	// DirMode is the mode of the root and of every directory in it.
	DirMode fs.FileMode = 0o700
	// FileMode is the mode of every file in it.
	FileMode fs.FileMode = 0o600
)

// Names in the state directory, relative to its root.
const (
	lockFile     = "fleetd.lock"
	primaryFile  = "primary.token"
	stateDBFile  = "state.journal"
	objectsFile  = "objects.json"
	etcdFile     = "etcd-store.json"
	harnessDir   = "harness"
	messagesDir  = "messages"
	nodeIDFile   = "node-id"
	simDir       = "sim"
	simSocket    = "herdr.sock"
	recordSuffix = ".json"

	// What fleetd kept one file per record before the state database; only
	// its one-shot migration reads them (and then removes them).
	legacyTokensFile  = "tokens.json"
	legacyOwnedDir    = "owned"
	legacyMemoryDir   = "members"
	legacyPromptsFile = "prompts-delivered.json"
	// and the revision histories, one file per object, until 2026-12-02.
	legacyRevisionsDir = "revisions"
)

// Layout names the paths of one state directory. It is a value: copy it
// freely. The zero Layout has no root and names relative paths; callers
// that keep state in memory when no directory is given check for that
// themselves (see [Layout.Root]).
type Layout struct {
	root string
}

// At returns the layout of the state directory rooted at root, as given.
func At(root string) Layout { return Layout{root: root} }

// Abs returns the layout of the state directory rooted at root made
// absolute, as the daemon uses it (harness config files name their paths).
func Abs(root string) (Layout, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Layout{}, fmt.Errorf("state directory %s: %w", root, err)
	}
	return Layout{root: abs}, nil
}

// Root is the state directory itself; "" for the zero Layout.
func (l Layout) Root() string { return l.root }

// Create creates the root (and its parents) with [DirMode] if it does not
// exist yet. [Layout.Lock] calls it; so do the token functions, which also
// run before any daemon (`fleetd mcp-config`).
func (l Layout) Create() error {
	if err := os.MkdirAll(l.root, DirMode); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	return nil
}

// LockFile is the file [Layout.Lock] flocks; it holds the holder's pid.
func (l Layout) LockFile() string { return l.path(lockFile) }

// PrimaryToken is the file holding the primary's bearer token.
func (l Layout) PrimaryToken() string { return l.path(primaryFile) }

// StateDB is the state database (package statedb): the records fleetd
// must not lose about each member — the pane it runs, its memory across
// panes, its worker tokens' hashes, its delivered first prompt — in one
// journal file.
func (l Layout) StateDB() string { return l.path(stateDBFile) }

// Objects is the directory store's record of object uids, generations,
// creation times and last good definitions.
func (l Layout) Objects() string { return l.path(objectsFile) }

// EtcdStore is what the etcd store remembers of its fleet: the fleet's
// identity, the highest etcd revision seen, every object's last good
// definition and the node's members.
func (l Layout) EtcdStore() string { return l.path(etcdFile) }

// LegacyTokens is where fleetd kept worker token hashes before the state
// database: one file, rewritten on every change.
func (l Layout) LegacyTokens() string { return l.path(legacyTokensFile) }

// LegacyOwnedDir is where fleetd kept its ownership records before the
// state database: one file per member (NAME.json), and spare files
// (dot-files) that are never records.
func (l Layout) LegacyOwnedDir() string { return l.path(legacyOwnedDir) }

// LegacyMemoryDir is where fleetd kept each member's memory before the
// state database: one file per member (NAME.json).
func (l Layout) LegacyMemoryDir() string { return l.path(legacyMemoryDir) }

// LegacyPrompts is where fleetd recorded the delivered first prompts
// before the state database.
func (l Layout) LegacyPrompts() string { return l.path(legacyPromptsFile) }

// IsLegacyRecord reports whether a file name in [Layout.LegacyOwnedDir] or
// [Layout.LegacyMemoryDir] is a record (NAME.json): not a temporary file
// of an interrupted write nor a spare, which are dot-files.
func IsLegacyRecord(name string) bool {
	return strings.HasSuffix(name, recordSuffix) && !strings.HasPrefix(name, ".")
}

// LegacyRevisionsDir is where fleetd kept the revision histories of
// Profiles and Members (internal/rollout) before they moved to the state
// database: one file per object, KIND.NAME.json (KIND profile or member),
// and temporary files of interrupted writes (dot-files).
func (l Layout) LegacyRevisionsDir() string { return l.path(legacyRevisionsDir) }

// Harness is the directory of member name's harness config files.
func (l Layout) Harness(name string) string { return l.path(harnessDir, name) }

// Messages is the directory of the messaging core's journal.
func (l Layout) Messages() string { return l.path(messagesDir) }

// NodeID holds this state directory's identity as a node of a fleet on
// etcd (internal/fleet): kept across restarts, so that a fleetd started
// again on it takes its node's registration over at once, while another
// fleetd with the same node name is refused.
func (l Layout) NodeID() string { return l.path(nodeIDFile) }

// SimSocket is the socket of the embedded simulated herdr; its directory
// is the caller's to create (with [DirMode]).
func (l Layout) SimSocket() string { return l.path(simDir, simSocket) }

func (l Layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.root}, elem...)...)
}
