package tail_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/tail"
)

// agents answers agent.read with screen (or err) and records the reads.
type agents struct {
	screen string
	err    error
	reads  []herdr.AgentReadParams
}

func (a *agents) ReadAgent(_ context.Context, p herdr.AgentReadParams) (*herdr.PaneReadResult, error) {
	a.reads = append(a.reads, p)
	if a.err != nil {
		return nil, a.err
	}
	return &herdr.PaneReadResult{Source: p.Source, Format: p.Format, Text: a.screen}, nil
}

// A screen is read from herdr's visible screen as plain text (never a
// line count, which scrolls an idle alternate-screen agent), its blank
// bottom left out, and cut to the lines asked for.
func TestScreen_ReadsTheVisibleScreenWithoutSideEffects(t *testing.T) {
	const screen = "one\ntwo  \nthree\nfour \n  \n\n"
	for _, tt := range []struct {
		lines int
		want  string
	}{
		{0, "one\ntwo  \nthree\nfour"},
		{2, "three\nfour"},
		{10, "one\ntwo  \nthree\nfour"},
	} {
		a := &agents{screen: screen}
		got, err := tail.Screen(context.Background(), a, "w1:p1", tt.lines)
		if err != nil || got != tt.want {
			t.Errorf("Screen(lines %d) = %q, %v; want %q", tt.lines, got, err, tt.want)
		}
		if len(a.reads) != 1 {
			t.Fatalf("%d reads, want 1", len(a.reads))
		}
		r := a.reads[0]
		if r.Target != "w1:p1" || r.Source != herdr.SourceVisible || r.Lines != 0 || r.Format != herdr.FormatText || r.StripANSI == nil || !*r.StripANSI {
			t.Errorf("read %+v, want the visible screen of w1:p1 as text, ANSI stripped, no line count", r)
		}
	}
	if got, err := tail.Screen(context.Background(), &agents{screen: "\n \n"}, "w1:p1", 0); err != nil || got != "" {
		t.Errorf("Screen of a blank screen = %q, %v; want no text", got, err)
	}
	boom := &herdr.Error{Method: "agent.read", Code: "agent_not_found"}
	if _, err := tail.Screen(context.Background(), &agents{err: boom}, "w1:p1", 0); !errors.Is(err, boom) {
		t.Errorf("Screen of a failed read = %v; want herdr's error, wrapped", err)
	}
}

func TestExcerpt_IsTheLastLinesThatHoldSomething(t *testing.T) {
	screen := "old output\n\nEdit main.go?\n  1. Yes\n\t\n  2. No   \n\n\n"
	if got, want := tail.Excerpt(screen, 3), "Edit main.go?\n  1. Yes\n  2. No"; got != want {
		t.Errorf("Excerpt = %q, want %q", got, want)
	}
	if got := tail.Excerpt("\n \n", 3); got != "" {
		t.Errorf("Excerpt of a blank screen = %q", got)
	}
}
