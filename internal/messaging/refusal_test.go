package messaging

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

// The agent stops at a dialog while its prompt is being typed, herdr
// refuses the prompt untyped (agent blocked), and the dialog is answered
// before the refusal reaches the core (chaos seed 2). The refusal's status
// is older than the observation: the prompt goes again at once, and the
// turn, whose prompt nobody has seen yet, neither started nor ended.
func TestInjector_RefusalOlderThanTheLastObservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fakeHerdr{}
		c := newCore(t, t.TempDir(), h, &Options{NewID: idsWithPrefix("a")})
		c.ObserveStatus("w", StatusIdle, 1)
		hold := make(chan struct{})
		h.mu.Lock()
		h.hold = hold
		h.errs = []error{&PromptError{Verdict: NotSent, Status: StatusBlocked, Err: errors.New("agent blocked")}}
		h.mu.Unlock()
		sent, err := c.Send(bg, SendRequest{From: "primary", To: "w", Content: "A"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c.ObserveStatus("w", StatusBlocked, 2) // the dialog, before the prompt was typed
		c.ObserveStatus("w", StatusIdle, 3)    // answered
		synctest.Wait()
		h.mu.Lock()
		h.hold = nil
		h.mu.Unlock()
		close(hold) // herdr's refusal arrives
		synctest.Wait()

		if diff := cmp.Diff([]prompted{{"w", "A"}, {"w", "A"}}, h.sent()); diff != "" {
			t.Errorf("prompts (-want +got): the refused one must go again\n%s", diff)
		}
		if s := c.Status("w"); s.AgentStatus != StatusIdle || s.QueueDepth != 0 || s.CurrentTurn != sent.TurnID {
			t.Errorf("w = %+v; want idle, nothing queued, turn %s current", s, sent.TurnID)
		}
		if mail, _ := c.Poll(bg, "primary", false, 0); len(mail) != 0 {
			t.Errorf("mail %+v; want none: the turn's prompt was only now typed", mail)
		}
	})
}
