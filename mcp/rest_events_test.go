package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// eventFleet is a liveFleet whose members have events a test records,
// each broadcast as controllers.Manager does.
type eventFleet struct {
	*liveFleet
	mu     sync.Mutex
	events map[string][]v1alpha1.Event
	now    time.Time // of the last event
}

func newEventFleet(ms ...v1alpha1.Member) *eventFleet {
	return &eventFleet{liveFleet: newLiveFleet(ms...), events: map[string][]v1alpha1.Event{}, now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

func (f *eventFleet) MemberEvents(name string) []v1alpha1.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]v1alpha1.Event(nil), f.events[name]...)
}

// record adds an event to member name a second after the last, or bumps
// the last one's count when it repeats it.
func (f *eventFleet) record(name, reason, msg string) {
	f.mu.Lock()
	f.now = f.now.Add(time.Second)
	evs := f.events[name]
	if n := len(evs); n > 0 && evs[n-1].Reason == reason && evs[n-1].Message == msg {
		evs[n-1].Count++
		evs[n-1].Time = f.now
	} else {
		f.events[name] = append(evs, v1alpha1.Event{Time: f.now, Type: v1alpha1.EventNormal, Reason: reason, Message: msg, Count: 1})
	}
	f.mu.Unlock()
	f.changed.Notify()
}

func (f *eventFleet) newServer(t *testing.T, opts Options) string {
	t.Helper()
	srv, _ := newWatchServer(t, f, opts)
	return srv.URL
}

// getJSON GETs url with token and decodes its 200 answer into v.
func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// openEvents starts GET /events?watch=1&query as the primary and returns
// a reader of its events as "TYPE member reason message xCOUNT".
func openEvents(ctx context.Context, t *testing.T, url, query string) func() string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/events?watch=1"+query, nil)
	req.Header.Set("Authorization", "Bearer primary-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events?watch=1: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	return func() string {
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				return line
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case line == "" && data != "":
				var ev struct {
					Type   string
					Object MemberEvent
				}
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				if ev.Type == WatchSynced {
					return ev.Type
				}
				o := ev.Object
				return fmt.Sprintf("%s %s %s %s x%d", ev.Type, o.Member, o.Reason, o.Message, o.Count)
			}
		}
		return "EOF"
	}
}

func expectEvents(t *testing.T, next func() string, want ...string) {
	t.Helper()
	var got []string
	for range want {
		got = append(got, next())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
}

// TestEvents_ListsEveryMembersEventsOldestFirst: GET /events is what
// `fleetd get events` prints: every member's events in time order, or one
// member's by any reference.
func TestEvents_ListsEveryMembersEventsOldestFirst(t *testing.T) {
	a := member("a", "Ready")
	a.Status.PaneID = "w1:p2"
	f := newEventFleet(a, member("b", "Ready"))
	f.record("a", "Started", "a started")
	f.record("b", "Started", "b started")
	f.record("a", "BackOff", "a restarted")
	url := f.newServer(t, Options{})
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a Started", "b Started", "a BackOff"}},
		{"?member=a", []string{"a Started", "a BackOff"}},
		{"?member=w1:p2", []string{"a Started", "a BackOff"}},
		{"?member=nobody", nil},
	} {
		var list EventList
		getJSON(t, url+"/events"+tt.query, "worker-secret", &list)
		var got []string
		for _, e := range list.Items {
			got = append(got, e.Member+" "+e.Reason)
		}
		if list.Kind != "EventList" || !cmp.Equal(tt.want, got) {
			t.Errorf("GET /events%s: %s %v, want EventList %v", tt.query, list.Kind, got, tt.want)
		}
	}
}

// TestEvents_WatchStreamsNewEventsAndRepeats: the watch sends what there
// is, then each new event as ADDED and a repeat as MODIFIED with its new
// count, filtered to one member when asked; a quiet stream gets
// heartbeats.
func TestEvents_WatchStreamsNewEventsAndRepeats(t *testing.T) {
	f := newEventFleet(member("a", "Ready"), member("b", "Ready"))
	f.record("a", "Started", "a started")
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	url := f.newServer(t, Options{Clock: clk, WatchHeartbeat: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all := openEvents(ctx, t, url, "")
	onlyB := openEvents(ctx, t, url, "&member=b")
	expectEvents(t, all, "ADDED a Started a started x1", "SYNCED")
	expectEvents(t, onlyB, "SYNCED")
	f.record("b", "Started", "b started")
	expectEvents(t, all, "ADDED b Started b started x1")
	expectEvents(t, onlyB, "ADDED b Started b started x1")
	f.record("a", "BackOff", "pane closed")
	expectEvents(t, all, "ADDED a BackOff pane closed x1")
	f.record("a", "BackOff", "pane closed")
	expectEvents(t, all, "MODIFIED a BackOff pane closed x2")
	f.set(member("a", "Starting"), false) // a status change alone: no event
	f.record("b", "Stopped", "b stopped")
	expectEvents(t, all, "ADDED b Stopped b stopped x1")
	expectEvents(t, onlyB, "ADDED b Stopped b stopped x1")
	if err := clk.WaitForTimers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	expectEvents(t, all, ": heartbeat")
}
