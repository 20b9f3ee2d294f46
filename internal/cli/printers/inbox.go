package printers

import (
	"fmt"
	"io"
	"time"

	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// inboxTextWidth is how much of a message the default inbox table shows.
const inboxTextWidth = 80

// PrintInbox prints a page of a mailbox (`fleetd inbox`): a table of FROM,
// KIND, AGE and the start of TEXT; -o wide adds the message and turn ids
// and shows TEXT whole; -o json and yaml print the page as it came.
func PrintInbox(w io.Writer, page mcp.PollOutput, f Format, now time.Time) error {
	if f.structured() {
		return f.writeStructured(w, page)
	}
	if len(page.Messages) == 0 {
		_, err := fmt.Fprintln(w, "No messages.")
		return err
	}
	tw := newTabwriter(w, 3)
	header := []string{"FROM", "KIND", "AGE", "TEXT"}
	if f.wide() {
		header = []string{"ID", "FROM", "KIND", "TURN", "AGE", "TEXT"}
	}
	fmt.Fprintln(tw, cells(header))
	for _, m := range page.Messages {
		age := "-"
		if t, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err == nil {
			age = humanDuration(now.Sub(t))
		}
		if f.wide() {
			fmt.Fprintln(tw, cells([]string{m.ID, m.From, m.Kind, dash(termtext.Line(m.TurnID)), age, m.Content}))
			continue
		}
		fmt.Fprintln(tw, cells([]string{m.From, m.Kind, age, shorten(termtext.Line(m.Content), inboxTextWidth)}))
	}
	return tw.Flush()
}

// shorten cuts s to at most n characters, marking the cut with "…".
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
