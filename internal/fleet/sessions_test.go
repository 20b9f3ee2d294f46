package fleet

import (
	"context"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// A session one node keeps for a member is what another node reads for
// it — for that member's uid only, not for another member of the same
// name — and a node that forgets it deletes it, but never another uid's.
func TestSessions_KeptOnOneNodeResumedOnAnother(t *testing.T) {
	f := newFixture(t)
	a, b := NewSessions(f.cli, f.opts()), NewSessions(f.cli, f.opts())
	for _, s := range []*Sessions{a, b} {
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.run(s.Run)
	}
	codex := v1alpha1.AgentSession{Source: "herdr:codex", Agent: "codex", Kind: v1alpha1.AgentSessionKindID, Value: "0199-a"}
	a.Keep("reviewer", "uid-1", &codex)
	until(t, "b reads reviewer's session", b.Changed, func() bool { s, ok := b.Session("reviewer", "uid-1"); return ok && s == codex })
	if _, ok := b.Session("reviewer", "uid-2"); ok {
		t.Error("a member of the same name with another uid gets the session")
	}

	later := codex
	later.Value = "0199-b"
	b.Keep("reviewer", "uid-1", &later) // the member moved to b and its agent went on
	until(t, "a reads the later session", a.Changed, func() bool { s, _ := a.Session("reviewer", "uid-1"); return s == later })

	a.Keep("reviewer", "uid-2", nil) // another uid's forget deletes nothing
	a.Keep("other", "uid-9", &codex)
	until(t, "other kept", b.Changed, func() bool { _, ok := b.Session("other", "uid-9"); return ok })
	if s, ok := b.Session("reviewer", "uid-1"); !ok || s != later {
		t.Errorf("reviewer's session after another uid's forget: %+v, %v", s, ok)
	}
	a.Keep("reviewer", "uid-1", nil)
	until(t, "reviewer's session deleted", b.Changed, func() bool { _, ok := b.Session("reviewer", "uid-1"); return !ok })
}
