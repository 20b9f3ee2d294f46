package herdrprompt

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/herdr"
)

// stubClient answers agent.prompt with prompt (or err) and agent.get with
// agent.
type stubClient struct {
	prompt, agent herdr.AgentInfo
	err           error
}

func (s *stubClient) PromptAgent(context.Context, herdr.AgentPromptParams) (*herdr.AgentInfo, error) {
	if s.err != nil {
		return nil, s.err
	}
	a := s.prompt
	return &a, nil
}

func (s *stubClient) GetAgent(context.Context, string) (*herdr.AgentInfo, error) {
	a := s.agent
	return &a, nil
}

func (s *stubClient) ReadAgent(context.Context, herdr.AgentReadParams) (*herdr.PaneReadResult, error) {
	return &herdr.PaneReadResult{}, nil
}

// The feed keeps an entry for a worker only while it has something to
// keep: a prompt whose start is not seen yet, or the offset of a change it
// added. Quiet workers, and those whose prompt failed or showed its start,
// cost it nothing.
func TestFeed_KeepsEntriesOnlyWhileNeeded(t *testing.T) {
	seq := func(n uint64) *uint64 { return &n }
	synctest.Test(t, func(t *testing.T) {
		c := &stubClient{
			prompt: herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seq(4)},
			agent:  herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seq(4)},
		}
		p := New(c)
		defer p.Close()
		feed := p.Feed(func(string, string, uint64) {})
		entries := func(step string, want int) {
			t.Helper()
			synctest.Wait()
			p.mu.Lock()
			defer p.mu.Unlock()
			if got := len(p.workers); got != want {
				t.Fatalf("%s: %d entries, want %d", step, got, want)
			}
		}
		for i := range 100 {
			feed("quiet", "idle", uint64(i))
		}
		entries("quiet workers observed", 0)

		if err := p.Prompt(context.Background(), "w", "go"); err != nil {
			t.Fatal(err)
		}
		entries("prompt typed", 1)
		feed("w", "idle", 1) // checked: no completion since
		entries("idle, no completion yet", 1)
		feed("w", "working", 2)
		entries("start seen", 0)

		c.err = errors.New("connection refused")
		if err := p.Prompt(context.Background(), "w", "again"); err == nil {
			t.Fatal("prompt succeeded, want the client's error")
		}
		entries("prompt failed", 0)

		c.err, c.agent.CompletionSeq = nil, seq(5)
		if err := p.Prompt(context.Background(), "w", "once more"); err != nil {
			t.Fatal(err)
		}
		feed("w", "idle", 3) // checked: the turn ran unseen, the feed adds it
		entries("a change added", 1)
	})
}
