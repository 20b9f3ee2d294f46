package messaging

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A request with the caller's own id is taken once: made again (a relay
// that crashed before it could record that the core took it), while its
// turn is open, after the turn ended, and after a restart and a
// compaction of the journal, it returns the same turn and types nothing
// more.
func TestRequestID_ReplayedRequestQueuesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		h := &fakeHerdr{}
		c := newCore(t, dir, h, &Options{NewID: idsWithPrefix("a")})
		deadline := time.Now().Add(time.Hour)
		req := SendRequest{From: "primary", To: "w", Content: "task", ID: "t-chosen", Deadline: deadline}
		first, err := c.Send(bg, req)
		if err != nil || first.TurnID != "t-chosen" || first.Outcome != OutcomeDispatched {
			t.Fatalf("Send = %+v, %v; want turn t-chosen dispatched", first, err)
		}
		again, err := c.Send(bg, req)
		if err != nil || again.TurnID != "t-chosen" || again.DispatchID != "" {
			t.Fatalf("Send again = %+v, %v; want turn t-chosen, nothing queued", again, err)
		}
		if s := c.Status("w"); s.QueueDepth != 1 || len(s.OpenTurns) != 1 || !s.OpenTurns[0].Deadline.Equal(deadline) {
			t.Fatalf("after the replay: queue %d, turns %+v; want one prompt and one turn with the given deadline", s.QueueDepth, s.OpenTurns)
		}
		c.ObserveStatus("w", StatusIdle, 1)
		synctest.Wait()
		c.ObserveStatus("w", StatusWorking, 2)
		if _, err := c.Reply(bg, "w", "done", true); err != nil {
			t.Fatal(err)
		}
		// The turn ended; the same request still changes nothing, and a
		// continuation with an id is taken once too.
		if res, err := c.Send(bg, req); err != nil || res.TurnID != "t-chosen" {
			t.Fatalf("Send after the turn ended = %+v, %v", res, err)
		}
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "second", ID: "t-second"}); err != nil {
			t.Fatal(err)
		}
		follow := SendRequest{From: "primary", TurnID: "t-second", Content: "more", ID: "r-follow"}
		for range 2 {
			if _, err := c.Send(bg, follow); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "task", ID: "t-chosen", Wait: true}); CodeOf(err) != CodeNotFound {
			t.Errorf("waiting on a taken request whose turn ended: %v, want not_found", err)
		}
		crash(c)

		for _, compact := range []bool{false, true} {
			o := &Options{NewID: idsWithPrefix("b")}
			if compact {
				o.CompactBytes = 1 // every commit compacts
			}
			r := newCore(t, dir, h, o)
			for _, q := range []SendRequest{req, {From: "primary", To: "w", Content: "second", ID: "t-second"}, follow} {
				if res, err := r.Send(bg, q); err != nil || res.DispatchID != "" {
					t.Fatalf("compact=%v: %+v replayed after a restart = %+v, %v; want nothing queued", compact, q, res, err)
				}
			}
			if _, err := r.Send(bg, SendRequest{From: "primary", To: "w", Content: "fresh", ID: "t-fresh"}); err != nil {
				t.Fatal(err)
			}
			compacted(r)
			if s := r.Status("w"); s.QueueDepth != 3 {
				t.Fatalf("compact=%v: queue %d after the restart, want second, more and fresh", compact, s.QueueDepth)
			}
			crash(r)
		}
		if diff := cmp.Diff([]prompted{{"w", "task"}}, h.sent()); diff != "" {
			t.Errorf("typed (-want +got):\n%s", diff)
		}
	})
}

// Request ids are bounded and plain.
func TestRequestID_Refused(t *testing.T) {
	c := newCore(t, t.TempDir(), &fakeHerdr{}, nil)
	for _, id := range []string{"a/b", "with space", string(make([]byte, MaxRequestIDBytes+1))} {
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "x", ID: id}); CodeOf(err) != CodeInvalid {
			t.Errorf("id %q: %v, want invalid_argument", id, err)
		}
	}
}
