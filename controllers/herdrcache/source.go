package herdrcache

import (
	"context"

	"github.com/fleetd-dev/fleetd/herdr"
)

// Lister is the read-only part of herdr the cache lists: the protocol check
// and the four listings of a full read.
type Lister interface {
	Ping(ctx context.Context) (*herdr.Pong, error)
	ListWorkspaces(ctx context.Context) ([]herdr.WorkspaceInfo, error)
	ListTabs(ctx context.Context, workspaceID string) ([]herdr.TabInfo, error)
	ListPanes(ctx context.Context, workspaceID string) ([]herdr.PaneInfo, error)
	ListAgents(ctx context.Context) ([]herdr.AgentInfo, error)
}

// Source is everything the cache asks of herdr: listings and an
// events.subscribe stream. Tests fake it in memory; [FromClient] adapts a
// *herdr.Client.
type Source interface {
	Lister
	// Subscribe opens an events.subscribe stream; it returns once herdr
	// acknowledged the subscription (or refused it, e.g. pane_not_found
	// for a per-pane entry).
	Subscribe(ctx context.Context, subs []herdr.Subscription) (Stream, error)
}

// Snapshotter is a [Source] that can also read all of herdr in one call,
// session.snapshot. The cache uses it where herdr has it, and the four
// listings of [Lister] where herdr answers unknown_method, not_implemented
// or invalid_request (protocol 20's answer to a method it does not know).
type Snapshotter interface {
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// Snapshot is herdr's state read in one call (session.snapshot's
// workspaces, tabs, panes and agents).
type Snapshot struct {
	Workspaces []herdr.WorkspaceInfo
	Tabs       []herdr.TabInfo
	Panes      []herdr.PaneInfo
	Agents     []herdr.AgentInfo
}

// Stream is a live event subscription, as *herdr.Stream is one.
type Stream interface {
	// Events delivers events in herdr's order; it is closed when the
	// stream ends.
	Events() <-chan herdr.Event
	// Err is why the stream ended: nil after Close or a cancelled
	// context, an error matching herdr.ErrStreamDropped otherwise.
	Err() error
	// Close ends the stream; safe to call more than once.
	Close() error
}

// Client is a herdr client whose Subscribe returns the concrete
// *herdr.Stream, as *herdr.Client does.
type Client interface {
	Lister
	Subscribe(ctx context.Context, subs []herdr.Subscription) (*herdr.Stream, error)
}

// FromClient adapts c (normally a *herdr.Client) to Source.
func FromClient(c Client) Source { return clientSource{c} }

type clientSource struct{ Client }

func (s clientSource) Subscribe(ctx context.Context, subs []herdr.Subscription) (Stream, error) {
	st, err := s.Client.Subscribe(ctx, subs)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return st, nil
}

// Snapshot reads herdr with session.snapshot where the client has it (as
// *herdr.Client does); a client without it answers not_implemented, so the
// cache falls back to the four listings.
func (s clientSource) Snapshot(ctx context.Context) (*Snapshot, error) {
	sc, ok := s.Client.(interface {
		Snapshot(context.Context) (*herdr.SessionSnapshot, error)
	})
	if !ok {
		return nil, &herdr.Error{Method: "session.snapshot", Code: "not_implemented", Message: "the client cannot read a session snapshot"}
	}
	sn, err := sc.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Workspaces: sn.Workspaces, Tabs: sn.Tabs, Panes: sn.Panes, Agents: sn.Agents}, nil
}
