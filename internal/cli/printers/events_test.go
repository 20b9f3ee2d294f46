package printers

import (
	"bytes"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/mcp"
)

func memberEvent(member string, ago time.Duration, typ, reason, msg string, count int32) mcp.MemberEvent {
	return mcp.MemberEvent{Member: member, Event: v1alpha1.Event{Time: printNow.Add(-ago), Type: typ, Reason: reason, Message: msg, Count: count}}
}

// TestEventStream pins what get events prints: the table (a repeat's
// count after its age, a message made safe), the watch's lines that keep
// the columns of a header printed with the first event, and the
// structured forms.
func TestEventStream(t *testing.T) {
	now := func() time.Time { return printNow }
	initial := []mcp.MemberEvent{
		memberEvent("reviewer", 5*time.Minute, v1alpha1.EventNormal, "WorkspaceCreated", `created herdr workspace "api" (w2)`, 1),
		memberEvent("tester", 3*time.Minute, v1alpha1.EventWarning, "BackOff", "pane w3:p2 closed; recreating (restart 2)\x1b[2J", 2),
	}
	later := memberEvent("tester", 0, v1alpha1.EventNormal, "Started", "agent codex started in pane w3:p3 (tab w3:t3)", 1)
	var b bytes.Buffer
	for _, tt := range []struct {
		name   string
		format string
		watch  bool
		events []mcp.MemberEvent
	}{
		{"table", "", false, initial},
		{"empty", "", false, nil},
		{"watch", "", true, initial},
		{"watch from nothing", "", true, nil},
		{"json", "json", false, initial},
		{"watch yaml", "yaml", true, initial[:1]},
	} {
		f, err := ParseFormat(tt.format)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("== " + tt.name + "\n")
		s := NewEventStream(&b, f, tt.watch, now)
		if err := s.Initial(tt.events); err != nil {
			t.Fatal(err)
		}
		if tt.watch {
			if err := s.Change(mcp.WatchAdded, later); err != nil {
				t.Fatal(err)
			}
		}
	}
	golden(t, "events.txt", b.Bytes())
}
