package messaging

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAdmit: Options.Admit refuses a new turn with its own error and
// nothing is journalled or queued; continuing an open turn and messages to
// the primary do not ask it.
func TestAdmit(t *testing.T) {
	refused := map[string]Code{"nap": CodeWorkerGone, "nobody": CodeNotFound, "primary": CodeNotFound}
	var asked []string
	h := &fakeHerdr{}
	c := newCore(t, t.TempDir(), h, &Options{Admit: func(w string) error {
		asked = append(asked, w)
		if code := refused[w]; code != "" {
			return errorf(code, "refused %s", w)
		}
		return nil
	}})
	for _, tc := range []struct {
		to   string
		want Code
	}{{"run", ""}, {"nap", CodeWorkerGone}, {"nobody", CodeNotFound}} {
		_, err := c.Send(bg, SendRequest{From: "primary", To: tc.to, Content: "x"})
		if CodeOf(err) != tc.want {
			t.Errorf("send to %s: %v, want %q", tc.to, err, tc.want)
		}
	}
	open := c.Status("run").OpenTurns
	if len(open) != 1 {
		t.Fatalf("run's turns: %+v", open)
	}
	if _, err := c.Send(bg, SendRequest{From: "primary", TurnID: open[0].ID, Content: "more"}); err != nil {
		t.Errorf("continue turn: %v", err)
	}
	if diff := cmp.Diff([]string{"run", "nap", "nobody"}, asked); diff != "" {
		t.Errorf("Admit asked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run"}, c.Busy()); diff != "" {
		t.Errorf("Busy (-want +got):\n%s", diff)
	}
}

// TestBusy lists workers with open turns or queued messages, not those
// whose turns all ended, and never the primary.
func TestBusy(t *testing.T) {
	c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{PrimaryTarget: "pane-p"})
	for _, to := range []string{"b", "a", "gone"} {
		if _, err := c.Send(bg, SendRequest{From: "primary", To: to, Content: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	c.WorkerGone("gone", "deleted") // leaves mail (queued for the primary's pane)
	if diff := cmp.Diff([]string{"a", "b"}, c.Busy()); diff != "" {
		t.Errorf("Busy (-want +got):\n%s", diff)
	}
}
