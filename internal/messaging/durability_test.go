package messaging

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDurability_CrashAndReopen(t *testing.T) {
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testCrashAndReopen(t, torn) })
		})
	}
}

func testCrashAndReopen(t *testing.T, torn bool) {
	dir := t.TempDir()
	h1 := &fakeHerdr{}
	c1 := newCore(t, dir, h1, &Options{NewID: idsWithPrefix("a")})
	start := time.Now()

	// w is busy: two prompts wait in its queue.
	c1.ObserveStatus("w", StatusWorking, 5)
	a, _ := c1.Send(bg, SendRequest{From: "primary", To: "w", Content: "A"})
	c1.Send(bg, SendRequest{From: "primary", To: "w", Content: "B"})
	// u got its prompt and works on it; the primary holds a call with 1h.
	c1.ObserveStatus("u", StatusIdle, 1)
	ctxU, cancelU := context.WithCancel(bg)
	held := call(func() (SendResult, error) {
		return c1.Send(ctxU, SendRequest{From: "primary", To: "u", Content: "D", Wait: true, Timeout: time.Hour})
	})
	pending(t, held)
	c1.ObserveStatus("u", StatusWorking, 2)
	// x said two things nobody waited for; the primary acked one.
	c1.Reply(bg, "x", "kept", true)
	c1.Reply(bg, "x", "acked", true)
	msgs, _ := c1.Poll(bg, "primary", false, 0)
	if n, err := c1.Ack("primary", []string{msgs[1].ID}); n != 1 || err != nil {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	// v's prompt is being typed when fleetd dies.
	h1.mu.Lock()
	h1.hold = make(chan struct{})
	h1.mu.Unlock()
	c1.ObserveStatus("v", StatusIdle, 1)
	cv, _ := c1.Send(bg, SendRequest{From: "primary", To: "v", Content: "C"})
	synctest.Wait()
	if diff := cmp.Diff([]prompted{{"u", "D"}, {"v", "C"}}, h1.sent()); diff != "" {
		t.Fatalf("before the crash (-want +got):\n%s", diff)
	}
	uTurn := c1.Status("u").OpenTurns[0].ID

	crash(c1)
	cancelU()
	got(t, held)
	if torn {
		f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(`1234abcd {"op":"enq`)
		f.Close()
	}

	time.Sleep(time.Minute)
	h2 := &fakeHerdr{}
	c2 := newCore(t, dir, h2, &Options{NewID: idsWithPrefix("b")})

	if s := c2.Status("w"); s.QueueDepth != 2 || s.AgentStatus != StatusUnknown {
		t.Errorf("w after restart: %+v; want 2 queued, status unknown until observed", s)
	}
	wantU := []TurnStatus{{ID: uTurn, Caller: "primary", CreatedAt: start, Deadline: start.Add(time.Hour), Delivered: true}}
	if diff := cmp.Diff(wantU, c2.Status("u").OpenTurns); diff != "" {
		t.Errorf("u's open turns after restart (-want +got):\n%s", diff)
	}
	wantV := []Delivery{{MessageID: cv.DispatchID, TurnID: cv.TurnID, At: start.Add(time.Minute), Result: DeliveryUncertain,
		Reason: "fleetd stopped while the prompt was being delivered"}}
	if diff := cmp.Diff(wantV, c2.Status("v").Uncertain); diff != "" {
		t.Errorf("v's uncertain deliveries (-want +got):\n%s", diff)
	}
	mail, _ := c2.Poll(bg, "primary", false, 0)
	if diff := cmp.Diff([]string{"kept"}, contents(mail)); diff != "" {
		t.Errorf("primary mailbox after restart (-want +got):\n%s", diff)
	}

	// Nothing is typed twice; the queue resumes in order.
	c2.ObserveStatus("v", StatusIdle, 1)
	c2.ObserveStatus("u", StatusWorking, 2)
	c2.ObserveStatus("w", StatusIdle, 6)
	synctest.Wait()
	c2.ObserveStatus("w", StatusWorking, 7)
	c2.ObserveStatus("w", StatusIdle, 8)
	synctest.Wait()
	if diff := cmp.Diff([]prompted{{"w", "A"}, {"w", "B"}}, h2.sent()); diff != "" {
		t.Errorf("prompts after restart (-want +got):\n%s", diff)
	}

	// u's turn keeps its original deadline.
	aw := call(func() (SendResult, error) { return c2.Await(bg, "primary", uTurn) })
	time.Sleep(time.Until(start.Add(time.Hour)))
	if r, err := got(t, aw); err != nil || r.Outcome != OutcomeTimeout {
		t.Fatalf("Await = %+v, %v; want timeout at the original deadline", r, err)
	}
	if rr, err := c2.Reply(bg, "u", "D done", true); err != nil || rr.TurnID != uTurn || rr.Mode != ReplyQueued {
		t.Fatalf("u's late Reply = %+v, %v", rr, err)
	}
	// w's turn for A ended with turn_done (no reply), which the mailbox keeps.
	if _, err := c2.Await(bg, "primary", a.TurnID); CodeOf(err) != CodeNotFound {
		t.Fatalf("Await on an ended turn: %v; want not_found", err)
	}
	mail, _ = c2.Poll(bg, "primary", false, 0)
	var kinds []Kind
	for _, m := range mail {
		kinds = append(kinds, m.Kind)
	}
	if diff := cmp.Diff([]Kind{KindReply, KindTurnDone, KindReply}, kinds); diff != "" {
		t.Errorf("mailbox kinds (-want +got):\n%s", diff)
	}
}

func TestDurability_CompactionKeepsLiveStateAndBoundsTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		h := &fakeHerdr{}
		h.failNext(errors.New("connection reset")) // unclassified: uncertain
		const limit = 2048
		c1 := newCore(t, dir, h, &Options{NewID: idsWithPrefix("a"), CompactBytes: limit})

		c1.ObserveStatus("v", StatusIdle, 1)
		c1.Send(bg, SendRequest{From: "primary", To: "v", Content: "stalls"})
		c1.ObserveStatus("w", StatusWorking, 1)
		c1.Send(bg, SendRequest{From: "primary", To: "w", Content: "queued"})
		c1.Send(bg, SendRequest{From: "primary", To: "u", Content: "open", Timeout: 3 * time.Hour})
		c1.Reply(bg, "x", "unacked", true)
		synctest.Wait()
		// An ack may start a compaction, which writes in the background
		// while later commits append to the old file (and are carried into
		// the new one). Measured mid-rewrite, the journal is the old file
		// plus whatever was appended meanwhile, as much as the scheduler
		// allows; waiting for each rewrite to end makes the sizes, and so
		// the bound below, the same on every run. Acks during a rewrite
		// are TestCore_AcksDuringACompactionCompactAgain's.
		for i := range 300 {
			c1.Reply(bg, "y", fmt.Sprintf("chatter %d", i), false)
			all, _ := c1.Poll(bg, "primary", false, 0)
			c1.Ack("primary", []string{all[len(all)-1].ID})
			compacted(c1)
		}
		fi, err := os.Stat(filepath.Join(dir, JournalFile))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 2*limit+512 {
			t.Fatalf("journal is %d bytes after 300 retired messages; compaction should keep it near %d", fi.Size(), limit)
		}
		before := snapshotView(c1)
		crash(c1)

		c2 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")})
		if diff := cmp.Diff(before, snapshotView(c2), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("state after compaction and restart (-before +after):\n%s", diff)
		}
	})
}

// view is the durable part of the core's state as callers see it.
type view struct {
	Workers map[string]WorkerStatus
	Mail    []Message
}

func snapshotView(c *Core) view {
	v := view{Workers: map[string]WorkerStatus{}}
	for _, n := range []string{"u", "v", "w", "x", "y"} {
		s := c.Status(n)
		s.AgentStatus, s.StateChangeSeq, s.Delivering = "", 0, "" // observations are not durable
		v.Workers[n] = s
	}
	v.Mail, _ = c.Poll(bg, "primary", false, 0)
	return v
}

func TestDurability_TurnsEndAfterRestartDespiteNewNumbering(t *testing.T) {
	tests := []struct {
		name   string
		before string   // status observed after the delivery, before the crash ("" none)
		after  []string // statuses observed after the restart, numbered from 1
	}{
		{"finished while fleetd was down", StatusWorking, []string{StatusIdle}},
		{"still working, then finishes", StatusWorking, []string{StatusWorking, StatusDone}},
		{"picked up while fleetd was down, then finishes", "", []string{StatusWorking, StatusDone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				c1 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("a")})
				c1.ObserveStatus("w", StatusIdle, 40)
				sent, _ := c1.Send(bg, SendRequest{From: "primary", To: "w", Content: "job"})
				synctest.Wait()
				if tt.before != "" {
					c1.ObserveStatus("w", tt.before, 41)
				}
				crash(c1)

				h := &fakeHerdr{tails: map[string]string{"w": "job finished"}}
				c2 := newCore(t, dir, h, &Options{NewID: idsWithPrefix("b")})
				for i, st := range tt.after {
					if n := c2.Pending("primary"); n != 0 {
						t.Fatalf("mail before the turn ended: %d", n)
					}
					c2.ObserveStatus("w", st, uint64(i+1))
					synctest.Wait()
				}
				msgs, _ := c2.Poll(bg, "primary", false, 0)
				if len(msgs) != 1 || msgs[0].Kind != KindTurnDone || msgs[0].TurnID != sent.TurnID || msgs[0].Content != "job finished" {
					t.Fatalf("mailbox %+v; want turn_done for %s with the tail", msgs, sent.TurnID)
				}
				if n := len(h.sent()); n != 0 {
					t.Fatalf("%d prompts typed after the restart", n)
				}
			})
		})
	}
}
