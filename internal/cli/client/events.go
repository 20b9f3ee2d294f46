package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/fleetd-dev/fleetd/mcp"
)

// eventsPath is GET /events, of member alone unless it is "".
func eventsPath(member string) string {
	if member == "" {
		return "/events"
	}
	return "/events?member=" + url.QueryEscape(member)
}

// Events reads the recent events of every member, or of member alone (by
// any reference), oldest first (GET /events).
func (c *Client) Events(ctx context.Context, member string) ([]mcp.MemberEvent, error) {
	var list mcp.EventList
	err := c.Get(ctx, eventsPath(member), &list)
	return list.Items, err
}

// EventHandler is what an event watch tells its caller.
type EventHandler struct {
	// Synced gets the events there are, oldest first, once they are in.
	Synced func(events []mcp.MemberEvent) error
	// Changed gets each later event: typ is mcp.WatchAdded for a new one,
	// mcp.WatchModified for a repeat of a member's last event (its count
	// and time changed).
	Changed func(typ string, e mcp.MemberEvent) error
}

// WatchEvents follows fleetd's event watch (GET /events?watch=1), of
// member alone unless it is "", calling h, until the stream ends (an
// error) or ctx does (nil).
func (c *Client) WatchEvents(ctx context.Context, member string, h EventHandler) error {
	path := eventsPath(member)
	if member == "" {
		path += "?watch=1"
	} else {
		path += "&watch=1"
	}
	var initial []mcp.MemberEvent
	synced := false
	return c.watch(ctx, path, func(we mcp.WatchEvent) error {
		switch we.Type {
		case mcp.WatchSynced:
			synced = true
			return h.Synced(initial)
		case mcp.WatchAdded, mcp.WatchModified:
		default:
			return nil // a later fleetd's event: not ours to follow
		}
		var e mcp.MemberEvent
		if err := json.Unmarshal(we.Object, &e); err != nil {
			return fmt.Errorf("event watch: bad event: %w", err)
		}
		if !synced {
			initial = append(initial, e)
			return nil
		}
		return h.Changed(we.Type, e)
	})
}
