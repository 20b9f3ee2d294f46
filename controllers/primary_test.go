package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
)

type primaryObservation struct {
	Status string
	Seq    uint64
}

// primaryRecorder writes down what FollowPrimaryPane passes on.
type primaryRecorder struct {
	mu   sync.Mutex
	seen []primaryObservation
	read int // seen[:read] were taken
}

func (r *primaryRecorder) observe(status string, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, primaryObservation{status, seq})
}

// take returns what was passed on since the last take: every status as
// passed on (reads) and the changes among them (the statuses with the
// re-reads left out: the cache passes a status on at every listing and
// catch-up, and a repeat of the last one, the same status under the same
// number, is a re-read).
func (r *primaryRecorder) take() (reads, changes []primaryObservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reads = slices.Clone(r.seen[r.read:])
	var last primaryObservation
	if r.read > 0 {
		last = r.seen[r.read-1]
	}
	for _, o := range reads {
		if o != last {
			changes = append(changes, o)
		}
		last = o
	}
	r.read = len(r.seen)
	return reads, changes
}

// TestFollowPrimaryPane_ResubscribesAndCatchesUp drives the follower on a
// cache of its own against the in-memory fake herdr, inside a synctest
// bubble: a refused first subscription is retried, herdr is read only after
// a subscription is acknowledged (a status change herdr made while the
// subscription was being set up, which no event reports, is seen), status
// changes count up, and a dropped stream (herdr restarting) is
// resubscribed without counting the unchanged status again.
func TestFollowPrimaryPane_ResubscribesAndCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := herdrsim.Start(&herdrsim.Options{InMemory: true, Validator: validated.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		// Virtual time: it passes only while the bubble is idle, so the
		// deadline fails a test whose outcome never comes, at once.
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		hc := herdr.New(&herdr.Options{Dial: srv.Dial})
		// The user's own agent, outside fleetd's workspace: the primary.
		ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "me"})
		if err != nil {
			t.Fatal(err)
		}
		pane := ws.RootPane.PaneID
		if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "boss", Kind: "claude", PaneID: pane}, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		status := func() string {
			st, _ := srv.Pane(pane)
			return st.Status
		}
		if first := status(); first == "working" {
			t.Fatalf("the agent starts %s; the test needs it not working", first)
		}

		// The first subscription is refused; herdr is slow to acknowledge
		// the retried one (later faults apply first).
		const ackDelay = 50 * time.Millisecond
		srv.InjectFault("events.subscribe", herdrsim.Fault{Latency: ackDelay, Times: 1})
		srv.InjectFault("events.subscribe", herdrsim.Fault{Drop: true, Times: 1})

		// No periodic listing within the deadline: only a catch-up read
		// can report a change no event carries.
		cache := herdrcache.New(herdrcache.FromClient(hc), &herdrcache.Options{Logger: discard(),
			ResyncPeriod: 10 * testDeadline, ReconnectBackoff: time.Millisecond, MaxReconnect: 10 * time.Millisecond,
			ResubscribeDelay: time.Millisecond, CallTimeout: 2 * time.Second})
		var rec primaryRecorder
		stop := FollowPrimaryPane(cache, pane, rec.observe)
		defer stop()

		runCtx, stopRun := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cache.Run(runCtx) }()
		defer func() {
			stopRun()
			if err := <-done; err != nil {
				t.Errorf("cache.Run: %v", err)
			}
		}()

		// changed checks the changes passed on since the last check, once
		// the bubble is idle.
		changed := func(what string, want ...primaryObservation) []primaryObservation {
			t.Helper()
			synctest.Wait()
			reads, changes := rec.take()
			if diff := cmp.Diff(want, changes); diff != "" {
				t.Errorf("%s: changes passed on (-want +got):\n%s", what, diff)
			}
			return reads
		}
		waitCalls := func(method string, n int) {
			t.Helper()
			if err := srv.WaitCalls(ctx, method, n); err != nil {
				t.Fatalf("waiting for %d %s calls: %v", n, method, err)
			}
		}

		// The refused subscription is retried; the retry waits for its
		// acknowledgement, and nothing is read before it.
		waitCalls("events.subscribe", 2)
		changed("nothing read before an acknowledged subscription")
		// herdr's status changes before the subscription covers the pane:
		// no event reports it, the read after the acknowledgement does.
		if err := srv.SetAgentStatus(pane, "working"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ackDelay)
		changed("read after the retried subscription", primaryObservation{"working", 1})
		if err := srv.SetAgentStatus(pane, "idle"); err != nil {
			t.Fatal(err)
		}
		changed("an event on the live stream", primaryObservation{status(), 2})

		// herdr restarts: the stream drops, the cache resubscribes and
		// reads herdr again. The status did not change: nothing
		// new is counted, but it is read again.
		since := len(srv.Requests())
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		waitCalls("events.subscribe", 3)
		if reads := changed("resubscribed after the restart"); len(reads) == 0 {
			t.Errorf("the status was not read again after the restart")
		}
		if !coversPane(t, srv.Requests()[since:], pane) {
			t.Errorf("the subscription after the restart does not cover %s", pane)
		}
		if err := srv.SetAgentStatus(pane, "working"); err != nil {
			t.Fatal(err)
		}
		changed("an event on the new stream", primaryObservation{"working", 3})

		if n := srv.Calls()["events.subscribe"]; n != 3 {
			t.Errorf("events.subscribe calls = %d, want 3 (refused, first stream, after the restart)", n)
		}
		// Each acknowledged subscription is followed by the read of herdr
		// (the refused one by the protocol check of the retry).
		var after []string
		reqs := srv.Requests()
		for i, r := range reqs[:len(reqs)-1] {
			if r.Method == "events.subscribe" {
				after = append(after, reqs[i+1].Method)
			}
		}
		if len(after) != 3 || after[0] != "ping" || after[1] != "session.snapshot" || after[2] != "session.snapshot" {
			t.Errorf("calls after each events.subscribe = %q, want ping, then session.snapshot after the second and third", after)
		}
	})
}

// coversPane reports whether one of the events.subscribe requests in reqs
// subscribes to the agent status of pane.
func coversPane(t *testing.T, reqs []herdrsim.Request, pane string) bool {
	t.Helper()
	for _, r := range reqs {
		if r.Method != "events.subscribe" {
			continue
		}
		var p struct {
			Subscriptions []herdr.Subscription `json:"subscriptions"`
		}
		if err := json.Unmarshal(r.Params, &p); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(p.Subscriptions, func(s herdr.Subscription) bool {
			return s.Type == herdr.SubPaneAgentStatusChanged && s.PaneID == pane
		}) {
			return true
		}
	}
	return false
}
