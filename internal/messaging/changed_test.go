package messaging

import "testing"

// TestChanged_ClosesAfterAChangeAndNotBefore: a watcher's channel stays open
// while nothing happens and closes once a call changed the state (here a
// worker's question and the primary's ack), so the console can wake on it.
func TestChanged_ClosesAfterAChangeAndNotBefore(t *testing.T) {
	c := newCore(t, t.TempDir(), &fakeHerdr{}, nil)
	ch := c.Changed()
	if c.Changed() != ch {
		t.Fatal("Changed handed out a second channel before any change")
	}
	c.Status("w") // a read changes nothing
	select {
	case <-ch:
		t.Fatal("Changed closed without a change")
	default:
	}
	if _, err := c.Reply(bg, "w", "note", false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed still open after a reply was stored")
	}
	next := c.Changed()
	msgs, err := c.Poll(bg, DefaultPrimaryName, false, 0)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("poll = %v, %v; want the one note", msgs, err)
	}
	if _, err := c.Ack(DefaultPrimaryName, []string{msgs[0].ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-next:
	default:
		t.Fatal("Changed still open after an ack")
	}
}
