package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Fleet is the declared fleet with the status the controllers observed, as
// [FirstPrompts] reads it; *controllers.Manager satisfies it.
type Fleet interface {
	// Members returns every declared member with its status.
	Members() []v1alpha1.Member
	// Changed returns a channel that is closed at the next change of a
	// member's status or of the desired state.
	Changed() <-chan struct{}
}

// Sender queues a message; *Core is one.
type Sender interface {
	Send(ctx context.Context, req SendRequest) (SendResult, error)
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
// primary's mailbox): a member's first task is owed until it was handed to
// the core. A member is identified by its uid, so a member deleted and
// created again under the same name gets its prompt again, and a spec
// change does not.
//
// Which members got theirs is kept in a file (member uid → turn id; the
// daemon's is statedir's Layout.Prompts). The record is written after the
// core acknowledged the send (the core's journal then holds the queued
// prompt, which survives a restart by itself). A crash between the two
// resends that one prompt after a restart; recording first would lose it
// instead, and a lost first task is the worse failure.
type FirstPrompts struct {
	path    string
	from    string
	members Fleet
	sender  Sender
	// roster says whether the desired state has been read: only then do
	// records of members that no longer exist get dropped.
	roster Roster
	log    *slog.Logger
	done   map[string]string
}

// NewFirstPrompts reads the record at path (none yet is an empty one) and
// returns the controller that delivers the prompts of fleet's members
// through sender; roster says when the desired state has been read. Call
// Run to deliver.
func NewFirstPrompts(path string, fleet Fleet, roster Roster, sender Sender, opts *FirstPromptsOptions) (*FirstPrompts, error) {
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
	fp := &FirstPrompts{path: path, from: o.From, members: fleet, roster: roster, sender: sender, log: o.Logger, done: map[string]string{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(data, &fp.done); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
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
	changed := false
	live := map[string]bool{}
	for _, m := range fp.members.Members() {
		live[m.UID] = true
		if m.Spec.Prompt == "" || m.UID == "" || m.Status.Phase != v1alpha1.PhaseReady {
			continue
		}
		if _, ok := fp.done[m.UID]; ok {
			continue
		}
		res, err := fp.sender.Send(ctx, SendRequest{From: fp.from, To: m.Name, Content: m.Spec.Prompt})
		if err != nil {
			fp.log.Error("could not queue a member's first prompt; will retry on the next change", "member", m.Name, "err", err)
			continue
		}
		fp.done[m.UID] = res.TurnID
		changed = true
		fp.log.Info("first prompt queued", "member", m.Name, "turn", res.TurnID)
	}
	if fp.roster.Synced() {
		for uid := range fp.done {
			if !live[uid] {
				delete(fp.done, uid)
				changed = true
			}
		}
	}
	if changed {
		if err := fp.save(); err != nil {
			fp.log.Error("could not record delivered first prompts", "err", err)
		}
	}
}

func (fp *FirstPrompts) save() error {
	data, err := json.MarshalIndent(fp.done, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(fp.path, append(data, '\n'), statedir.FileMode)
}
