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
	tokensFile   = "tokens.json"
	objectsFile  = "objects.json"
	etcdFile     = "etcd-store.json"
	ownedDir     = "owned"
	memoryDir    = "members"
	harnessDir   = "harness"
	messagesDir  = "messages"
	promptsFile  = "prompts-delivered.json"
	nodeIDFile   = "node-id"
	revisionsDir = "revisions"
	simDir       = "sim"
	simSocket    = "herdr.sock"
	recordSuffix = ".json"
	sparePrefix  = ".spare-"
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

// Tokens is the token registry: worker token hashes and their panes.
func (l Layout) Tokens() string { return l.path(tokensFile) }

// Objects is the directory store's record of object uids, generations,
// creation times and last good definitions.
func (l Layout) Objects() string { return l.path(objectsFile) }

// EtcdStore is what the etcd store remembers of its fleet: the fleet's
// identity, the highest etcd revision seen, every object's last good
// definition and the node's members.
func (l Layout) EtcdStore() string { return l.path(etcdFile) }

// OwnedDir is the directory of ownership records, one per member.
func (l Layout) OwnedDir() string { return l.path(ownedDir) }

// Owned is the ownership record of member name, in [Layout.OwnedDir].
func (l Layout) Owned(name string) string { return l.path(ownedDir, name+recordSuffix) }

// IsOwnedRecord reports whether a file name in [Layout.OwnedDir] is an
// ownership record (not a temporary file of an interrupted write, nor a
// spare).
func IsOwnedRecord(name string) bool {
	return strings.HasSuffix(name, recordSuffix) && !strings.HasPrefix(name, ".")
}

// OwnedSpare is spare file id in [Layout.OwnedDir]: the file of a dropped
// ownership record, kept for a later record's write to reuse. A spare is
// never a record, whatever it holds.
func (l Layout) OwnedSpare(id string) string { return l.path(ownedDir, sparePrefix+id) }

// IsOwnedSpare reports whether a file name in [Layout.OwnedDir] is a spare
// ([Layout.OwnedSpare]).
func IsOwnedSpare(name string) bool { return strings.HasPrefix(name, sparePrefix) }

// MemoryDir is the directory of what the controllers keep of each member
// across its panes and fleetd's restarts (the agent's session, a graceful
// close or replacement under way), one file per member.
func (l Layout) MemoryDir() string { return l.path(memoryDir) }

// Memory is member name's file in [Layout.MemoryDir]. A name that starts
// with a dot is never a member's: temporary files of interrupted writes
// are dot-files.
func (l Layout) Memory(name string) string { return l.path(memoryDir, name+recordSuffix) }

// RevisionsDir is the directory of the revision histories of Profiles and
// Members (internal/rollout), one file per object.
func (l Layout) RevisionsDir() string { return l.path(revisionsDir) }

// Revisions is the revision history of the object of kind (profile or
// member, lower case) named name, in [Layout.RevisionsDir]:
// KIND.NAME.json. A name that starts with a dot is never an object's:
// temporary files of interrupted writes are dot-files.
func (l Layout) Revisions(kind, name string) string {
	return l.path(revisionsDir, kind+"."+name+recordSuffix)
}

// Harness is the directory of member name's harness config files.
func (l Layout) Harness(name string) string { return l.path(harnessDir, name) }

// Messages is the directory of the messaging core's journal.
func (l Layout) Messages() string { return l.path(messagesDir) }

// Prompts records which members' spec.prompt was delivered.
func (l Layout) Prompts() string { return l.path(promptsFile) }

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
