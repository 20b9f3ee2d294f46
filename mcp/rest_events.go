package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// GET /events is the recent events of every member (`fleetd get events`),
// oldest first, as the controllers keep them for describe: an
// [EventList]. member=REF keeps one member's (by name, pane id, terminal
// id or session id; a name no member has yet is taken as a name).
//
// With watch=1 it is a server-sent event stream shaped like the member
// watch (rest_watch.go): an ADDED event per current event, SYNCED, then
// ADDED for each new event and MODIFIED for a repeat of the last one (the
// same reason and message again: its count and time change), until the
// client goes or fleetd stops. Each stream waits on the controllers'
// change signal ([MemberWaiter.WaitFor]) — every event wakes it — and
// diffs the events against what it sent; nothing polls. A comment line
// every [DefaultWatchHeartbeat] keeps a quiet stream open. An event
// stream counts as a member watch stream ([Options.MaxWatchers],
// [Options.MaxWatchersPerToken], the primary's share kept) and as a held
// call (429 beyond either).

// EventList is the body of GET /events.
type EventList struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Items      []MemberEvent `json:"items"`
}

// MemberEvent is an event of one member.
type MemberEvent struct {
	Member string `json:"member"`
	v1alpha1.Event
}

func (s *restServer) eventRoutes(mux *http.ServeMux) {
	mux.Handle("GET /events", s.authenticated(s.listEvents))
}

func (s *restServer) listEvents(w http.ResponseWriter, r *http.Request, id tokens.Identity) {
	member := r.URL.Query().Get("member")
	if member != "" {
		if m, ok := s.members.resolve(member); ok {
			member = m.Name
		}
	}
	if isWatch(r) {
		s.watchEvents(w, r, id, member)
		return
	}
	writeJSON(w, http.StatusOK, EventList{APIVersion: v1alpha1.GroupVersion, Kind: "EventList", Items: s.eventsOf(s.opts.Members.Members(), member)})
}

// eventsOf are the events of members (of member alone unless it is
// ""), oldest first.
func (s *restServer) eventsOf(members []v1alpha1.Member, member string) []MemberEvent {
	out := []MemberEvent{}
	for _, m := range members {
		if member != "" && m.Name != member {
			continue
		}
		for _, e := range s.opts.Members.MemberEvents(m.Name) {
			out = append(out, MemberEvent{Member: m.Name, Event: e})
		}
	}
	slices.SortStableFunc(out, func(a, b MemberEvent) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Member, b.Member))
	})
	return out
}

// eventKey identifies one state of an event: a repeat changes its count
// and time, and so its key.
type eventKey struct {
	member, typ, reason, message string
	count                        int32
	unixNano                     int64
}

func keyOf(e MemberEvent) eventKey {
	return eventKey{e.Member, e.Type, e.Reason, e.Message, e.Count, e.Time.UnixNano()}
}

// watchEvents serves GET /events?watch=1.
func (s *restServer) watchEvents(w http.ResponseWriter, r *http.Request, id tokens.Identity, member string) {
	release, ok := s.eventWatchAllowed(w, r, id)
	if !ok {
		return
	}
	defer release()
	ctx, sw, end, ok := s.startStream(w, r)
	if !ok {
		return
	}
	defer end()
	c := &eventCursor{s: s, member: member}
	initial, _ := c.fresh(s.opts.Members.Members())
	if sw.WriteEncoded(appendEvent(eventFrames(initial, true), WatchSynced, nil)) != nil {
		return
	}
	beat := cmp.Or(s.opts.WatchHeartbeat, DefaultWatchHeartbeat)
	for {
		fresh, err := c.next(ctx, beat)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil: // a quiet beat
			err = sw.Comment("heartbeat")
		default:
			err = sw.WriteEncoded(eventFrames(fresh, false))
		}
		if err != nil {
			return
		}
	}
}

// startStream starts a server-sent-event stream on w: ctx ends when the
// client goes or the handler's streams end (fleetd stops); end releases
// what it took. ok is false when the stream could not start.
func (s *restServer) startStream(w http.ResponseWriter, r *http.Request) (ctx context.Context, sw *sse.Writer, end func(), ok bool) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.streams, cancel)
	end = func() {
		stop()
		cancel()
	}
	sw, err := sse.Start(w)
	if err != nil {
		end()
		return nil, nil, nil, false
	}
	return ctx, sw, end, true
}

// eventWatchAllowed refuses a watch this fleetd cannot serve now, saying
// why, or holds its place among the watch streams and the held calls —
// the member watch's quota, per token with the primary's share kept — and
// returns what gives it back.
func (s *restServer) eventWatchAllowed(w http.ResponseWriter, r *http.Request, id tokens.Identity) (release func(), ok bool) {
	switch accept := r.Header.Get("Accept"); {
	case s.opts.Waiter == nil:
		writeError(w, http.StatusNotImplemented, codeUnavailable, "this fleetd has no event stream to watch")
	case accept != "" && !acceptsEventStream(accept):
		writeError(w, http.StatusNotAcceptable, "not_acceptable", "a watch answers with text/event-stream; send Accept: text/event-stream")
	case s.streams.Err() != nil:
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, errWatchEnded.Error())
	default:
		release, te := s.holdStream(s.watches, "watch streams", id)
		if te != nil {
			writeToolError(w, te)
			return nil, false
		}
		return release, true
	}
	return nil, false
}

// eventCursor is what one event stream has sent: the events of member
// ("" for all) in the states it sent them.
type eventCursor struct {
	s      *restServer
	member string
	sent   map[eventKey]bool
}

// fresh returns the events of members that were not sent, and takes the
// events there are now as sent (what the controllers no longer keep is
// forgotten).
func (c *eventCursor) fresh(members []v1alpha1.Member) ([]MemberEvent, bool) {
	var fresh []MemberEvent
	now := map[eventKey]bool{}
	for _, e := range c.s.eventsOf(members, c.member) {
		k := keyOf(e)
		now[k] = true
		if !c.sent[k] {
			fresh = append(fresh, e)
		}
	}
	c.sent = now
	return fresh, len(fresh) > 0
}

// next waits, woken by every change the controllers signal, for events not
// sent yet; after beat without any it returns an error (the heartbeat's
// turn), and ctx's when ctx ends.
func (c *eventCursor) next(ctx context.Context, beat time.Duration) ([]MemberEvent, error) {
	waitCtx, beatDone := context.WithCancel(ctx)
	defer beatDone()
	t := c.s.opts.Clock.AfterFunc(beat, beatDone)
	defer t.Stop()
	var fresh []MemberEvent
	err := c.s.opts.Waiter.WaitFor(waitCtx, func(all []v1alpha1.Member) (ok bool) {
		fresh, ok = c.fresh(all)
		return ok
	})
	return fresh, err
}

// eventFrames are events as watch events: ADDED, or MODIFIED for a repeat
// of a member's last event (its count above one) unless initial.
func eventFrames(events []MemberEvent, initial bool) []byte {
	var frames []byte
	for _, e := range events {
		typ := WatchAdded
		if e.Count > 1 && !initial {
			typ = WatchModified
		}
		frames = appendEvent(frames, typ, eventJSON(e))
	}
	return frames
}

func eventJSON(e MemberEvent) []byte {
	b, _ := json.Marshal(e) // plain data: this does not fail
	return b
}
