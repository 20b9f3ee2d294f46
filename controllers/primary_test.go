package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrtest"
)

type primaryObservation struct {
	status string
	seq    uint64
}

// TestFollowPrimaryPane_ResubscribesAndCatchesUp drives the follower on a
// cache of its own against the fake herdr: a refused first subscription is
// retried, each (re)subscription is followed by a catch-up read, status
// changes count up, and a dropped stream (herdr restarting) is
// resubscribed without counting the unchanged status again.
func TestFollowPrimaryPane_ResubscribesAndCatchesUp(t *testing.T) {
	srv, err := herdrtest.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := herdr.New(&herdr.Options{SocketPath: srv.SocketPath()})
	// The user's own agent, outside fleetd's workspace: the primary.
	ws, err := hc.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: "me"})
	if err != nil {
		t.Fatal(err)
	}
	pane := ws.RootPane.PaneID
	if _, err := hc.StartAgent(ctx, herdr.AgentStartParams{Name: "boss", Kind: "claude", PaneID: pane}, time.Millisecond); err != nil {
		t.Fatal(err)
	}

	cache := herdrcache.New(herdrcache.FromClient(hc), &herdrcache.Options{Logger: discard(),
		ReconnectBackoff: time.Millisecond, MaxReconnect: 10 * time.Millisecond, ResubscribeDelay: time.Millisecond,
		CallTimeout: 2 * time.Second})
	seen := make(chan primaryObservation, 64)
	stop := FollowPrimaryPane(cache, pane, func(status string, seq uint64) { seen <- primaryObservation{status, seq} })
	defer stop()
	srv.InjectFault("events.subscribe", herdrtest.Fault{Drop: true, Times: 1})

	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cache.Run(runCtx) }()
	defer func() {
		stopRun()
		if err := <-done; err != nil {
			t.Errorf("cache.Run: %v", err)
		}
	}()

	// next waits for want. The cache passes a status on at every listing
	// and catch-up; repeats of the last observation (the same status with
	// the same number) are re-reads and skipped, anything else is wrong.
	var last primaryObservation
	next := func(want primaryObservation) {
		t.Helper()
		for {
			select {
			case got := <-seen:
				if got == want {
					last = got
					return
				}
				if got == last {
					continue
				}
				t.Fatalf("observed %+v, want %+v", got, want)
			case <-ctx.Done():
				t.Fatalf("never observed %+v", want)
			}
		}
	}
	status := func() string {
		st, _ := srv.Pane(pane)
		return st.Status
	}
	next(primaryObservation{status(), 1}) // read after the retried subscription
	if err := srv.SetAgentStatus(pane, "working"); err != nil {
		t.Fatal(err)
	}
	next(primaryObservation{"working", 2})

	// The cache reports the listing's status before it subscribes: wait
	// for the live stream before herdr restarts.
	if err := srv.WaitCalls(ctx, "events.subscribe", 2); err != nil {
		t.Fatal(err)
	}
	since := len(srv.Requests())
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitPaneSubscribed(t, ctx, srv, since, pane)
	next(primaryObservation{"working", 2}) // re-read, unchanged: no new change counted
	if err := srv.SetAgentStatus(pane, "idle"); err != nil {
		t.Fatal(err)
	}
	next(primaryObservation{status(), 3})
	if n := srv.Calls()["events.subscribe"]; n != 3 {
		t.Errorf("events.subscribe calls = %d, want 3 (refused, first stream, after the restart)", n)
	}
}

// waitPaneSubscribed waits for an events.subscribe after request number
// since whose subscriptions cover pane.
func waitPaneSubscribed(t *testing.T, ctx context.Context, srv *herdrtest.Server, since int, pane string) {
	t.Helper()
	for n := 1; ; n++ {
		if err := srv.WaitCalls(ctx, "events.subscribe", n); err != nil {
			t.Fatalf("never subscribed to the status of %s: %v", pane, err)
		}
		for _, r := range srv.Requests()[since:] {
			if r.Method != "events.subscribe" {
				continue
			}
			var p struct {
				Subscriptions []herdr.Subscription `json:"subscriptions"`
			}
			if err := json.Unmarshal(r.Params, &p); err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(p.Subscriptions, func(s herdr.Subscription) bool { return s.PaneID == pane }) {
				return
			}
		}
	}
}
