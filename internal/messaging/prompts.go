package messaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/statedb"
)

// Fleet is the declared fleet with the status the controllers observed, as
// [FirstPrompts] reads it; *controllers.Manager satisfies it.
type Fleet interface {
	// Members returns every declared member with its status.
	Members() []v1alpha1.Member
	// Prompted returns the declared members whose spec has a prompt, with
	// their status: what every delivery reads, without the whole fleet.
	Prompted() []v1alpha1.Member
	// Changed returns a channel that is closed at the next change of a
	// member's status or of the desired state.
	Changed() <-chan struct{}
}

// Sender queues a message, reports a worker's turns and is told when a
// worker is gone; *Core is one.
type Sender interface {
	Send(ctx context.Context, req SendRequest) (SendResult, error)
	Status(name string) WorkerStatus
	WorkerGone(name, reason string)
}

// FirstPromptsOptions tune [NewFirstPrompts]. nil means defaults.
type FirstPromptsOptions struct {
	// From is who sends the prompts, the primary; default
	// [DefaultPrimaryName], as the core's [Options.PrimaryName].
	From string
	// Logger receives what was delivered and what failed; default discards.
	Logger *slog.Logger
}

// FirstPrompts delivers each member's spec.prompt once, when the member is
// first Ready, as a detached send from the primary (the reply lands in the
// primary's mailbox): a member's first task is owed until it was typed into
// one of its panes. A member is identified by its uid, so a member deleted
// and created again under the same name gets its prompt again, and a spec
// change does not — unless it changes the prompt: a changed spec.prompt is
// a new first task, delivered once, to the running agent (a prompt alone
// needs no new agent) or to the one that replaces it, when it is Ready;
// the injector types it when the agent is idle.
//
// A prompt queued but not yet typed when the member's pane goes away (a
// spec change replaced it right after it became Ready, it was paused) is
// dropped by the core with the rest of the worker's queue. The daemon
// reports panes gone through [FirstPrompts.WorkerGone], which tells the
// core and, when the drop took the first prompt untyped, owes it again:
// it is sent once the member is Ready in another pane.
//
// Which members got theirs is kept in the state database (table
// statedb.Prompts: member uid → the turn id and a digest of the prompt; a
// bare turn id, as older fleetds wrote it, stands for the prompt the member
// has when it is first read). The record is written after the
// core acknowledged the send (the core's journal then holds the queued
// prompt, which survives a restart by itself). A crash between the two
// resends that one prompt after a restart; recording first would lose it
// instead, and a lost first task is the worse failure.
type FirstPrompts struct {
	// mu serialises deliveries with WorkerGone, so that a prompt is never
	// queued between WorkerGone's look at the core and the drop.
	mu      sync.Mutex
	db      *statedb.DB
	from    string
	members Fleet
	sender  Sender
	// roster says whether the desired state has been read: only then do
	// records of members that no longer exist get dropped.
	roster Roster
	log    *slog.Logger
	done   map[string]delivered // member uid → its queued prompt (the database's table)
	// lostIn holds, by member uid, the pane a member's first prompt was
	// dropped with, untyped: it is owed again once the member is Ready in
	// another pane (not the stale Ready of the pane that went away).
	lostIn map[string]string
}

// NewFirstPrompts reads the deliveries recorded in db (nil keeps them in
// memory only) and returns the controller that delivers the prompts of
// fleet's members through sender; roster says when the desired state has
// been read. Call Run to deliver.
func NewFirstPrompts(db *statedb.DB, fleet Fleet, roster Roster, sender Sender, opts *FirstPromptsOptions) (*FirstPrompts, error) {
	var o FirstPromptsOptions
	if opts != nil {
		o = *opts
	}
	if o.From == "" {
		o.From = DefaultPrimaryName
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	fp := &FirstPrompts{db: db, from: o.From, members: fleet, roster: roster, sender: sender, log: o.Logger, done: map[string]delivered{}, lostIn: map[string]string{}}
	err := db.Each(statedb.Prompts, func(uid string, value []byte) error {
		var d delivered
		if err := json.Unmarshal(value, &d); err != nil {
			return fmt.Errorf("the first prompt delivered to member uid %s: %w", uid, err)
		}
		fp.done[uid] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fp, nil
}

// Run delivers prompts until ctx ends, waking on every change of the fleet.
func (fp *FirstPrompts) Run(ctx context.Context) {
	for {
		ch := fp.members.Changed()
		fp.deliver(ctx)
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (fp *FirstPrompts) deliver(ctx context.Context) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	var changed []string // uids whose record changed
	live := map[string]bool{}
	for _, m := range fp.members.Prompted() {
		live[m.UID] = true
		if m.Spec.Prompt == "" || m.UID == "" || m.Status.Phase != v1alpha1.PhaseReady {
			continue
		}
		digest := promptDigest(m.Spec.Prompt)
		if d, ok := fp.done[m.UID]; ok {
			if d.Prompt == "" { // recorded by an older fleetd: the prompt it has now
				fp.done[m.UID], changed = delivered{Turn: d.Turn, Prompt: digest}, append(changed, m.UID)
			}
			if d.Prompt == "" || d.Prompt == digest {
				continue
			}
		}
		if pane, ok := fp.lostIn[m.UID]; ok && m.Status.PaneID == pane {
			continue
		}
		res, err := fp.sender.Send(ctx, SendRequest{From: fp.from, To: m.Name, Content: m.Spec.Prompt})
		if err != nil {
			fp.log.Error("could not queue a member's first prompt; will retry on the next change", "member", m.Name, "err", err)
			continue
		}
		_, again := fp.done[m.UID]
		fp.done[m.UID] = delivered{Turn: res.TurnID, Prompt: digest}
		delete(fp.lostIn, m.UID)
		changed = append(changed, m.UID)
		if again {
			fp.log.Info("changed first prompt queued", "member", m.Name, "turn", res.TurnID)
		} else {
			fp.log.Info("first prompt queued", "member", m.Name, "turn", res.TurnID)
		}
	}
	if fp.roster.Synced() {
		// A record whose member has no prompt now is kept while the member
		// exists (the same prompt given back is not a new task): only then
		// is the whole fleet read.
		var all map[string]bool
		gone := func(uid string) bool {
			if live[uid] {
				return false
			}
			if all == nil {
				all = map[string]bool{}
				for _, m := range fp.members.Members() {
					all[m.UID] = true
				}
			}
			return !all[uid]
		}
		for uid := range fp.done {
			if gone(uid) {
				delete(fp.done, uid)
				changed = append(changed, uid)
			}
		}
		for uid := range fp.lostIn {
			if gone(uid) {
				delete(fp.lostIn, uid)
			}
		}
	}
	if len(changed) > 0 {
		if err := fp.save(changed...); err != nil {
			fp.log.Error("could not record delivered first prompts", "err", err)
		}
	}
}

// WorkerGone reports that member name's pane paneID is gone for good
// (reason in a few words) to the core, which ends the member's turns and
// drops its queue. If that queue held the member's first prompt, not yet
// typed, the prompt is owed again: it is sent once the member is Ready in
// a pane other than paneID. It suits controllers.Options.OnPaneGone.
func (fp *FirstPrompts) WorkerGone(name, paneID, reason string) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	uid, turn := "", ""
	for _, m := range fp.members.Members() {
		if m.Name == name {
			uid, turn = m.UID, fp.done[m.UID].Turn
			break
		}
	}
	untyped := turn != "" && slices.ContainsFunc(fp.sender.Status(name).OpenTurns, func(t TurnStatus) bool {
		return t.ID == turn && !t.Delivered
	})
	fp.sender.WorkerGone(name, reason)
	if !untyped {
		return
	}
	delete(fp.done, uid)
	fp.lostIn[uid] = paneID
	if err := fp.save(uid); err != nil {
		fp.log.Error("could not record a first prompt owed again", "member", name, "err", err)
	}
	fp.log.Info("first prompt dropped with the member's pane before it was typed; owed to its next pane", "member", name, "pane", paneID, "turn", turn)
}

// save writes the records of the members uids as fp.done has them; the
// caller holds mu.
func (fp *FirstPrompts) save(uids ...string) error {
	changes := make([]statedb.Change, 0, len(uids))
	for _, uid := range uids {
		d, ok := fp.done[uid]
		if !ok {
			changes = append(changes, statedb.Delete(statedb.Prompts, uid))
			continue
		}
		data, err := json.Marshal(d)
		if err != nil {
			return err
		}
		changes = append(changes, statedb.Put(statedb.Prompts, uid, data))
	}
	return fp.db.Write(changes...)
}

// delivered is a member's first prompt as queued: its turn and a digest
// of its text, which tells a changed spec.prompt.
type delivered struct {
	Turn   string `json:"turn"`
	Prompt string `json:"prompt,omitempty"`
}

// UnmarshalJSON also reads an older fleetd's record: the bare turn id.
func (d *delivered) UnmarshalJSON(data []byte) error {
	var turn string
	if err := json.Unmarshal(data, &turn); err == nil {
		*d = delivered{Turn: turn}
		return nil
	}
	type plain delivered
	return json.Unmarshal(data, (*plain)(d))
}

// promptDigest identifies a prompt's text without keeping it.
func promptDigest(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(sum[:12])
}
