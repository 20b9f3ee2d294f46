package controllers

import (
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
	Member      string `json:"member"`
	UID         string `json:"uid"`
	Generation  int64  `json:"generation"`
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
}

// CreatedWorkspace describes a workspace fleetd created (workspace.create).
type CreatedWorkspace struct {
	Label string `json:"label"`
	// RootTabID is the tab herdr created with the workspace.
	RootTabID string `json:"rootTabId"`
}

// ownBook is the set of ownership records, mirrored on disk.
type ownBook struct {
	state statedir.Layout
	disk  bool // false keeps records in memory only

	mu   sync.Mutex
	recs map[string]Ownership
}

func loadOwnership(stateDir string) (*ownBook, error) {
	b := &ownBook{recs: map[string]Ownership{}}
	if stateDir == "" {
		return b, nil
	}
	b.state, b.disk = statedir.At(stateDir), true
	dir := b.state.OwnedDir()
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return nil, fmt.Errorf("ownership records: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ownership records: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !statedir.IsOwnedRecord(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
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
		if err := atomicfile.Write(b.state.Owned(r.Member), append(data, '\n'), statedir.FileMode); err != nil {
			return fmt.Errorf("write ownership of %q: %w", r.Member, err)
		}
	}
	b.mu.Lock()
	b.recs[r.Member] = r
	b.mu.Unlock()
	return nil
}

func (b *ownBook) drop(name string) error {
	if b.disk {
		err := os.Remove(b.state.Owned(name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drop ownership of %q: %w", name, err)
		}
	}
	b.mu.Lock()
	delete(b.recs, name)
	b.mu.Unlock()
	return nil
}
