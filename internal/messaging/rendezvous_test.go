package messaging

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFlow_DelegationResolvesOneHeldCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)

		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "do X", Wait: true})
		})
		pending(t, send)
		if diff := cmp.Diff([]prompted{{"w", "do X"}}, h.sent()); diff != "" {
			t.Fatalf("prompts (-want +got):\n%s", diff)
		}
		c.ObserveStatus("w", StatusWorking, 2)
		rr, err := c.Reply(bg, "w", "result", true)
		if err != nil || rr.Mode != ReplyResolved {
			t.Fatalf("Reply = %+v, %v; want mode resolved", rr, err)
		}
		res, err := got(t, send)
		want := SendResult{Outcome: OutcomeReply, Text: "result", TurnID: "t-1", Worker: "w"}
		if diff := cmp.Diff(want, res); diff != "" || err != nil {
			t.Fatalf("Send (-want +got):\n%s err=%v", diff, err)
		}
		if s := c.Status("w"); len(s.OpenTurns) != 0 || s.QueueDepth != 0 || s.Pending != 0 {
			t.Errorf("after the reply: %+v; want no open turn, empty queue", s)
		}
		if n := c.Pending("primary"); n != 0 {
			t.Errorf("primary mailbox holds %d messages; a resolved reply must not also be mailed", n)
		}
	})
}

func TestFlow_ClarificationGoesThroughTheRendezvous(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "deploy", Wait: true})
		})
		pending(t, send)
		c.ObserveStatus("w", StatusWorking, 2)

		ask := call(func() (AskResult, error) { return c.Ask(bg, "w", "which config?", 0) })
		q, err := got(t, send)
		if diff := cmp.Diff(SendResult{Outcome: OutcomeQuestion, Text: "which config?", TurnID: "t-1", Worker: "w"}, q); diff != "" || err != nil {
			t.Fatalf("first Send (-want +got):\n%s err=%v", diff, err)
		}
		pending(t, ask)

		answer := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "config.yaml", TurnID: q.TurnID, Wait: true})
		})
		a, err := got(t, ask)
		if diff := cmp.Diff(AskResult{Outcome: OutcomeAnswer, Answer: "config.yaml", TurnID: "t-1"}, a); diff != "" || err != nil {
			t.Fatalf("Ask (-want +got):\n%s err=%v", diff, err)
		}
		pending(t, answer)
		if n := len(h.sent()); n != 1 {
			t.Fatalf("%d prompts typed; the answer must never be typed into the pane", n)
		}
		if _, err := c.Reply(bg, "w", "deployed with config.yaml", true); err != nil {
			t.Fatal(err)
		}
		r, err := got(t, answer)
		if diff := cmp.Diff(SendResult{Outcome: OutcomeReply, Text: "deployed with config.yaml", TurnID: "t-1", Worker: "w"}, r); diff != "" || err != nil {
			t.Fatalf("second Send (-want +got):\n%s err=%v", diff, err)
		}
	})
}

func TestFlow_QuestionWithoutWaiterGoesToMailboxAndIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		// A worker asking outside any turn opens one addressed to the primary.
		ask := call(func() (AskResult, error) { return c.Ask(bg, "w", "may I delete tmp/?", minute) })
		pending(t, ask)
		msgs, err := c.Poll(bg, "primary", false, 0)
		if err != nil || len(msgs) != 1 || msgs[0].Kind != KindQuestion || msgs[0].Content != "may I delete tmp/?" {
			t.Fatalf("primary mailbox = %+v, %v; want the question", msgs, err)
		}
		res, err := c.Send(bg, SendRequest{From: "primary", Content: "yes", TurnID: msgs[0].TurnID})
		if err != nil || res.Outcome != OutcomeDispatched || res.DispatchID != "" {
			t.Fatalf("answer Send = %+v, %v; want dispatched with nothing queued", res, err)
		}
		a, err := got(t, ask)
		if err != nil || a.Answer != "yes" || a.TurnID != msgs[0].TurnID {
			t.Fatalf("Ask = %+v, %v", a, err)
		}
		if len(h.sent()) != 0 {
			t.Fatalf("prompts %v; the answer must not be typed", h.sent())
		}
	})
}

func TestFlow_AskTimeoutThenLateAnswerIsQueuedAsFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		ask := call(func() (AskResult, error) { return c.Ask(bg, "w", "which branch?", minute) })
		time.Sleep(minute)
		a, err := got(t, ask)
		if err != nil || a.Outcome != OutcomeTimeout {
			t.Fatalf("Ask = %+v, %v; want timeout", a, err)
		}
		res, err := c.Send(bg, SendRequest{From: "primary", Content: "main", TurnID: a.TurnID})
		if err != nil || res.DispatchID == "" {
			t.Fatalf("late answer = %+v, %v; want it queued", res, err)
		}
		c.ObserveStatus("w", StatusIdle, 4)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "main"}}, h.sent()); diff != "" {
			t.Fatalf("prompts (-want +got):\n%s", diff)
		}
	})
}

func TestFlow_DetachedReplyLandsInMailbox(t *testing.T) {
	tests := []struct {
		name          string
		primaryTarget string
		wantMode      ReplyMode
		wantTyped     []prompted
	}{
		{"mailbox only", "", ReplyQueued, []prompted{{"w", "do X"}}},
		{"primary pane known", "pane-P", ReplyInjected, []prompted{{"w", "do X"}, {"pane-P", "[fleetd] reply from w (turn t-1):\n> all done"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &fakeHerdr{}
				c := newCore(t, t.TempDir(), h, &Options{PrimaryTarget: tt.primaryTarget})
				c.ObserveStatus("w", StatusIdle, 1)
				c.ObserveStatus("primary", StatusWorking, 1)
				res, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "do X"})
				want := SendResult{Outcome: OutcomeDispatched, TurnID: "t-1", Worker: "w", DispatchID: "m-2"}
				if diff := cmp.Diff(want, res); diff != "" || err != nil {
					t.Fatalf("Send (-want +got):\n%s err=%v", diff, err)
				}
				synctest.Wait()
				c.ObserveStatus("w", StatusWorking, 2)
				rr, err := c.Reply(bg, "w", "all done", true)
				if err != nil || rr.Mode != tt.wantMode || rr.TurnID != "t-1" {
					t.Fatalf("Reply = %+v, %v; want mode %s", rr, err, tt.wantMode)
				}
				synctest.Wait()
				if n := len(h.sent()); n != 1 {
					t.Fatalf("%d prompts before the primary is idle; want 1", n)
				}
				c.ObserveStatus("primary", StatusIdle, 2)
				synctest.Wait()
				if diff := cmp.Diff(tt.wantTyped, h.sent()); diff != "" {
					t.Fatalf("prompts (-want +got):\n%s", diff)
				}
				msgs, err := c.Poll(bg, "primary", false, 0)
				wantMsgs := []Message{{From: "w", To: "primary", Kind: KindReply, Content: "all done", TurnID: "t-1", Seq: 1}}
				if diff := cmp.Diff(wantMsgs, msgs, cmpopts.IgnoreFields(Message{}, "ID", "CreatedAt")); diff != "" || err != nil {
					t.Fatalf("Poll (-want +got):\n%s err=%v", diff, err)
				}
			})
		})
	}
}

func TestFlow_UncooperativeWorkerYieldsTurnDoneWithTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{tails: map[string]string{"w": "I refactored the parser.\n> "}}
		c := newCore(t, t.TempDir(), h, &Options{TailLines: 40})
		c.ObserveStatus("w", StatusIdle, 1)
		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "refactor", Wait: true})
		})
		pending(t, send)
		c.ObserveStatus("w", StatusIdle, 1) // a repeated observation is not a turn
		pending(t, send)
		c.ObserveStatus("w", StatusWorking, 2)
		pending(t, send)
		c.ObserveStatus("w", StatusDone, 3)
		res, err := got(t, send)
		want := SendResult{Outcome: OutcomeTurnDone, Text: "I refactored the parser.\n> ", TurnID: "t-1", Worker: "w"}
		if diff := cmp.Diff(want, res); diff != "" || err != nil {
			t.Fatalf("Send (-want +got):\n%s err=%v", diff, err)
		}
		if diff := cmp.Diff([]string{"w/40"}, h.reads); diff != "" {
			t.Errorf("tail reads (-want +got):\n%s", diff)
		}
		if s := c.Status("w"); len(s.OpenTurns) != 0 {
			t.Errorf("turn still open after turn_done: %+v", s.OpenTurns)
		}
	})
}

func TestFlow_TimeoutKeepsTurnOpenAndReplyLandsInMailbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		start := time.Now()
		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "long job", Wait: true, Timeout: 5 * minute})
		})
		pending(t, send)
		c.ObserveStatus("w", StatusWorking, 2)
		time.Sleep(5*minute - time.Nanosecond)
		pending(t, send)
		time.Sleep(time.Nanosecond)
		res, err := got(t, send)
		if err != nil || res.Outcome != OutcomeTimeout || res.TurnID != "t-1" {
			t.Fatalf("Send = %+v, %v; want timeout for t-1", res, err)
		}
		s := c.Status("w")
		wantTurns := []TurnStatus{{ID: "t-1", Caller: "primary", CreatedAt: start, Deadline: start.Add(5 * minute), Delivered: true}}
		if diff := cmp.Diff(wantTurns, s.OpenTurns); diff != "" {
			t.Fatalf("open turns after timeout (-want +got):\n%s", diff)
		}
		rr, err := c.Reply(bg, "w", "finally", true)
		if err != nil || rr.Mode != ReplyQueued {
			t.Fatalf("Reply = %+v, %v; want queued", rr, err)
		}
		msgs, _ := c.Poll(bg, "primary", false, 0)
		if len(msgs) != 1 || msgs[0].Content != "finally" || msgs[0].TurnID != "t-1" || msgs[0].Kind != KindReply {
			t.Fatalf("mailbox = %+v; want the late reply for t-1", msgs)
		}
	})
}

func TestAwait_ReattachesUntilOriginalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, nil)
		start := time.Now()
		res, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "x", Timeout: 10 * minute})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * minute)
		aw := call(func() (SendResult, error) { return c.Await(bg, "primary", res.TurnID) })
		pending(t, aw)
		if _, err := c.Await(bg, "intruder", res.TurnID); CodeOf(err) != CodeNotFound {
			t.Errorf("Await by another caller: %v; want not_found", err)
		}
		time.Sleep(7 * minute)
		r, err := got(t, aw)
		if err != nil || r.Outcome != OutcomeTimeout || !time.Now().Equal(start.Add(10*minute)) {
			t.Fatalf("Await = %+v, %v at +%v; want timeout at +10m", r, err, time.Since(start))
		}
	})
}

func TestFlow_WorkerGoneFailsWaitersAndLaterSends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		send := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "a", Wait: true})
		})
		pending(t, send)
		detached, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "b"})
		if err != nil {
			t.Fatal(err)
		}
		c.ObserveStatus("w", StatusWorking, 2)
		ask := call(func() (AskResult, error) { return c.Ask(bg, "w", "?", 0) })
		if q, _ := got(t, send); q.Outcome != OutcomeQuestion {
			t.Fatalf("want the question first, got %+v", q)
		}
		resend := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "c", Wait: true})
		})
		pending(t, resend)

		c.WorkerGone("w", "member deleted")
		if _, err := got(t, ask); CodeOf(err) != CodeWorkerGone {
			t.Errorf("Ask: %v; want worker_gone", err)
		}
		if _, err := got(t, resend); CodeOf(err) != CodeWorkerGone {
			t.Errorf("waiting Send: %v; want worker_gone", err)
		}
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "d"}); CodeOf(err) != CodeWorkerGone {
			t.Errorf("Send to a gone worker: %v; want worker_gone", err)
		}
		s := c.Status("w")
		if !s.Gone || s.QueueDepth != 0 || len(s.OpenTurns) != 0 {
			t.Errorf("status after gone: %+v", s)
		}
		// Turns nobody waited on (the asked one, the detached one) leave a
		// notice; the turn whose caller was waiting got the error instead.
		msgs, _ := c.Poll(bg, "primary", false, 0)
		var notices []string
		for _, m := range msgs {
			if m.Kind == KindWorkerGone {
				notices = append(notices, m.TurnID)
			}
		}
		if diff := cmp.Diff([]string{"t-1", detached.TurnID}, notices); diff != "" {
			t.Errorf("worker_gone notices (-want +got):\n%s", diff)
		}
		// A restarted pane brings the worker back.
		c.ObserveStatus("w", StatusIdle, 1)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "e"}); err != nil {
			t.Errorf("Send after the worker came back: %v", err)
		}
	})
}

func TestCancelledSendReleasesItsWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{MaxWaitersPerCaller: 1})
		ctx, cancel := context.WithCancel(bg)
		send := call(func() (SendResult, error) {
			return c.Send(ctx, SendRequest{From: "primary", To: "w", Content: "a", Wait: true})
		})
		pending(t, send)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "b", Wait: true}); CodeOf(err) != CodeTooManyWaiters {
			t.Fatalf("second held Send: %v; want too_many_waiters", err)
		}
		cancel()
		if _, err := got(t, send); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Send: %v; want context.Canceled", err)
		}
		s := c.Status("w")
		if len(s.OpenTurns) != 1 || s.OpenTurns[0].Waiting {
			t.Fatalf("open turns %+v; want the turn open with nobody waiting", s.OpenTurns)
		}
		again := call(func() (SendResult, error) { return c.Await(bg, "primary", s.OpenTurns[0].ID) })
		pending(t, again) // the released slot is usable again
		c.ObserveStatus("w", StatusIdle, 1)
		synctest.Wait()
		c.Reply(bg, "w", "ok", true)
		if r, err := got(t, again); err != nil || r.Outcome != OutcomeReply {
			t.Fatalf("Await = %+v, %v", r, err)
		}
	})
}

func TestPollAck_AtLeastOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, nil)
		if msgs, err := c.Poll(bg, "primary", false, 0); err != nil || msgs == nil || len(msgs) != 0 {
			t.Fatalf("empty Poll = %#v, %v; want an empty non-nil list", msgs, err)
		}
		poll := call(func() ([]Message, error) { return c.Poll(bg, "primary", true, minute) })
		pending(t, poll)
		c.Reply(bg, "w1", "one", true)
		first, err := got(t, poll)
		if err != nil || len(first) != 1 || first[0].Content != "one" {
			t.Fatalf("waiting Poll = %+v, %v", first, err)
		}
		c.Reply(bg, "w2", "two", false)
		again, _ := c.Poll(bg, "primary", false, 0)
		if diff := cmp.Diff([]string{"one", "two"}, contents(again)); diff != "" {
			t.Fatalf("unacked messages must be returned again (-want +got):\n%s", diff)
		}
		if again[1].Kind != KindProgress {
			t.Errorf("non-final reply kind %q, want progress", again[1].Kind)
		}
		if n, err := c.Ack("primary", []string{first[0].ID, "m-unknown"}); n != 1 || err != nil {
			t.Fatalf("Ack = %d, %v; want 1", n, err)
		}
		if n, _ := c.Ack("primary", []string{first[0].ID}); n != 0 {
			t.Fatalf("second Ack of the same id retired %d", n)
		}
		if n, _ := c.Ack("w1", []string{again[1].ID}); n != 0 {
			t.Fatalf("Ack by another recipient retired %d", n)
		}
		left, _ := c.Poll(bg, "primary", false, 0)
		if diff := cmp.Diff([]string{"two"}, contents(left)); diff != "" {
			t.Fatalf("after ack (-want +got):\n%s", diff)
		}
		c.Ack("primary", []string{left[0].ID})
		timeout := call(func() ([]Message, error) { return c.Poll(bg, "primary", true, minute) })
		time.Sleep(minute)
		if msgs, err := got(t, timeout); err != nil || len(msgs) != 0 {
			t.Fatalf("Poll timeout = %+v, %v; want empty", msgs, err)
		}
	})
}

func contents(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return out
}

func TestLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{MaxContentBytes: 8, MaxWaitersPerCaller: 1})
		tests := []struct {
			name string
			err  error
			want Code
		}{
			{"send too large", second(c.Send(bg, SendRequest{From: "primary", To: "w", Content: "123456789"})), CodeTooLarge},
			{"reply too large", second(c.Reply(bg, "w", "123456789", true)), CodeTooLarge},
			{"ask too large", second(c.Ask(bg, "w", "123456789", 0)), CodeTooLarge},
			{"empty content", second(c.Send(bg, SendRequest{From: "primary", To: "w"})), CodeInvalid},
			{"no worker", second(c.Send(bg, SendRequest{From: "primary", Content: "x"})), CodeInvalid},
			{"unknown turn", second(c.Send(bg, SendRequest{From: "primary", Content: "x", TurnID: "t-404"})), CodeNotFound},
		}
		for _, tt := range tests {
			if got := CodeOf(tt.err); got != tt.want {
				t.Errorf("%s: code %q (%v), want %q", tt.name, got, tt.err, tt.want)
			}
		}
		poll := call(func() ([]Message, error) { return c.Poll(bg, "w", true, minute) })
		pending(t, poll)
		if _, err := c.Ask(bg, "w", "?", minute); CodeOf(err) != CodeTooManyWaiters {
			t.Errorf("second waiting call of one caller: %v; want too_many_waiters", err)
		}
		time.Sleep(minute)
		got(t, poll)
	})
}

func second[T any](_ T, err error) error { return err }

func TestFlow_FollowUpDuringTailReadKeepsTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{tails: map[string]string{"w": "tail"}, tailHold: make(chan struct{})}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		first, _ := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "one"})
		synctest.Wait()
		c.ObserveStatus("w", StatusWorking, 2)
		c.ObserveStatus("w", StatusIdle, 3) // turn over, no reply: the tail is being read
		// The primary continues the turn before the tail arrives.
		follow := call(func() (SendResult, error) {
			return c.Send(bg, SendRequest{From: "primary", Content: "and also", TurnID: first.TurnID, Wait: true})
		})
		pending(t, follow)
		close(h.tailHold) // arrives too late to end the turn
		pending(t, follow)
		if diff := cmp.Diff([]prompted{{"w", "one"}, {"w", "and also"}}, h.sent()); diff != "" {
			t.Fatalf("prompts (-want +got):\n%s", diff)
		}
		c.ObserveStatus("w", StatusWorking, 4)
		c.Reply(bg, "w", "both done", true)
		if r, err := got(t, follow); err != nil || r.Outcome != OutcomeReply || r.TurnID != first.TurnID {
			t.Fatalf("follow-up Send = %+v, %v", r, err)
		}
		if n := c.Pending("primary"); n != 0 {
			t.Fatalf("%d mailbox messages; the abandoned turn_done must not be mailed", n)
		}
	})
}

func TestFlow_NextPromptWaitsUntilTheTailIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{tails: map[string]string{"w": "did one"}, tailHold: make(chan struct{})}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "one"})
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "two"})
		synctest.Wait()
		c.ObserveStatus("w", StatusWorking, 2)
		c.ObserveStatus("w", StatusIdle, 3)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "one"}}, h.sent()); diff != "" {
			t.Fatalf("before the tail is read (-want +got):\n%s", diff)
		}
		close(h.tailHold)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "one"}, {"w", "two"}}, h.sent()); diff != "" {
			t.Fatalf("after the tail is read (-want +got):\n%s", diff)
		}
		msgs, _ := c.Poll(bg, "primary", false, 0)
		if len(msgs) != 1 || msgs[0].Kind != KindTurnDone || msgs[0].Content != "did one" || msgs[0].TurnID != "t-1" {
			t.Fatalf("mailbox %+v; want the detached turn's turn_done with its tail", msgs)
		}
	})
}

func TestFlow_NewSendDuringTailReadWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{tails: map[string]string{"w": "did one"}, tailHold: make(chan struct{})}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "one"})
		synctest.Wait()
		c.ObserveStatus("w", StatusWorking, 2)
		c.ObserveStatus("w", StatusIdle, 3)
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "two"})
		synctest.Wait()
		if n := len(h.sent()); n != 1 {
			t.Fatalf("%d prompts while the tail is read; want 1", n)
		}
		close(h.tailHold)
		synctest.Wait()
		if n := len(h.sent()); n != 2 {
			t.Fatalf("%d prompts after the tail was read; want 2", n)
		}
	})
}
