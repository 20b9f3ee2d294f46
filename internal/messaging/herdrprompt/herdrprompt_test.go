package herdrprompt_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
)

// fixture is a fake herdr with one ready agent "w" in its own pane.
type fixture struct {
	srv  *herdrsim.Server
	hc   *herdr.Client
	pane string
	ctx  context.Context
}

func newFixture(t *testing.T, b herdrsim.Behavior) *fixture {
	t.Helper()
	// A bound for the whole test, so that a bug fails it instead of hanging;
	// nothing waits for it to pass.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	srv, err := validated.Start(&herdrsim.Options{Behavior: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hc := herdr.New(&herdr.Options{SocketPath: srv.SocketPath()})
	ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	pane := ws.RootPane.PaneID
	if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "w", Kind: "claude", PaneID: pane}, 0); err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, hc: hc, pane: pane, ctx: ctx}
}

func TestPrompter_TypesThePromptAndReadsTheTail(t *testing.T) {
	f := newFixture(t, herdrsim.Behavior{Reply: "parser refactored"})
	p := herdrprompt.New(f.hc)
	if err := p.Prompt(f.ctx, "w", "refactor the parser"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"refactor the parser"}, f.srv.Prompts(f.pane)); diff != "" {
		t.Fatalf("typed (-want +got):\n%s", diff)
	}
	tail, err := p.ReadTail(f.ctx, "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tail, "parser refactored") {
		t.Fatalf("tail %q lacks the agent's output", tail)
	}
}

func TestPrompter_ErrorsKeepHerdrCodes(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *fixture) error
		target string
		want   messaging.Verdict
		code   string
	}{
		{"blocked agent: nothing typed", func(f *fixture) error { return f.srv.SetAgentStatus(f.pane, "blocked") }, "w", messaging.NotSent, "agent_blocked"},
		{"no such agent", func(*fixture) error { return nil }, "nobody", messaging.Failed, "agent_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, herdrsim.Behavior{})
			if err := tt.setup(f); err != nil {
				t.Fatal(err)
			}
			err := herdrprompt.New(f.hc).Prompt(f.ctx, tt.target, "hello")
			if !herdr.IsCode(err, tt.code) || messaging.DefaultClassify(err) != tt.want {
				t.Fatalf("Prompt error %v: want code %s classified %v", err, tt.code, tt.want)
			}
			if got := f.srv.Prompts(f.pane); len(got) != 0 {
				t.Fatalf("typed %q", got)
			}
		})
	}
}

// While held (fleetd's view of herdr not in sync: herdr away, or back and
// not read yet), Prompt types nothing and refuses as a refused connect is
// refused — NotSent, so the core keeps the message queued and retries —
// and once released it types again.
func TestPrompter_HoldWhileRefusesUntyped(t *testing.T) {
	f := newFixture(t, herdrsim.Behavior{})
	p := herdrprompt.New(f.hc)
	held := true
	p.HoldWhile(func() bool { return held })
	err := p.Prompt(f.ctx, "w", "held")
	if err == nil || messaging.DefaultClassify(err) != messaging.NotSent || !unavailable(err) {
		t.Fatalf("held Prompt = %v (%v); want NotSent, herdr unavailable", err, messaging.DefaultClassify(err))
	}
	if got := f.srv.Prompts(f.pane); len(got) != 0 {
		t.Fatalf("typed %q while held", got)
	}
	held = false
	if err := p.Prompt(f.ctx, "w", "released"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"released"}, f.srv.Prompts(f.pane)); diff != "" {
		t.Errorf("typed (-want +got):\n%s", diff)
	}
}

func unavailable(err error) bool { return errors.Is(err, herdr.ErrUnavailable) }

// feed plays the reconciler's part: herdr's per-pane status events go to
// ObserveStatus, numbered by a counter that advances with every change (the
// events carry no state_change_seq).
func (f *fixture) feed(t *testing.T, core *messaging.Core) {
	t.Helper()
	stream, err := f.hc.Subscribe(f.ctx, []herdr.Subscription{{Type: herdr.SubPaneAgentStatusChanged, PaneID: f.pane}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.hc.GetAgent(f.ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	core.ObserveStatus("w", string(info.AgentStatus), 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var n uint64
		for ev := range stream.Events() {
			n++
			core.ObserveStatus("w", string(ev.AgentStatus), n)
		}
	}()
	t.Cleanup(func() { stream.Close(); <-done })
}

func newCore(t *testing.T, f *fixture) *messaging.Core {
	t.Helper()
	core, err := messaging.New(t.TempDir(), herdrprompt.New(f.hc), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close() })
	return core
}

func TestEndToEnd_DelegationOverTheWire(t *testing.T) {
	var core *messaging.Core
	ready := make(chan struct{})
	f := newFixture(t, herdrsim.Behavior{OnPrompt: func(_, prompt string) {
		<-ready
		// What a cooperative worker does through bridge_reply.
		core.Reply(context.Background(), "w", "echo: "+prompt, true)
	}})
	core = newCore(t, f)
	close(ready)
	f.feed(t, core)
	res, err := core.Send(f.ctx, messaging.SendRequest{From: "primary", To: "w", Content: "hello", Wait: true})
	if err != nil || res.Outcome != messaging.OutcomeReply || res.Text != "echo: hello" {
		t.Fatalf("Send = %+v, %v; want the echoed reply", res, err)
	}
}

func TestEndToEnd_UncooperativeWorkerOverTheWire(t *testing.T) {
	f := newFixture(t, herdrsim.Behavior{Reply: "I fixed the bug but forgot to reply"})
	core := newCore(t, f)
	f.feed(t, core)
	res, err := core.Send(f.ctx, messaging.SendRequest{From: "primary", To: "w", Content: "fix the bug", Wait: true})
	if err != nil || res.Outcome != messaging.OutcomeTurnDone || !strings.Contains(res.Text, "forgot to reply") {
		t.Fatalf("Send = %+v, %v; want turn_done with the terminal tail", res, err)
	}
	if diff := cmp.Diff([]string{"fix the bug"}, f.srv.Prompts(f.pane)); diff != "" {
		t.Fatalf("typed (-want +got):\n%s", diff)
	}
}
