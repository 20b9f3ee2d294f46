package console

import (
	"fmt"
	"net/http"

	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// The pages show at most maxShownBytes of a text someone else wrote; these
// serve one such text whole, as plain text (never HTML: nothing in it is
// interpreted, and the console's Content-Security-Policy and nosniff apply
// to it as to every answer).

// messageText is GET /ui/messages/{id}: a message of the primary's mailbox.
func (c *Console) messageText(w http.ResponseWriter, r *http.Request, _ session) {
	id := r.PathValue("id")
	cursor := ""
	for {
		page, err := c.o.Messages.PollPage(r.Context(), c.o.PrimaryName, messaging.PollRequest{Cursor: cursor, Limit: maxPollLimit})
		if err != nil {
			writePlain(w, http.StatusServiceUnavailable, "read the primary's mailbox: "+err.Error()+"\n")
			return
		}
		for _, m := range page.Messages {
			if m.ID == id {
				writePlain(w, http.StatusOK, m.Content)
				return
			}
		}
		if page.More == 0 || len(page.Messages) == 0 {
			break
		}
		cursor = page.Next
	}
	writePlain(w, http.StatusNotFound, fmt.Sprintf("no message %q in the primary's mailbox: it was acknowledged, or never was\n", id))
}

// maxPollLimit is the most messages one page of the mailbox may hold.
const maxPollLimit = 1000

// questionText is GET /ui/questions/{turn}: the question a worker asks in
// an open turn of the primary's.
func (c *Console) questionText(w http.ResponseWriter, r *http.Request, _ session) {
	turn := r.PathValue("turn")
	for _, worker := range c.o.Messages.Busy() {
		for _, t := range c.o.Messages.Status(worker).OpenTurns {
			if t.ID == turn && t.Asking && t.Caller == c.o.PrimaryName {
				writePlain(w, http.StatusOK, t.Question)
				return
			}
		}
	}
	writePlain(w, http.StatusNotFound, fmt.Sprintf("no open question in turn %q: it was answered, or the turn ended\n", turn))
}

func writePlain(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}
