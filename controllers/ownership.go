package controllers

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Ownership is fleetd's record of the herdr pane it runs for a member. It is
// written (atomically) right after the member's tab is created and before
// the agent starts, so that a fleetd restarted at any moment adopts the pane
// instead of creating a duplicate: by TerminalID while herdr runs on, by
// PaneID (confirmed by the agent's name and session) after herdr restarted.
type Ownership struct {
	Member     string `json:"member"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	// Launch is the digest of what the pane's launch was made of
	// (launchHash): a newer generation with the same digest runs in the
	// same agent. "" in a record of an older fleetd.
	Launch string `json:"launch,omitempty"`
	// Refs is the digest of what the launch took from the objects the
	// member references — its profile, its tenant (refsHash, rollout.go):
	// a change of theirs rolls out to the pane. "" in a record of an older
	// fleetd, which takes the current digest as it is.
	Refs string `json:"refs,omitempty"`
	// Target is the profile's part of it (rollout.Target), shown in the
	// member's status for the other nodes of a fleet.
	Target      string `json:"target,omitempty"`
	TerminalID  string `json:"terminalId"`
	PaneID      string `json:"paneId"`
	TabID       string `json:"tabId"`
	WorkspaceID string `json:"workspaceId"`
	// Token is the launch's opaque credential handle (launch.Spec.Token,
	// a hash, never the token): releasing the pane revokes exactly it.
	Token     string    `json:"token,omitempty"`
	Restarts  int32     `json:"restarts"`
	StartedAt time.Time `json:"startedAt"`
	// AgentSession is the agent's own session as herdr last reported it.
	// With the agent's name it confirms a pane found by pane id after a
	// herdr restart or handoff, which change terminal ids.
	AgentSession *herdr.AgentSessionInfo `json:"agentSession,omitempty"`
	// CreatedWorkspace is set when fleetd created the pane's workspace:
	// the workspace is closed once its last member is deleted and it holds
	// nothing but the tab it was created with.
	CreatedWorkspace *CreatedWorkspace `json:"createdWorkspace,omitempty"`
	// Worktree is the git worktree the pane runs in (worktree.go), for a
	// member that has one.
	Worktree *OwnedWorktree `json:"worktree,omitempty"`
}

// CreatedWorkspace describes a workspace fleetd created (workspace.create).
type CreatedWorkspace struct {
	Label string `json:"label"`
	// RootTabID is the tab herdr created with the workspace.
	RootTabID string `json:"rootTabId"`
}

// ownBook is the set of ownership records, mirrored on disk: one file per
// member in the state directory's owned/, replaced atomically (written
// elsewhere, fsynced, renamed over the record, the directory fsynced) so
// that a crash leaves the old record or the new one, never a torn one.
//
// Creating a file is the dearest part of such a write (on ext4 a new inode,
// and a freed one where the old record goes), and a mass repair writes one
// record per replacement right after dropping the member's last one. So a
// dropped record's file is not deleted but renamed to a spare (a dot-file,
// which loading never takes for a record), and a write reuses a spare when
// there is one: it overwrites the spare in place and truncates it, fsyncs
// it, renames it over the record and fsyncs the directory — the same
// guarantees, no file created or freed. At most maxSpares are kept; spares
// left by an earlier fleetd are taken up again at load.
type ownBook struct {
	state statedir.Layout
	disk  bool // false keeps records in memory only

	mu     sync.Mutex
	recs   map[string]Ownership
	spares []string // paths of spare files, none being written
}

// maxSpares bounds the spare files kept for reuse.
const maxSpares = 1024

func loadOwnership(stateDir string) (*ownBook, error) {
	b := &ownBook{recs: map[string]Ownership{}}
	if stateDir == "" {
		return b, nil
	}
	b.state, b.disk = statedir.At(stateDir), true
	dir := b.state.OwnedDir()
	entries, err := recordDir(dir, "ownership records")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && statedir.IsOwnedSpare(e.Name()) && len(b.spares) < maxSpares {
			b.spares = append(b.spares, filepath.Join(dir, e.Name()))
			continue
		}
		if e.IsDir() || !statedir.IsOwnedRecord(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := statedir.ReadFile(path, statedir.MaxRecordBytes)
		if err != nil {
			return nil, fmt.Errorf("ownership records: %w", err)
		}
		var r Ownership
		if err := json.Unmarshal(data, &r); err != nil || r.Member == "" {
			return nil, fmt.Errorf("ownership record %s is corrupt (%v); move it away to let fleetd start", path, err)
		}
		b.recs[r.Member] = r
	}
	return b, nil
}

// recordDir lists dir, a directory of per-member records (what names them
// in errors), creating it first if it is missing.
func recordDir(dir, what string) ([]os.DirEntry, error) {
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return entries, nil
}

func (b *ownBook) get(name string) (Ownership, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.recs[name]
	return r, ok
}

func (b *ownBook) all() []Ownership {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Ownership, 0, len(b.recs))
	for _, r := range b.recs {
		out = append(out, r)
	}
	return out
}

// ownerOf returns the member owning a pane or tab id.
func (b *ownBook) ownerOf(paneID, tabID string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.recs {
		if (paneID != "" && r.PaneID == paneID) || (tabID != "" && r.TabID == tabID) {
			return r.Member, true
		}
	}
	return "", false
}

func (b *ownBook) put(r Ownership) error {
	if b.disk {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("write ownership of %q: %w", r.Member, err)
		}
		if err := b.write(b.state.Owned(r.Member), append(data, '\n')); err != nil {
			return fmt.Errorf("write ownership of %q: %w", r.Member, err)
		}
	}
	b.mu.Lock()
	b.recs[r.Member] = r
	b.mu.Unlock()
	return nil
}

// write replaces the record file path with data, durably: through a spare
// file if there is one, else with a new file (atomicfile.Write).
func (b *ownBook) write(path string, data []byte) error {
	spare, ok := b.takeSpare()
	if !ok {
		return atomicfile.Write(path, data, statedir.FileMode)
	}
	return atomicfile.WriteThrough(spare, path, data)
}

func (b *ownBook) takeSpare() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.spares)
	if n == 0 {
		return "", false
	}
	p := b.spares[n-1]
	b.spares = b.spares[:n-1]
	return p, true
}

// drop deletes member name's record. Its file becomes a spare (renamed, so
// that loading never takes it for a record) unless maxSpares are kept.
func (b *ownBook) drop(name string) error {
	if b.disk {
		if err := b.retire(b.state.Owned(name)); err != nil {
			return fmt.Errorf("drop ownership of %q: %w", name, err)
		}
	}
	b.mu.Lock()
	delete(b.recs, name)
	b.mu.Unlock()
	return nil
}

// retire takes the record file path out of the records: renamed to a
// spare, or deleted when maxSpares are kept already.
func (b *ownBook) retire(path string) error {
	spare := b.state.OwnedSpare(rand.Text())
	if err := os.Rename(path, spare); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b.mu.Lock()
	keep := len(b.spares) < maxSpares
	if keep {
		b.spares = append(b.spares, spare)
	}
	b.mu.Unlock()
	if !keep {
		return os.Remove(spare)
	}
	return nil
}
