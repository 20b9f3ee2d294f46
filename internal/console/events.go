package console

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fleetd-dev/fleetd/internal/sse"
)

// events is GET /ui/events[?member=NAME]: a server-sent event stream of the
// page's live part, rendered on the server. It renders once at once, then
// again whenever the controllers (a member's status, the desired state) or
// the messaging core (a question, a reply, an ack) report a change, and
// sends an "update" event only when the rendering differs from the last
// one sent. Nothing polls: the stream sleeps on the two change channels.
// The rendering is made once per change for every stream of the same page
// and written as it was encoded ([livePages]).
//
// A stream does not keep its session alive, and ends with it: at logout,
// and when the session expires (an "ended" event tells the page).
func (c *Console) events(w http.ResponseWriter, r *http.Request, s session) {
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		writeJSON(w, http.StatusTooManyRequests, result{Error: "too many console pages are open; close some"})
		return
	}
	release, err := c.o.Holds.Acquire(c.o.PrimaryName, true)
	if err != nil {
		writeJSON(w, http.StatusTooManyRequests, result{Error: "fleetd's listener holds as many open calls as it can carry; close some console pages or held calls"})
		return
	}
	defer release()
	member := r.URL.Query().Get("member")
	if member != "" {
		if _, ok := c.o.Members.Member(member); !ok {
			writeJSON(w, http.StatusNotFound, result{Error: fmt.Sprintf("member %q not found", member)})
			return
		}
	}
	sw, err := sse.Start(w)
	if err != nil {
		return
	}
	page := c.live.open(member)
	defer c.live.close(member, page)
	// A rendering is shared: it must not end with the stream that made it.
	renderCtx := context.WithoutCancel(r.Context())
	render := func(tails tailCaches) (string, bool) { return c.fragment(renderCtx, member, tails) }
	ctx := r.Context()
	id := sessionID(r)
	var sent uint64
	for {
		until, live := c.sessions.expiry(id)
		if !live {
			_ = sw.Send(sse.Event{Name: "ended"})
			return
		}
		// The channels are taken before the state is read, so that a
		// change made while rendering wakes the next round.
		members, messages := c.o.Members.Changed(), c.o.Messages.Changed()
		frame, version, err := page.current(ctx, members, messages, render)
		switch {
		case err != nil:
			return
		case frame == nil:
			_ = sw.Send(sse.Event{Name: "gone"})
			return
		case version != sent:
			if err := sw.WriteEncoded(frame); err != nil {
				return
			}
			sent = version
		}
		expires := c.o.Clock.NewTimer(until.Sub(c.o.Clock.Now()))
		select {
		case <-ctx.Done():
		case <-members:
		case <-messages:
		case <-s.done:
		case <-expires.C():
		case <-c.ending:
		}
		expires.Stop()
		if ctx.Err() != nil {
			return
		}
		select {
		case <-c.ending:
			return // fleetd is stopping; the page's EventSource reconnects to the next one
		default:
		}
	}
}
