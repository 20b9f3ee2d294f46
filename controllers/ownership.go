package controllers

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
	"github.com/fleetd-dev/fleetd/internal/statedb"
)

// Ownership is fleetd's record of the herdr pane it runs for a member. It is
// written (durably) right after the member's tab is created and before
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

// ownBook is the set of ownership records, mirrored in the state database
// (table statedb.Owned, one record per member; nil keeps them in memory
// only). A put is durable when it returns, a stage when its commit says so
// — the record before the agent starts, so that a fleetd killed at any
// moment adopts the pane rather than start another — and concurrent
// writes share the database's fsync. A drop
// is staged and not waited for: it goes out with the next batch, and a
// record a crash kept names a pane that is gone, which the next start
// drops again.
type ownBook struct {
	db *statedb.DB

	mu sync.Mutex
	// recs holds each record by pointer, replaced and never changed, by
	// member; byPane and byTab hold the same pointers by pane and tab id,
	// for ownerOf, which every herdr event about a pane asks (a walk of
	// every record was a tenth of fleetd's CPU while 1000 members
	// converged). Sorted indexes rather than maps: 8 B a record each,
	// where a map of a fleet's records takes ~53 ("" is never indexed).
	recs, byPane, byTab sortedindex.Index[Ownership]
	// shared counts the times a record was indexed under an id the index
	// gave another member's record (two records of one pane, which nothing
	// fleetd does makes); while it is 0 no id has a second record, and a
	// drop does not walk the records for one.
	shared int
}

func memberOf(r *Ownership) string { return r.Member }
func paneOf(r *Ownership) string   { return r.PaneID }
func tabOf(r *Ownership) string    { return r.TabID }

// newOwnBook returns an empty book mirrored in db.
func newOwnBook(db *statedb.DB) *ownBook {
	return &ownBook{db: db, recs: sortedindex.New(memberOf, nil),
		byPane: sortedindex.New(paneOf, nil), byTab: sortedindex.New(tabOf, nil)}
}

func loadOwnership(db *statedb.DB) (*ownBook, error) {
	b := newOwnBook(db)
	err := db.Each(statedb.Owned, func(key string, value []byte) error {
		var r Ownership
		if err := json.Unmarshal(value, &r); err != nil || r.Member != key {
			return fmt.Errorf("ownership record of %q is corrupt (%v): `fleetd journal check` shows it", key, err)
		}
		b.setLocked(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (b *ownBook) get(name string) (Ownership, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recs.Get(name)
	if r == nil {
		return Ownership{}, false
	}
	return *r, true
}

func (b *ownBook) all() []Ownership {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Ownership, 0, b.recs.Len())
	for _, r := range b.recs.Entries() {
		out = append(out, *r)
	}
	return out
}

// paneRef is where an owned pane is: its terminal's and its own id.
type paneRef struct{ terminalID, paneID string }

// panes returns where each record's pane is, in no order: what all
// returns of them, without copying whole records.
func (b *ownBook) panes() []paneRef {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]paneRef, 0, b.recs.Len())
	for _, r := range b.recs.Entries() {
		out = append(out, paneRef{r.TerminalID, r.PaneID})
	}
	return out
}

// ownerOf returns the member owning a pane or tab id.
func (b *ownBook) ownerOf(paneID, tabID string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.byPane.Get(paneID) // "" is never indexed
	if r == nil {
		r = b.byTab.Get(tabID)
	}
	if r == nil {
		return "", false
	}
	return r.Member, true
}

// setLocked puts r in memory, with its ids in the indexes. b.mu held.
func (b *ownBook) setLocked(r Ownership) {
	rec := &r
	old := b.recs.Get(r.Member)
	b.recs.Put(rec)
	if old != nil && (old.PaneID != r.PaneID || old.TabID != r.TabID) {
		b.unindexLocked(old)
	}
	b.indexLocked(&b.byPane, rec)
	b.indexLocked(&b.byTab, rec)
}

// indexLocked indexes r in ix, in place of the record of the same id if
// any ("" is never indexed). b.mu held.
func (b *ownBook) indexLocked(ix *sortedindex.Index[Ownership], r *Ownership) {
	id := ix.Key(r)
	if id == "" {
		return
	}
	if cur := ix.Get(id); cur != nil && cur.Member != r.Member {
		b.shared++
	}
	ix.Put(r)
}

// unindexLocked takes r, a record no longer in effect, out of the indexes
// — where another member's record names one of its ids too (two records
// of one pane, which nothing fleetd does makes), the index takes that
// one. It walks the records only when r's ids change or r is dropped, and
// only while b.shared says another record may share one of them. b.mu
// held.
func (b *ownBook) unindexLocked(r *Ownership) {
	for _, ix := range [...]*sortedindex.Index[Ownership]{&b.byPane, &b.byTab} {
		id := ix.Key(r)
		if id == "" || ix.Get(id) != r {
			continue
		}
		ix.Remove(r)
		if b.shared == 0 {
			continue
		}
		for _, o := range b.recs.Entries() {
			if ix.Key(o) == id && o.Member != r.Member {
				ix.Put(o)
				b.shared--
				break
			}
		}
	}
}

// stage records r in memory at once and has it written; the commit says
// when it is durable. Nothing may start an agent in r's pane before it is
// (launch waits for it): a fleetd killed before then finds a tab without a
// record, which the orphan sweep closes, never a running agent it does not
// know. Meanwhile the worker goes on to its next member, where put would
// hold it for the fsync: 1 of a repair's 3–4 ms with 300 at once.
func (b *ownBook) stage(r Ownership) (*statedb.Commit, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("write ownership of %q: %w", r.Member, err)
	}
	c := b.db.Stage(statedb.Put(statedb.Owned, r.Member, data))
	c.Start()
	b.mu.Lock()
	b.setLocked(r)
	b.mu.Unlock()
	return c, nil
}

// put records r durably, then in memory.
func (b *ownBook) put(r Ownership) error {
	data, err := json.Marshal(r)
	if err == nil {
		err = b.db.Write(statedb.Put(statedb.Owned, r.Member, data))
	}
	if err != nil {
		return fmt.Errorf("write ownership of %q: %w", r.Member, err)
	}
	b.mu.Lock()
	b.setLocked(r)
	b.mu.Unlock()
	return nil
}

// drop forgets member name's record: at once in memory, in the database
// with its next batch (not waited for).
func (b *ownBook) drop(name string) {
	b.mu.Lock()
	if old := b.recs.Get(name); old != nil {
		b.recs.Remove(old)
		b.unindexLocked(old)
	}
	b.mu.Unlock()
	b.db.Stage(statedb.Delete(statedb.Owned, name))
}
