package printers

import (
	"fmt"
	"io"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// EventStream prints members' events (`fleetd get events`, and -w as they
// arrive) the way kubectl prints events: a table of LAST SEEN (with the
// repeat count), TYPE, REASON, OBJECT and MESSAGE, oldest first, whose
// column widths later lines keep; -o json and yaml print an EventList, or
// under -w one event after another (YAML documents separated by ---).
type EventStream struct {
	w      io.Writer
	format Format // the table, json or yaml
	watch  bool
	now    func() time.Time
	widths []int // the table's column widths, once its header is printed
}

// NewEventStream returns an event printer writing to w; with watch, the
// events the stream starts with are followed by one line per later event.
func NewEventStream(w io.Writer, f Format, watch bool, now func() time.Time) *EventStream {
	return &EventStream{w: w, format: f, watch: watch, now: now}
}

var eventHeader = []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}

// Initial prints the events there are.
func (s *EventStream) Initial(events []mcp.MemberEvent) error {
	if s.format.structured() && !s.watch {
		if events == nil {
			events = []mcp.MemberEvent{}
		}
		return s.format.writeStructured(s.w, mcp.EventList{APIVersion: v1alpha1.GroupVersion, Kind: "EventList", Items: events})
	}
	if !s.format.table() {
		for _, e := range events {
			if err := s.Change(mcp.WatchAdded, e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(events) == 0 {
		if s.watch {
			return nil // the header comes with the first event
		}
		_, err := fmt.Fprintln(s.w, "No events found.")
		return err
	}
	rows := [][]string{eventHeader}
	for _, e := range events {
		rows = append(rows, s.row(e))
	}
	s.widths = columnWidths(rows)
	for _, r := range rows {
		if err := writeRow(s.w, r, s.widths); err != nil {
			return err
		}
	}
	return nil
}

// Change prints one later event; typ is its watch type (ADDED, or
// MODIFIED for a repeat), which only a structured format shows.
func (s *EventStream) Change(typ string, e mcp.MemberEvent) error {
	if s.format.table() {
		if s.widths == nil {
			s.widths = columnWidths([][]string{eventHeader})
			if err := writeRow(s.w, eventHeader, s.widths); err != nil {
				return err
			}
		}
		return writeRow(s.w, s.row(e), s.widths)
	}
	if s.format.name == "yaml" {
		if _, err := io.WriteString(s.w, "---\n"); err != nil {
			return err
		}
	}
	return s.format.writeStructured(s.w, e)
}

func (s *EventStream) row(e mcp.MemberEvent) []string {
	t := e.Time
	seen := age(&t, s.now())
	if e.Count > 1 {
		seen = fmt.Sprintf("%s (x%d)", seen, e.Count)
	}
	r := []string{seen, e.Type, e.Reason, Name(v1alpha1.KindMember, e.Member), e.Message}
	for i, c := range r {
		r[i] = termtext.Line(c)
	}
	return r
}
