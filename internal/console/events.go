package console

import (
	"fmt"
	"net/http"
	"strings"
)

// events is GET /ui/events[?member=NAME]: a server-sent event stream of the
// page's live part, rendered on the server. It renders once at once, then
// again whenever the controllers (a member's status, the desired state) or
// the messaging core (a question, a reply, an ack) report a change, and
// sends an "update" event only when the rendering differs from the last
// one sent. Nothing polls: the stream sleeps on the two change channels.
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
	member := r.URL.Query().Get("member")
	if member != "" {
		if _, ok := c.o.Members.Member(member); !ok {
			writeJSON(w, http.StatusNotFound, result{Error: fmt.Sprintf("member %q not found", member)})
			return
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	id := sessionID(r)
	last := ""
	tails := tailCaches{}
	for {
		until, live := c.sessions.expiry(id)
		if !live {
			_, _ = fmt.Fprint(w, "event: ended\ndata: \n\n")
			_ = rc.Flush()
			return
		}
		// The channels are taken before the state is read, so that a
		// change made while rendering wakes the next round.
		members, messages := c.o.Members.Changed(), c.o.Messages.Changed()
		html, found := c.fragment(ctx, member, tails)
		if !found {
			_, _ = fmt.Fprint(w, "event: gone\ndata: \n\n")
			_ = rc.Flush()
			return
		}
		if html != last {
			if _, err := fmt.Fprintf(w, "event: update\n%s\n", sseData(html)); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			last = html
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

// sseData frames text as the data lines of one event.
func sseData(text string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString("data: ")
		b.WriteString(strings.TrimSuffix(line, "\r"))
		b.WriteByte('\n')
	}
	return b.String()
}
