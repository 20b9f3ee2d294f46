package herdrprompt_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
)

// The feed keeps an entry for a worker only while it has something to
// keep: a prompt whose start is not seen yet, or the offset of a change it
// added. Quiet workers, and those whose prompt failed or showed its start,
// cost it nothing.
func TestFeed_KeepsEntriesOnlyWhileNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{
			promptAnswer: herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seqp(4)},
			agent:        herdr.AgentInfo{AgentStatus: herdr.StatusIdle, CompletionSeq: seqp(4)},
		}
		p := herdrprompt.New(c)
		defer p.Close()
		feed := p.Feed(func(string, string, uint64) {})
		entries := func(step string, want int) {
			t.Helper()
			synctest.Wait()
			if got := herdrprompt.Entries(p); got != want {
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

		c.mu.Lock()
		c.promptErr = errors.New("connection refused")
		c.mu.Unlock()
		if err := p.Prompt(context.Background(), "w", "again"); err == nil {
			t.Fatal("prompt succeeded, want the client's error")
		}
		entries("prompt failed", 0)

		c.mu.Lock()
		c.promptErr, c.agent.CompletionSeq = nil, seqp(5)
		c.mu.Unlock()
		if err := p.Prompt(context.Background(), "w", "once more"); err != nil {
			t.Fatal(err)
		}
		feed("w", "idle", 3) // checked: the turn ran unseen, the feed adds it
		entries("a change added", 1)
	})
}
