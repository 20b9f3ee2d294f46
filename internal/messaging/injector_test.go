package messaging

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestInjector_TwoMessagesToBusyWorkerOnePerTurnInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusWorking, 5)
		for _, s := range []string{"first", "second"} {
			if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: s}); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			status string
			seq    uint64
			want   []prompted
		}{
			{StatusWorking, 5, nil},
			{StatusIdle, 6, []prompted{{"w", "first"}}},
			{StatusIdle, 6, []prompted{{"w", "first"}}}, // no pickup yet: the second waits
			{StatusWorking, 7, []prompted{{"w", "first"}}},
			{StatusDone, 8, []prompted{{"w", "first"}, {"w", "second"}}},
			{StatusDone, 8, []prompted{{"w", "first"}, {"w", "second"}}},
		}
		for i, st := range steps {
			c.ObserveStatus("w", st.status, st.seq)
			synctest.Wait()
			if diff := cmp.Diff(st.want, h.sent()); diff != "" {
				t.Fatalf("step %d (%s, seq %d): prompts (-want +got):\n%s", i, st.status, st.seq, diff)
			}
		}
		if d := c.Status("w").QueueDepth; d != 0 {
			t.Errorf("queue depth %d after both deliveries", d)
		}
	})
}

func TestInjector_NothingTypedWhileBlockedOrUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "go"}); err != nil {
			t.Fatal(err)
		}
		for _, st := range []string{StatusUnknown, StatusBlocked, StatusWorking, StatusBlocked} {
			c.ObserveStatus("w", st, 3)
			time.Sleep(time.Hour)
			synctest.Wait()
			if n := len(h.sent()); n != 0 {
				t.Fatalf("typed %d prompts while %s", n, st)
			}
		}
		if d := c.Status("w").QueueDepth; d != 1 {
			t.Fatalf("queue depth %d, want 1", d)
		}
		c.ObserveStatus("w", StatusIdle, 4)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "go"}}, h.sent()); diff != "" {
			t.Fatalf("prompts (-want +got):\n%s", diff)
		}
	})
}

func TestInjector_HerdrRefusalKeepsMessageQueuedForNextObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		h.failNext(&PromptError{Verdict: NotSent, Status: StatusBlocked, Err: errors.New("agent waits at a dialog")})
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "go"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s := c.Status("w")
		if s.QueueDepth != 1 || s.AgentStatus != StatusBlocked || len(s.Uncertain) != 0 {
			t.Fatalf("after agent_blocked: %+v; want the message still queued and the worker blocked", s)
		}
		time.Sleep(time.Hour) // no retry loop: only a new observation retries
		synctest.Wait()
		if n := len(h.sent()); n != 1 {
			t.Fatalf("%d prompt attempts without a new observation", n)
		}
		c.ObserveStatus("w", StatusIdle, 2)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "go"}, {"w", "go"}}, h.sent()); diff != "" {
			t.Fatalf("attempts (-want +got):\n%s", diff)
		}
		if s := c.Status("w"); s.QueueDepth != 0 || s.LastDelivery == nil || s.LastDelivery.Result != DeliveryDelivered {
			t.Fatalf("after the retry: %+v", s)
		}
	})
}

// A prompt herdr refused without a status (it did not answer for a moment)
// is retried after a short backoff, not at the next status change: an idle
// worker's next observation may be a whole resync away.
func TestInjector_PromptHerdrDidNotTakeIsRetriedPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		down := &PromptError{Verdict: NotSent, Err: errors.New("herdr unavailable: connection refused")}
		h.failNext(down)
		h.failNext(down)
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		start := time.Now()
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "go"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for len(h.sent()) < 3 {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if time.Since(start) > time.Minute {
				t.Fatalf("%d attempts within a minute, no new observation; want the third to succeed within a second", len(h.sent()))
			}
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("delivered %s after two refusals; want the retries within a second (250 ms, then 500 ms)", took)
		}
		if s := c.Status("w"); s.QueueDepth != 0 || s.LastDelivery == nil || s.LastDelivery.Result != DeliveryDelivered {
			t.Fatalf("after the retries: %+v", s)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(h.sent()); n != 3 {
			t.Errorf("%d prompt attempts; want 3 (no retry after the delivery)", n)
		}
	})
}

func TestInjector_StalledPromptIsUncertainAndNeverResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		h.failNext(&PromptError{Verdict: Uncertain, Err: errors.New("no state change")})
		c := newCore(t, t.TempDir(), h, &Options{PickupGrace: 10 * time.Second})
		c.ObserveStatus("w", StatusIdle, 1)
		first, _ := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "one"})
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "two"})
		synctest.Wait()
		s := c.Status("w")
		if len(s.Uncertain) != 1 || s.Uncertain[0].MessageID != first.DispatchID || s.Uncertain[0].Result != DeliveryUncertain {
			t.Fatalf("uncertain = %+v; want the first message", s.Uncertain)
		}
		time.Sleep(10*time.Second - time.Nanosecond)
		c.ObserveStatus("w", StatusIdle, 1)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "one"}}, h.sent()); diff != "" {
			t.Fatalf("within the grace (-want +got):\n%s", diff)
		}
		time.Sleep(time.Nanosecond) // grace over: the next message, never the uncertain one
		synctest.Wait()
		c.ObserveStatus("w", StatusIdle, 1)
		time.Sleep(time.Hour)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "one"}, {"w", "two"}}, h.sent()); diff != "" {
			t.Fatalf("after the grace (-want +got):\n%s", diff)
		}
		if got := c.Status("w").Uncertain; len(got) != 1 {
			t.Fatalf("uncertain = %+v; the note stays until its turn ends", got)
		}
	})
}

func TestInjector_ReplyOnUncertainTurnClearsTheNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		h.failNext(context.DeadlineExceeded)
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "one"})
		synctest.Wait()
		if got := c.Status("w").Uncertain; len(got) != 1 {
			t.Fatalf("uncertain = %+v; want one note", got)
		}
		c.ObserveStatus("w", StatusWorking, 2)
		if rr, err := c.Reply(bg, "w", "done", true); err != nil || rr.TurnID != "t-1" {
			t.Fatalf("Reply = %+v, %v", rr, err)
		}
		if got := c.Status("w").Uncertain; len(got) != 0 {
			t.Fatalf("uncertain = %+v after the turn's reply", got)
		}
	})
}

func TestInjector_PermanentRefusalFailsTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		h.failNext(&PromptError{Verdict: Failed, Err: errors.New("no agent w")})
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		_, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "go", Wait: true})
		if CodeOf(err) != CodeDeliveryFailed {
			t.Fatalf("Send: %v; want delivery_failed", err)
		}
		if s := c.Status("w"); len(s.OpenTurns) != 0 || s.LastDelivery.Result != DeliveryFailed {
			t.Fatalf("status %+v", s)
		}
	})
}

func TestDefaultClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Verdict
	}{
		{"success", nil, Delivered},
		{"refused, nothing typed", &PromptError{Verdict: NotSent, Err: errors.New("agent not ready")}, NotSent},
		{"refused for good", &PromptError{Verdict: Failed, Err: errors.New("no such agent")}, Failed},
		{"outcome unknown", &PromptError{Verdict: Uncertain, Err: errors.New("stalled")}, Uncertain},
		{"wrapped", fmt.Errorf("prompt w: %w", &PromptError{Verdict: NotSent, Err: errors.New("herdr down")}), NotSent},
		{"context cut", fmt.Errorf("prompt: %w", context.Canceled), Uncertain},
		{"anything else", errors.New("boom"), Uncertain},
	}
	for _, tt := range tests {
		if got := DefaultClassify(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A worker's agent relaunched (herdr restarted with session restore): the
// turn whose prompt the old agent was given ends with turn_done saying why
// — the held call returns, or with nobody waiting the caller's mailbox gets
// the notice — the prompt is never typed again, and the message still
// queued (waiting for a's pickup, which the old agent can no longer show)
// goes to the new agent.
func TestAgentRelaunchedEndsDeliveredTurnsKeepsQueued(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &fakeHerdr{}
				c := newCore(t, t.TempDir(), h, nil)
				c.ObserveStatus("w", StatusIdle, 1)
				first := call(func() (SendResult, error) {
					return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "a", Wait: wait})
				})
				if wait {
					pending(t, first)
				} else if r, err := got(t, first); err != nil || r.Outcome != OutcomeDispatched {
					t.Fatalf("detached Send = %+v, %v", r, err)
				}
				synctest.Wait()
				if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "b"}); err != nil {
					t.Fatal(err)
				}
				if s := c.Status("w"); len(s.OpenTurns) != 2 || s.QueueDepth != 1 {
					t.Fatalf("before the relaunch: %+v", s)
				}

				c.AgentRelaunched("w", "herdr restarted with session restore")
				synctest.Wait()
				var text string
				if wait {
					r, err := got(t, first)
					if err != nil || r.Outcome != OutcomeTurnDone {
						t.Fatalf("held Send after the relaunch = %+v, %v; want turn_done", r, err)
					}
					text = r.Text
				} else {
					msgs, _ := c.Poll(bg, "primary", false, 0)
					if len(msgs) != 1 || msgs[0].Kind != KindTurnDone {
						t.Fatalf("mailbox after the relaunch = %+v; want one turn_done notice", msgs)
					}
					text = msgs[0].Content
				}
				if !strings.Contains(text, "herdr restarted with session restore") || !strings.Contains(text, "not typed again") {
					t.Errorf("the turn's end says %q; want the reason and that the prompt is not typed again", text)
				}
				// The new agent was observed idle already (a fleetd that adopts
				// the pane learns of the relaunch after its statuses): b goes
				// to it, a is never typed again.
				if diff := cmp.Diff([]prompted{{"w", "a"}, {"w", "b"}}, h.sent()); diff != "" {
					t.Errorf("typed after the relaunch (-want +got):\n%s", diff)
				}
				s := c.Status("w")
				if len(s.OpenTurns) != 1 || !s.OpenTurns[0].Delivered || s.QueueDepth != 0 {
					t.Errorf("after the relaunch: %+v; want b's turn open and delivered", s)
				}
			})
		})
	}
}

// A prompt herdr refused untyped (agent_blocked) is still queued when the
// agent is relaunched: its turn stays open and the new agent gets it.
func TestAgentRelaunchedKeepsARefusedPromptQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		c.ObserveStatus("w", StatusIdle, 1)
		h.failNext(&PromptError{Verdict: NotSent, Status: StatusBlocked, Err: errors.New("agent_blocked")})
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "x"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c.AgentRelaunched("w", "herdr restarted with session restore")
		synctest.Wait()
		if s := c.Status("w"); len(s.OpenTurns) != 1 || s.QueueDepth != 1 {
			t.Fatalf("after the relaunch: %+v; want x's turn open and x queued", s)
		}
		c.ObserveStatus("w", StatusIdle, 2)
		synctest.Wait()
		if diff := cmp.Diff([]prompted{{"w", "x"}, {"w", "x"}}, h.sent()); diff != "" {
			t.Errorf("prompts (-want +got):\n%s", diff)
		}
	})
}

// A worker keeps its extra state (gone reason, hold, uncertain notes, a
// pending retry) only while one of them is set: a thousand quiet members
// keep 112 bytes each, not 192. Each of them, once over, leaves it empty
// again, and what the worker reports is as before.
func TestInjector_WorkerKeepsExtraStateOnlyWhileNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, nil)
		extra := func(step string, want bool) {
			t.Helper()
			synctest.Wait()
			c.mu.Lock()
			defer c.mu.Unlock()
			if got := c.workers.Get("w").extra != nil; got != want {
				t.Fatalf("%s: extra state kept = %v, want %v", step, got, want)
			}
		}
		c.ObserveStatus("w", StatusIdle, 1)
		extra("observed idle", false)

		c.WorkerGone("w", "pane closed")
		if s := c.Status("w"); !s.Gone || s.GoneReason != "pane closed" {
			t.Fatalf("gone worker's status %+v, want gone with the reason", s)
		}
		c.ObserveStatus("w", StatusIdle, 1)
		if s := c.Status("w"); s.Gone || s.GoneReason != "" {
			t.Fatalf("status %+v after the worker came back, want no gone reason", s)
		}
		extra("back after gone", false)

		release, _, busy := c.Hold("w", "replacing")
		if busy {
			t.Fatal("Hold on an idle worker found it busy")
		}
		extra("held", true)
		release()
		extra("released", false)

		down := &PromptError{Verdict: NotSent, Err: errors.New("herdr unavailable")}
		h.failNext(down)
		if _, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "retried"}); err != nil {
			t.Fatal(err)
		}
		extra("a retry pending", true)
		time.Sleep(time.Second)
		extra("delivered on the retry", false)
		c.ObserveStatus("w", StatusWorking, 2)
		if _, err := c.Reply(bg, "w", "done", true); err != nil {
			t.Fatal(err)
		}
		c.ObserveStatus("w", StatusIdle, 3)

		h.failNext(context.DeadlineExceeded)
		c.Send(bg, SendRequest{From: "primary", To: "w", Content: "uncertain"})
		extra("an uncertain delivery", true)
		c.ObserveStatus("w", StatusWorking, 4)
		if _, err := c.Reply(bg, "w", "done", true); err != nil {
			t.Fatal(err)
		}
		extra("its turn replied", false)
	})
}
