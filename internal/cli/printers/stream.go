package printers

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/termtext"
	"github.com/fleetd-dev/fleetd/mcp"
)

// MemberStream prints a member watch (`fleetd get members -w`) as it
// arrives: the members it starts with as a table whose column widths every
// later line keeps, three spaces apart like the tabwriter of a plain get,
// then one line per change; or, in a format other than a table, one object
// at a time (JSON objects one after another, YAML documents separated by
// ---, a template per member).
type MemberStream struct {
	w      io.Writer
	format Format
	events bool // each line starts with its event type (an EVENT column)
	now    func() time.Time
	widths []int // the table's column widths
}

// NewMemberStream returns a stream printer writing to w; with events,
// each line says its event (ADDED, MODIFIED, DELETED) first.
func NewMemberStream(w io.Writer, f Format, events bool, now func() time.Time) *MemberStream {
	return &MemberStream{w: w, format: f, events: events, now: now}
}

// Initial prints the members the watch starts with, as ADDED.
func (s *MemberStream) Initial(members []v1alpha1.Member) error {
	if !s.format.table() {
		for i := range members {
			if err := s.Change(mcp.WatchAdded, &members[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(members) == 0 && !s.events {
		s.widths = columnWidths([][]string{s.header()})
		return nil
	}
	rows := [][]string{s.header()}
	for i := range members {
		rows = append(rows, s.row(mcp.WatchAdded, &members[i]))
	}
	s.widths = columnWidths(rows)
	for _, r := range rows {
		if err := s.writeRow(r); err != nil {
			return err
		}
	}
	return nil
}

// Change prints one change of member m; typ is its event type.
func (s *MemberStream) Change(typ string, m *v1alpha1.Member) error {
	f := s.format
	if f.table() {
		if len(s.widths) != len(s.header()) {
			s.widths = columnWidths([][]string{s.header()})
		}
		return s.writeRow(s.row(typ, m))
	}
	if s.events && f.name == "name" {
		_, err := fmt.Fprintf(s.w, "%s %s\n", typ, Name(v1alpha1.KindMember, m.Name))
		return err
	}
	m.APIVersion, m.Kind = v1alpha1.GroupVersion, v1alpha1.KindMember
	switch {
	case f.name == "name":
		_, err := fmt.Fprintln(s.w, Name(v1alpha1.KindMember, m.Name))
		return err
	case f.templated():
		return f.executeTemplate(s.w, m)
	case f.name == "yaml":
		if _, err := io.WriteString(s.w, "---\n"); err != nil {
			return err
		}
	}
	return f.writeStructured(s.w, m)
}

func (s *MemberStream) header() []string {
	h := memberTable.header(s.format.wide())
	if s.events {
		h = append([]string{"EVENT"}, h...)
	}
	return h
}

func (s *MemberStream) row(typ string, m *v1alpha1.Member) []string {
	r := memberTable.row(m, s.format.wide(), s.now())
	if s.events {
		r = append([]string{typ}, r...)
	}
	for i, c := range r {
		r[i] = termtext.Line(c)
	}
	return r
}

func (s *MemberStream) writeRow(cells []string) error { return writeRow(s.w, cells, s.widths) }

// writeRow writes cells padded to widths, three spaces apart, the way a
// table that grows line by line keeps its columns; a wider cell pushes
// the rest right.
func writeRow(w io.Writer, cells []string, widths []int) error {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i == len(cells)-1 {
			break
		}
		pad := 3
		if i < len(widths) {
			pad += widths[i] - len([]rune(c))
		}
		b.WriteString(strings.Repeat(" ", max(pad, 1)))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// streamMinWidths are the widths a column of the watch table starts with,
// so that a later phase or agent status lines up too.
var streamMinWidths = map[string]int{"EVENT": len("MODIFIED"), "PHASE": len(v1alpha1.PhaseTerminating), "AGENT": len("working"),
	"LAST SEEN": len("59m (x10)"), "TYPE": len(v1alpha1.EventWarning), "REASON": len("WorkspaceCreated"), "OBJECT": len("member/") + 16}

// columnWidths are the widths of rows' columns; the first row is the
// header.
func columnWidths(rows [][]string) []int {
	var w []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(w) {
				w = append(w, streamMinWidths[c])
			}
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	return w
}
