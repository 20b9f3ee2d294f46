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
	release, ok := c.admit(w)
	if !ok {
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
	id := sessionID(r)
	for sent := uint64(0); ; {
		var goOn bool
		if sent, goOn = c.eventStep(r.Context(), sw, page, render, id, s, sent); !goOn {
			return
		}
	}
}

// eventStep sends the page's rendering if it is not the one sent last
// (version sent), or the event that ends the stream, then waits for the
// next change; it returns the version sent and whether the stream goes on.
func (c *Console) eventStep(ctx context.Context, sw *sse.Writer, page *livePage, render func(tailCaches) (string, bool), id string, s session, sent uint64) (uint64, bool) {
	until, live := c.sessions.expiry(id)
	if !live {
		_ = sw.Send(sse.Event{Name: "ended"})
		return sent, false
	}
	// The channels are taken before the state is read, so that a change
	// made while rendering wakes the next round.
	members, messages := c.o.Members.Changed(), c.o.Messages.Changed()
	frame, version, err := page.current(ctx, members, messages, render)
	switch {
	case err != nil:
		return sent, false
	case frame == nil:
		_ = sw.Send(sse.Event{Name: "gone"})
		return sent, false
	case version != sent:
		if err := sw.WriteEncoded(frame); err != nil {
			return sent, false
		}
		sent = version
	}
	expires := c.o.Clock.NewTimer(until.Sub(c.o.Clock.Now()))
	defer expires.Stop()
	select {
	case <-ctx.Done():
		return sent, false
	case <-c.ending:
		return sent, false // fleetd is stopping; the page's EventSource reconnects to the next one
	case <-members:
	case <-messages:
	case <-s.done:
	case <-expires.C():
	}
	select {
	case <-c.ending:
		return sent, false
	default:
		return sent, ctx.Err() == nil
	}
}

// admit takes a stream's slots — one of the console's [Options.MaxStreams]
// and one of the primary's held calls (Options.Holds) — or answers 429;
// release gives them back.
func (c *Console) admit(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case c.streams <- struct{}{}:
	default:
		writeJSON(w, http.StatusTooManyRequests, result{Error: "too many console pages are open; close some"})
		return nil, false
	}
	held, err := c.o.Holds.Acquire(c.o.PrimaryName, true)
	if err != nil {
		<-c.streams
		writeJSON(w, http.StatusTooManyRequests, result{Error: "fleetd's listener holds as many open calls as it can carry; close some console pages or held calls"})
		return nil, false
	}
	return func() { held(); <-c.streams }, true
}
