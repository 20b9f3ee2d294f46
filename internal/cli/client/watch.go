package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

const (
	// watchIdle ends a watch that heard nothing, not even a heartbeat
	// (fleetd sends one every 15s), for this long: the connection is dead.
	watchIdle = time.Minute
	// maxWatchEvent bounds one event of the member watch.
	maxWatchEvent = 4 << 20
)

// WatchHandler is what a member watch tells its caller.
type WatchHandler struct {
	// Synced gets the members that match once the stream's initial state
	// is in.
	Synced func(members []v1alpha1.Member) error
	// Changed gets each later change of a member that matches, or matched
	// until this change: typ is mcp.WatchAdded when it starts to match,
	// mcp.WatchModified, or mcp.WatchDeleted when it was deleted or stops
	// matching.
	Changed func(typ string, m *v1alpha1.Member) error
}

// WatchMembers follows fleetd's member watch (GET /members?watch=1,
// server-sent events; see package mcp) through match, calling h, until
// the stream ends — an error: fleetd stopped, dropped the watch or went
// silent — or ctx does (nil). An error of h ends it too.
func (c *Client) WatchMembers(ctx context.Context, match func(*v1alpha1.Member) bool, h WatchHandler) error {
	view := &memberView{match: match, h: h, shown: map[string]bool{}}
	return c.watch(ctx, "/members?watch=1", func(we mcp.WatchEvent) error { return view.event(we.Type, we.Object) })
}

// watch follows one of fleetd's watches at path (server-sent events, each
// a [mcp.WatchEvent]), calling on with each, until the stream ends — an
// error: fleetd stopped, dropped the watch or went silent — or ctx does
// (nil). An error of on ends it too.
func (c *Client) watch(ctx context.Context, path string, on func(mcp.WatchEvent) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	body, err := c.openStream(ctx, path)
	if err != nil {
		return err
	}
	defer body.Close()
	errIdle := fmt.Errorf("the watch heard nothing from fleetd at %s for %s, not even a heartbeat", c.server, watchIdle)
	idle := time.AfterFunc(watchIdle, func() { cancel(errIdle) })
	defer idle.Stop()

	// Any bytes, a heartbeat comment included, prove the stream alive.
	events := newEventReader(readFunc(func(b []byte) (int, error) {
		n, err := body.Read(b)
		if n > 0 {
			idle.Reset(watchIdle)
		}
		return n, err
	}), maxWatchEvent)
	for {
		ev, err := events.next()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
				return cause
			}
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, io.EOF) {
				return fmt.Errorf("watch stream from %s: %w", c.server, err)
			}
			return fmt.Errorf("fleetd at %s ended the watch stream (it is shutting down?)", c.server)
		}
		var we mcp.WatchEvent
		if err := json.Unmarshal(ev.Data, &we); err != nil {
			return fmt.Errorf("watch stream from %s: bad event: %w", c.server, err)
		}
		if we.Type == mcp.WatchError {
			var e mcp.APIError
			_ = json.Unmarshal(we.Object, &e)
			return fmt.Errorf("fleetd ended the watch: %s (%s)", termtext.Line(e.Error.Message), termtext.Line(e.Error.Code))
		}
		if err := on(we); err != nil {
			return err
		}
	}
}

// readFunc is an io.Reader made of a function.
type readFunc func([]byte) (int, error)

func (f readFunc) Read(b []byte) (int, error) { return f(b) }

// memberView turns the stream's events into what a watch through match
// sees.
type memberView struct {
	match   func(*v1alpha1.Member) bool
	h       WatchHandler
	synced  bool
	initial []v1alpha1.Member
	shown   map[string]bool // members whose last event said they match
}

func (v *memberView) event(typ string, raw json.RawMessage) error {
	switch typ {
	case mcp.WatchSynced:
		v.synced = true
		if err := v.h.Synced(v.initial); err != nil {
			return err
		}
		for _, m := range v.initial {
			v.shown[m.Name] = true
		}
		v.initial = nil
		return nil
	case mcp.WatchAdded, mcp.WatchModified, mcp.WatchDeleted:
	default:
		return nil // a later fleetd's event: not ours to follow
	}
	var m v1alpha1.Member
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("watch stream: bad member: %w", err)
	}
	match := typ != mcp.WatchDeleted && v.match(&m)
	if !v.synced {
		if match {
			v.initial = append(v.initial, m)
		}
		return nil
	}
	was := v.shown[m.Name]
	switch {
	case match && !was:
		typ = mcp.WatchAdded
	case match:
		typ = mcp.WatchModified
	case was:
		// Deleted, or no longer selected: gone from this watch.
		typ = mcp.WatchDeleted
	default:
		return nil
	}
	if match {
		v.shown[m.Name] = true
	} else {
		delete(v.shown, m.Name)
	}
	return v.h.Changed(typ, &m)
}
