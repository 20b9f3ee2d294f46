package messaging

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

// A worker that floods the primary's mailbox is refused once it is full, by
// count or by bytes, and nothing already stored goes; acknowledging makes
// room again.
func TestMailbox_FullRefusesTheSenderAndKeepsWhatIsStored(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		content string
		fits    int // messages accepted before the first refusal
	}{
		{"by count", Options{MaxMailboxMessages: 3}, "note", 3},
		{"by bytes", Options{MaxMailboxBytes: 10}, "abcd", 2}, // 4+4 fit, a third would be 12
		{"larger than the whole bound", Options{MaxMailboxBytes: 3}, "abcd", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCore(t, t.TempDir(), &fakeHerdr{}, &tt.opts)
			var stored []string
			for i := range tt.fits {
				content := fmt.Sprintf("%s%d", tt.content[:len(tt.content)-1], i)
				if _, err := c.Reply(bg, "w", content, false); err != nil {
					t.Fatalf("reply %d: %v", i, err)
				}
				stored = append(stored, content)
			}
			for _, final := range []bool{false, true} {
				_, err := c.Reply(bg, "w", tt.content, final)
				if CodeOf(err) != CodeMailboxFull || !strings.Contains(err.Error(), "the primary's mailbox is full") {
					t.Fatalf("reply (final %v) into a full mailbox: err = %v, want mailbox_full naming the primary's mailbox", final, err)
				}
			}
			if _, err := c.Ask(bg, "w", "may I?", minute); CodeOf(err) != CodeMailboxFull {
				t.Fatalf("question into a full mailbox: err = %v, want mailbox_full", err)
			}
			msgs, _ := c.Poll(bg, "primary", false, 0)
			if diff := cmp.Diff(stored, contents(msgs)); diff != "" {
				t.Fatalf("mailbox after refusals (-want +got):\n%s", diff)
			}
			if tt.fits == 0 {
				return
			}
			if n, err := c.Ack("primary", []string{msgs[0].ID}); n != 1 || err != nil {
				t.Fatalf("Ack = %d, %v", n, err)
			}
			if _, err := c.Reply(bg, "w", tt.content, false); err != nil {
				t.Fatalf("reply after an ack made room: %v", err)
			}
		})
	}
}

// A final reply refused for a full mailbox leaves its turn open: the worker's
// answer is not lost, it can be given again once there is room.
func TestMailbox_RefusedFinalReplyKeepsTheTurnOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, &Options{MaxMailboxMessages: 1})
		c.ObserveStatus("w", StatusIdle, 1)
		res, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "do X"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c.ObserveStatus("w", StatusWorking, 2)
		if _, err := c.Reply(bg, "w", "halfway", false); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reply(bg, "w", "done", true); CodeOf(err) != CodeMailboxFull {
			t.Fatalf("final reply into a full mailbox: err = %v, want mailbox_full", err)
		}
		if s := c.Status("w"); len(s.OpenTurns) != 1 || s.OpenTurns[0].ID != res.TurnID || s.CurrentTurn != res.TurnID {
			t.Fatalf("after a refused final reply: %+v; want turn %s still open and current", s, res.TurnID)
		}
		msgs, _ := c.Poll(bg, "primary", false, 0)
		c.Ack("primary", []string{msgs[0].ID})
		rr, err := c.Reply(bg, "w", "done", true)
		if err != nil || rr.TurnID != res.TurnID {
			t.Fatalf("final reply once there is room = %+v, %v", rr, err)
		}
	})
}

// The notices the core writes when a turn ends are never refused: a turn
// does not end unreported because a worker filled the mailbox first.
func TestMailbox_TurnEndNoticesAreKeptOverTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{MaxMailboxMessages: 1})
		c.ObserveStatus("w", StatusIdle, 1)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "do X"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := c.Reply(bg, "w", "halfway", false); err != nil {
			t.Fatal(err)
		}
		c.WorkerGone("w", "pane closed")
		msgs, _ := c.Poll(bg, "primary", false, 0)
		if len(msgs) != 2 || msgs[1].Kind != KindWorkerGone {
			t.Fatalf("mailbox = %+v; want the progress note and the worker_gone notice", msgs)
		}
	})
}

// Pages are bounded by count and bytes, always carry one message, and a
// cursor returns each message once; without one the oldest come again.
func TestPollPage_PagesByCountAndBytesWithACursor(t *testing.T) {
	c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{MaxPollBytes: 10})
	for _, s := range []string{"aaaa", "bbbb", "cccc", "dddddddddddd", "ee"} {
		if _, err := c.Reply(bg, "w", s, false); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Contents []string
		More     int
	}
	var got []page
	cursor := ""
	for range 10 {
		p, err := c.PollPage(bg, "primary", PollRequest{Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Messages) == 0 {
			if p.Next != cursor {
				t.Errorf("empty page moved the cursor %q → %q", cursor, p.Next)
			}
			break
		}
		got = append(got, page{contents(p.Messages), p.More})
		cursor = p.Next
	}
	want := []page{
		{[]string{"aaaa", "bbbb"}, 3}, // a third would be 12 bytes > 10
		{[]string{"cccc"}, 2},         // cccc+dddd… is over
		{[]string{"dddddddddddd"}, 1}, // over the bound alone: still returned
		{[]string{"ee"}, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
	first, _ := c.PollPage(bg, "primary", PollRequest{Limit: 1})
	if diff := cmp.Diff([]string{"aaaa"}, contents(first.Messages)); diff != "" || first.More != 4 {
		t.Fatalf("poll without a cursor (-want +got):\n%s more=%d", diff, first.More)
	}
	// Acknowledging behind the cursor does not move what follows it.
	c.Ack("primary", []string{first.Messages[0].ID})
	next, _ := c.PollPage(bg, "primary", PollRequest{Cursor: first.Next, Limit: 1})
	if diff := cmp.Diff([]string{"bbbb"}, contents(next.Messages)); diff != "" {
		t.Fatalf("page after an ack (-want +got):\n%s", diff)
	}
	if _, err := c.PollPage(bg, "primary", PollRequest{Cursor: "bogus"}); CodeOf(err) != CodeInvalid {
		t.Fatalf("bad cursor: err = %v, want invalid_argument", err)
	}
}

// A cursor stays valid across a restart and a compaction: it names a place
// in the mailbox, not an index.
func TestPollPage_CursorSurvivesRestartAndCompaction(t *testing.T) {
	dir := t.TempDir()
	c1 := newCore(t, dir, &fakeHerdr{}, &Options{CompactBytes: 1})
	for _, s := range []string{"one", "two", "three"} {
		if _, err := c1.Reply(bg, "w", s, false); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := c1.PollPage(bg, "primary", PollRequest{Limit: 2})
	c1.Ack("primary", []string{p.Messages[0].ID})
	crash(c1)
	c2 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")})
	if _, err := c2.Reply(bg, "w", "four", false); err != nil {
		t.Fatal(err)
	}
	rest, err := c2.PollPage(bg, "primary", PollRequest{Cursor: p.Next})
	if diff := cmp.Diff([]string{"three", "four"}, contents(rest.Messages)); diff != "" || err != nil {
		t.Fatalf("page after restart (-want +got):\n%s err=%v", diff, err)
	}
}

// A waiting poll with a cursor wakes for a message after it, not for the
// ones already returned.
func TestPollPage_WaitsForWhatFollowsTheCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, nil)
		c.Reply(bg, "w", "old", false)
		p, _ := c.PollPage(bg, "primary", PollRequest{})
		wait := call(func() (PollPage, error) {
			return c.PollPage(bg, "primary", PollRequest{Cursor: p.Next, Wait: true, Timeout: minute})
		})
		pending(t, wait)
		c.Reply(bg, "w", "new", false)
		got, err := got(t, wait)
		if diff := cmp.Diff([]string{"new"}, contents(got.Messages)); diff != "" || err != nil {
			t.Fatalf("waiting page (-want +got):\n%s err=%v", diff, err)
		}
	})
}

// Mail for a primary whose pane is known is also queued for typing into it;
// a pane that is never idle does not collect a copy of every message ever
// mailed: over the mailbox bound, mail is stored in the mailbox only.
func TestMailbox_PrimaryPaneQueueIsBounded(t *testing.T) {
	c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{MaxMailboxMessages: 2, PrimaryTarget: "p0"})
	var modes []ReplyMode
	for range 2 {
		for range 2 {
			rr, err := c.Reply(bg, "w", "note", false)
			if err != nil {
				t.Fatal(err)
			}
			modes = append(modes, rr.Mode)
		}
		msgs, _ := c.Poll(bg, "primary", false, 0)
		c.Ack("primary", []string{msgs[0].ID, msgs[1].ID})
	}
	if diff := cmp.Diff([]ReplyMode{ReplyInjected, ReplyInjected, ReplyQueued, ReplyQueued}, modes); diff != "" {
		t.Fatalf("reply modes (-want +got):\n%s", diff)
	}
	if d := c.Status("primary").QueueDepth; d != 2 {
		t.Fatalf("the primary's pane has %d messages queued; want the bound, 2", d)
	}
}
