package daemon

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
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/mcp"
)

// firstPrompts delivers each member's spec.prompt once, when the member is
// first Ready, as a detached send from the primary (the reply lands in the
// primary's mailbox). A member is identified by its uid, so a member
// deleted and created again under the same name gets its prompt again, and
// a spec change does not.
//
// The record is written after the core acknowledged the send (the core's
// journal then holds the queued prompt, which survives a restart by
// itself). A crash between the two resends that one prompt after a
// restart; recording first would lose it instead, and a lost first task is
// the worse failure.
type firstPrompts struct {
	path    string
	members interface {
		Members() []v1alpha1.Member
		Changed() <-chan struct{}
	}
	sender interface {
		Send(ctx context.Context, req messaging.SendRequest) (messaging.SendResult, error)
	}
	// synced reports whether the desired state has been read: only then
	// do records of members that no longer exist get dropped.
	synced func() bool
	log    *slog.Logger
	done   map[string]string
}

// newFirstPrompts reads the record at path (statedir's Layout.Prompts:
// member uid → turn id of the prompt handed to the messaging core).
func newFirstPrompts(path string, fp firstPrompts) (*firstPrompts, error) {
	fp.path = path
	fp.done = map[string]string{}
	data, err := os.ReadFile(fp.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", fp.path, err)
	default:
		if err := json.Unmarshal(data, &fp.done); err != nil {
			return nil, fmt.Errorf("read %s: %w", fp.path, err)
		}
	}
	return &fp, nil
}

// run delivers prompts until ctx ends, waking on every member change.
func (fp *firstPrompts) run(ctx context.Context) {
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

func (fp *firstPrompts) deliver(ctx context.Context) {
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
		res, err := fp.sender.Send(ctx, messaging.SendRequest{From: mcp.PrimaryName, To: m.Name, Content: m.Spec.Prompt})
		if err != nil {
			fp.log.Error("could not queue a member's first prompt; will retry on the next change", "member", m.Name, "err", err)
			continue
		}
		fp.done[m.UID] = res.TurnID
		changed = true
		fp.log.Info("first prompt queued", "member", m.Name, "turn", res.TurnID)
	}
	if fp.synced() {
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

func (fp *firstPrompts) save() error {
	data, err := json.MarshalIndent(fp.done, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(fp.path, append(data, '\n'), statedir.FileMode)
}
