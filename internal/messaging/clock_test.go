package messaging

import (
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// The core runs on the one scripted clock the controllers and the fake herdr
// use too: a held Send times out exactly when the fake clock reaches its
// deadline, not before.
func TestCore_FakeClockDrivesDeadlines(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fake := clock.NewFake(start)
	c := newCore(t, t.TempDir(), &fakeHerdr{}, &Options{Clock: fake})
	armed := fake.TimerAdded()
	send := call(func() (SendResult, error) {
		return c.Send(bg, SendRequest{From: "primary", To: "w", Content: "x", Wait: true, Timeout: time.Minute})
	})
	<-armed
	if d, ok := fake.NextDeadline(); !ok || !d.Equal(start.Add(time.Minute)) {
		t.Fatalf("next deadline %v %v; want start+1m", d, ok)
	}
	fake.Step(59 * time.Second)
	select {
	case r := <-send:
		t.Fatalf("Send returned before its deadline: %+v", r)
	default:
	}
	fake.Step(time.Second)
	r := <-send
	if r.err != nil || r.v.Outcome != OutcomeTimeout {
		t.Fatalf("Send = %+v, %v; want timeout", r.v, r.err)
	}
	if s := c.Status("w"); len(s.OpenTurns) != 1 || !s.OpenTurns[0].Deadline.Equal(start.Add(time.Minute)) {
		t.Fatalf("open turns %+v", s.OpenTurns)
	}
}
