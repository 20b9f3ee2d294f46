package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fleetd-dev/fleetd/mcp"
)

// rolloutPath is the REST path of kind/name's rollout (package mcp's
// rest_rollout.go): /rollouts/profiles/NAME or /rollouts/members/NAME.
func rolloutPath(kind, name string) string {
	return "/rollouts" + objectsPath(kind) + "/" + url.PathEscape(name)
}

// Rollout reads the rollout of the Profile or Member (kind) name: where
// it stands, what it waits for, the revisions kept.
func (c *Client) Rollout(ctx context.Context, kind, name string) (mcp.RolloutView, error) {
	var v mcp.RolloutView
	return v, c.Get(ctx, rolloutPath(kind, name), &v)
}

// WatchRollout follows kind/name's rollout (the rollout watch, a
// server-sent event stream), calling on with it at once and at every
// change, until on returns done or an error, the stream ends (an error:
// fleetd stopped, dropped the watch or the object is gone) or ctx ends
// (nil).
func (c *Client) WatchRollout(ctx context.Context, kind, name string, on func(mcp.RolloutView) (done bool, err error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stop error
	err := c.watch(ctx, rolloutPath(kind, name)+"?watch=1", func(we mcp.WatchEvent) error {
		if we.Type != mcp.WatchModified {
			return nil // a later fleetd's event: not ours to follow
		}
		var v mcp.RolloutView
		if err := json.Unmarshal(we.Object, &v); err != nil {
			return fmt.Errorf("rollout watch: bad rollout: %w", err)
		}
		done, err := on(v)
		if done || err != nil {
			stop = err
			cancel()
		}
		return err
	})
	if stop != nil {
		return stop
	}
	return err
}

// Revision reads revision n of kind/name, with its spec.
func (c *Client) Revision(ctx context.Context, kind, name string, n int64) (mcp.RevisionView, error) {
	var v mcp.RevisionView
	return v, c.Get(ctx, rolloutPath(kind, name)+"/revisions/"+strconv.FormatInt(n, 10), &v)
}

// RolloutUndo writes revision toRevision (0: the one before the current)
// of kind/name back as its definition.
func (c *Client) RolloutUndo(ctx context.Context, kind, name string, toRevision int64) (mcp.RolloutResult, error) {
	return c.rolloutWrite(ctx, kind, name, "undo", map[string]any{"toRevision": toRevision})
}

// RolloutRestart replaces kind/name's agents at their next idle moment,
// or at once with now.
func (c *Client) RolloutRestart(ctx context.Context, kind, name string, now bool) (mcp.RolloutResult, error) {
	return c.rolloutWrite(ctx, kind, name, "restart", map[string]any{"now": now})
}

// RolloutPause pauses (pause) or resumes a profile's rollout.
func (c *Client) RolloutPause(ctx context.Context, kind, name string, pause bool) (mcp.RolloutResult, error) {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	return c.rolloutWrite(ctx, kind, name, verb, map[string]any{})
}

func (c *Client) rolloutWrite(ctx context.Context, kind, name, verb string, body any) (mcp.RolloutResult, error) {
	var res mcp.RolloutResult
	_, err := c.Post(ctx, rolloutPath(kind, name)+"/"+strings.ToLower(verb), body, &res)
	return res, err
}
