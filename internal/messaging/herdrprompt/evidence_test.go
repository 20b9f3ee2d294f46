package herdrprompt_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
)

// fakeClient is a herdr client in memory: agent.prompt answers with
// promptAnswer (or fails with promptErr after recording the text), agent.get
// with agent, agent.read with screen.
type fakeClient struct {
	mu           sync.Mutex
	promptAnswer herdr.AgentInfo
	promptErr    error
	agent        herdr.AgentInfo
	screen       string
	prompts      []string
	gets         int
	reads        []herdr.AgentReadParams
}

func (f *fakeClient) PromptAgent(_ context.Context, p herdr.AgentPromptParams) (*herdr.AgentInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prompts = append(f.prompts, p.Text)
	if f.promptErr != nil {
		return nil, f.promptErr
	}
	a := f.promptAnswer
	return &a, nil
}

func (f *fakeClient) GetAgent(context.Context, string) (*herdr.AgentInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	a := f.agent
	return &a, nil
}

func (f *fakeClient) ReadAgent(_ context.Context, p herdr.AgentReadParams) (*herdr.PaneReadResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, p)
	return &herdr.PaneReadResult{Source: p.Source, Format: herdr.FormatText, Text: f.screen}, nil
}

func (f *fakeClient) counts() (prompts, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.prompts), f.gets
}

func seqp(n uint64) *uint64 { return &n }

// A turn whose working phase fleetd never saw (the status events were lost;
// the next read shows the agent idle again) ends with turn_done once herdr's
// completion_seq is past the one agent.prompt answered with. Where it is not
// past, or herdr reports none (protocol 20), the turn stays open; a turn
// whose start was seen ends by the working → idle rule, with no extra call.
func TestFeed_TurnEndsOnCompletionEvidence(t *testing.T) {
	tests := []struct {
		name        string
		atDelivery  *uint64 // agent.prompt's completion_seq
		now         *uint64 // agent.get's
		seenWorking bool    // a working status is observed after the delivery
		want        messaging.Outcome
		wantGets    int
	}{
		{"completion advanced unseen", seqp(4), seqp(5), false, messaging.OutcomeTurnDone, 1},
		{"no completion yet", seqp(4), seqp(4), false, messaging.OutcomeTimeout, 1},
		{"protocol 20: no completion_seq", nil, nil, false, messaging.OutcomeTimeout, 0},
		{"working seen: the status rule", seqp(4), seqp(5), true, messaging.OutcomeTurnDone, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := &fakeClient{
					promptAnswer: herdr.AgentInfo{PaneID: "w1:p1", Name: "w", AgentStatus: herdr.StatusIdle, CompletionSeq: tt.atDelivery},
					agent:        herdr.AgentInfo{PaneID: "w1:p1", Name: "w", AgentStatus: herdr.StatusIdle, CompletionSeq: tt.now},
					screen:       "> fix the bug\nfixed it, no reply though\n\n\n",
				}
				p := herdrprompt.New(fc)
				defer p.Close()
				core, err := messaging.New(t.TempDir(), p, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer core.Close()
				feed := p.Feed(core.ObserveStatus)
				feed("w", "idle", 1)

				res := make(chan messaging.SendResult, 1)
				go func() {
					r, err := core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w",
						Content: "fix the bug", Wait: true, Timeout: time.Minute})
					if err != nil {
						t.Error(err)
					}
					res <- r
				}()
				synctest.Wait()
				if n, _ := fc.counts(); n != 1 {
					t.Fatalf("%d prompts typed, want 1", n)
				}
				if tt.seenWorking {
					feed("w", "working", 2)
					feed("w", "idle", 3)
				} else {
					feed("w", "idle", 1) // the read after events_lost: idle, as before
				}
				synctest.Wait()
				var got messaging.SendResult
				select {
				case got = <-res:
				default:
					time.Sleep(time.Minute) // the turn's timeout, in the bubble's time
					got = <-res
				}
				if got.Outcome != tt.want {
					t.Errorf("outcome %q, want %q (%+v)", got.Outcome, tt.want, got)
				}
				if tt.want == messaging.OutcomeTurnDone && !strings.Contains(got.Text, "no reply though") {
					t.Errorf("turn_done text %q lacks the terminal tail", got.Text)
				}
				if _, gets := fc.counts(); gets != tt.wantGets {
					t.Errorf("%d agent.get calls, want %d", gets, tt.wantGets)
				}
			})
		})
	}
}

type seen struct {
	Name, Status string
	Seq          uint64
}

// The change the feed adds is numbered after what it passed on, and every
// later observation of that worker is numbered past it: the core's numbers
// never go back, and an unchanged re-read keeps its number.
func TestFeed_NumbersPastTheAddedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeClient{
			promptAnswer: herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seqp(7)},
			agent:        herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seqp(8)},
		}
		p := herdrprompt.New(fc)
		defer p.Close()
		var mu sync.Mutex
		var got []seen
		feed := p.Feed(func(name, status string, seq uint64) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{name, status, seq})
		})
		feed("w", "idle", 3)
		feed("other", "idle", 9)
		if err := p.Prompt(context.Background(), "w", "go"); err != nil {
			t.Fatal(err)
		}
		feed("w", "done", 3)
		synctest.Wait()
		feed("w", "done", 3)    // re-read
		feed("w", "working", 4) // the next turn
		feed("other", "working", 10)
		want := []seen{
			{"w", "idle", 3}, {"other", "idle", 9},
			{"w", "done", 3}, {"w", "working", 4}, {"w", "done", 5}, // the added change
			{"w", "done", 5}, {"w", "working", 6}, {"other", "working", 10},
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("observations passed on (-want +got):\n%s", diff)
		}
	})
}

// agent.prompt's failures after the text was typed (protocol 22: timeout,
// agent_prompt_failed) mark the delivery uncertain; the message is never
// typed again, however often the worker is seen idle afterwards.
func TestPrompter_FailureAfterTypingIsUncertainNeverResent(t *testing.T) {
	for _, code := range []string{"agent_prompt_failed", "timeout"} {
		t.Run(code, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := &fakeClient{promptErr: &herdr.Error{Method: "agent.prompt", Code: code, Message: "typed, then failed"}}
				p := herdrprompt.New(fc)
				defer p.Close()
				core, err := messaging.New(t.TempDir(), p, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer core.Close()
				feed := p.Feed(core.ObserveStatus)
				feed("w", "idle", 1)
				if _, err := core.Send(context.Background(), messaging.SendRequest{From: "primary", To: "w", Content: "hello"}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				for i := range 3 {
					time.Sleep(time.Minute) // past the pickup grace
					feed("w", "idle", 1)
					feed("w", "done", uint64(i+1))
					synctest.Wait()
				}
				if n, _ := fc.counts(); n != 1 {
					t.Errorf("the prompt was typed %d times, want once", n)
				}
				st := core.Status("w")
				if len(st.Uncertain) != 1 || st.Uncertain[0].Result != messaging.DeliveryUncertain || !strings.Contains(st.Uncertain[0].Reason, code) {
					t.Errorf("uncertain deliveries %+v, want the one message, uncertain, with herdr's %s", st.Uncertain, code)
				}
				if st.QueueDepth != 0 {
					t.Errorf("queue depth %d: the message waits to be typed again", st.QueueDepth)
				}
			})
		})
	}
}

// The tail is read from the visible screen (no read of more lines than the
// viewport, which scrolls an idle alternate-screen agent), keeping the last
// lines asked for and leaving out the blank bottom of the screen.
func TestPrompter_ReadTailHasNoSideEffects(t *testing.T) {
	fc := &fakeClient{screen: "one\ntwo\nthree\nfour\n\n\n"}
	p := herdrprompt.New(fc)
	defer p.Close()
	tail, err := p.ReadTail(context.Background(), "w", 2)
	if err != nil {
		t.Fatal(err)
	}
	if tail != "three\nfour" {
		t.Errorf("tail %q, want the last two lines", tail)
	}
	if len(fc.reads) != 1 {
		t.Fatalf("%d reads, want 1", len(fc.reads))
	}
	if r := fc.reads[0]; r.Source != herdr.SourceVisible || r.Lines != 0 || r.Format != herdr.FormatText {
		t.Errorf("read %+v, want the visible screen as text, no line count", r)
	}
}
