package mcp

// GET /members/{ref}/logs is a member's terminal tail (`fleetd logs`), read
// through [Terminals] — herdr's visible screen, never a read that could
// scroll the agent. Without follow it answers one [LogsOutput]; with
// follow=1 it is a server-sent event stream: an event "lines" (a
// [LogFrame]) with the tail, then one per change of the screen, until the
// client goes, the member is deleted (event "gone") or a read fails before
// the first frame (event "error"). Bounds: lines is 0 (the whole screen) to
// tail.MaxLines; at most [Options.MaxFollowersPerToken] streams per worker
// token and [Options.MaxFollowers] in all, a quarter of them the primary's
// alone (429 beyond), each a held call (limits.go); a follower holds one
// screen, never a queue, and one that stops reading is cut by the
// listener's per-write bound like any response.
// Only the primary, or a worker for its own terminal, may read one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Terminals reads members' terminals (a *tail.Tails).
type Terminals interface {
	Read(ctx context.Context, name string, lines int) (tail.Tail, error)
	Follow(ctx context.Context, name string, lines int, emit func(tail.Frame) error) error
}

// Defaults of [Options.MaxFollowers] and [Options.MaxFollowersPerToken]:
// each follow reads herdr on every change of its screen.
const (
	DefaultMaxFollowers         = 32
	DefaultMaxFollowersPerToken = 4
)

// LogsOutput is the body of GET /members/{ref}/logs.
type LogsOutput struct {
	Member string   `json:"member"`
	PaneID string   `json:"paneId"`
	Lines  []string `json:"lines"`
}

// LogFrame is the data of a "lines" event of GET /members/{ref}/logs?follow=1:
// lines to show after the earlier ones or, with redraw, the whole screen
// again (it changed other than by new lines at its bottom).
type LogFrame struct {
	Lines  []string `json:"lines"`
	Redraw bool     `json:"redraw,omitempty"`
	PaneID string   `json:"paneId,omitempty"`
}

func (s *restServer) memberLogs(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	ref := r.PathValue("name")
	m, ok := s.members.resolve(ref)
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "member "+quote(ref)+" not found (by name, pane id, terminal id or sessionId)")
		return
	}
	if !isPrimary(id) && id.Member != m.Name {
		writeToolError(w, toolErr(codeForbidden, "a worker may read only its own terminal"))
		return
	}
	if node := m.Status.NodeName; node != "" && s.opts.Node != "" && node != s.opts.Node {
		writeToolError(w, toolErr(codeUnavailable, "member %s runs on node %s, whose herdr holds its terminal: read it through that node's fleetd "+
			"(fleetd logs %s --server URL, with the node's address; fleetd describe node %s shows its gateway)", m.Name, node, m.Name, node))
		return
	}
	q := r.URL.Query()
	lines, err := intParam(q.Get("lines"), "lines")
	if err == nil && tail.CheckLines(int(lines)) != nil {
		err = toolErr(codeInvalidArgument, "lines: %d is out of range; want 1 to %d, or 0 for the whole screen", lines, tail.MaxLines)
	}
	if err != nil {
		writeToolError(w, err)
		return
	}
	var follow bool
	switch v := q.Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		writeToolError(w, toolErr(codeInvalidArgument, "follow: %s; want 1 or 0", quote(v)))
		return
	}
	if !follow {
		t, err := s.opts.Terminals.Read(r.Context(), m.Name, int(lines))
		if err != nil {
			writeToolError(w, terminalErr(m.Name, err))
			return
		}
		writeJSON(w, http.StatusOK, LogsOutput{Member: t.Member, PaneID: t.PaneID, Lines: t.Lines})
		return
	}
	release, te := s.holdStream(s.follows, "terminal follows", id)
	if te != nil {
		writeToolError(w, te)
		return
	}
	defer release()
	s.followLogs(w, r, m.Name, int(lines))
}

// followLogs streams member name's terminal as server-sent events until the
// client goes, the member is deleted or the handler's streams end.
func (s *restServer) followLogs(w http.ResponseWriter, r *http.Request, name string, lines int) {
	ctx, sw, end, ok := s.startStream(w, r)
	if !ok {
		return
	}
	defer end()
	err := s.opts.Terminals.Follow(ctx, name, lines, func(f tail.Frame) error {
		return sendJSON(sw, "lines", LogFrame(f))
	})
	switch {
	case ctx.Err() != nil:
		// The client went, or fleetd is shutting down.
	case errors.Is(err, tail.ErrNotFound):
		_ = sendJSON(sw, "gone", ToolError{Code: codeNotFound, Message: "member " + name + " was deleted"})
	case err != nil:
		var we *sse.WriteError
		if !errors.As(err, &we) {
			_ = sendJSON(sw, "error", *terminalErr(name, err))
		}
	}
}

// sendJSON sends one server-sent event whose data is v as JSON.
func sendJSON(sw *sse.Writer, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", event, err)
	}
	return sw.Send(sse.Event{Name: event, Data: data})
}

// terminalErr is the API error of a failed terminal read.
func terminalErr(name string, err error) *ToolError {
	switch {
	case errors.Is(err, tail.ErrNotFound):
		return toolErr(codeNotFound, "member %s not found", quote(name))
	case errors.Is(err, tail.ErrNoPane):
		return toolErr(codeUnavailable, "%v: its terminal can be read once it runs (fleetd describe member %s)", err, name)
	case errors.Is(err, tail.ErrLines):
		return toolErr(codeInvalidArgument, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return toolErr(codeCancelled, "the request was cancelled")
	default:
		return toolErr(codeUnavailable, "read the terminal of %s through herdr: %v", name, err)
	}
}

// EndStreams ends every event stream the handler serves (GET
// /members/{ref}/logs?follow=1 and GET /members?watch=1) and refuses new
// watches; http.Server.RegisterOnShutdown takes it, so that a shutdown
// does not wait for streams that never end on their own.
func (h *Handler) EndStreams() { h.s.endStreams() }

// intParam parses a whole-number query parameter; "" is 0.
func intParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, toolErr(codeInvalidArgument, "%s: %s is not a whole number", name, quote(v))
	}
	return n, nil
}
