package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/fleetd-dev/fleetd/mcp"
)

// maxLogEvent bounds one event of a log follow: a frame is at most one
// screen, far smaller.
const maxLogEvent = 8 << 20

// ErrMemberGone ends a log follow whose member was deleted.
var ErrMemberGone = errors.New("the member was deleted")

// FollowLogs follows member ref's screen (GET /members/{ref}/logs?follow=1)
// from its last lines (0: all), calling on with each frame, until fleetd
// says the member was deleted (ErrMemberGone) or the stream ends (an
// error).
func (c *Client) FollowLogs(ctx context.Context, ref string, lines int, on func(mcp.LogFrame)) error {
	body, err := c.openStream(ctx, logsPath(ref, lines)+"&follow=1")
	if err != nil {
		return err
	}
	defer body.Close()
	events := newEventReader(body, maxLogEvent)
	for {
		ev, err := events.next()
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("fleetd ended the stream (was it stopped?)")
		case err != nil:
			return err
		}
		switch ev.Name {
		case "lines":
			var f mcp.LogFrame
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				return fmt.Errorf("decode a lines event: %w", err)
			}
			on(f)
		case "gone":
			return ErrMemberGone
		case "error":
			var te mcp.ToolError
			if err := json.Unmarshal(ev.Data, &te); err != nil || te.Code == "" {
				return fmt.Errorf("the stream ended with an error: %s", ev.Data)
			}
			return fmt.Errorf("%s (%s)", te.Message, te.Code)
		}
		// Another event is one a newer fleetd sends.
	}
}
