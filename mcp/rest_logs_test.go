package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/sse"
	"github.com/fleetd-dev/fleetd/internal/tail"
)

// fakeTerminals answers Read with a tail (or readErr) and makes each
// Follow emit what the test sends on frames, until the test sends on end.
type fakeTerminals struct {
	mu      sync.Mutex
	reads   []string // "name lines"
	readErr error
	frames  chan tail.Frame
	end     chan error
	started chan string
}

func newFakeTerminals() *fakeTerminals {
	return &fakeTerminals{frames: make(chan tail.Frame), end: make(chan error), started: make(chan string, 8)}
}

func (f *fakeTerminals) Read(_ context.Context, name string, lines int) (tail.Tail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, fmt.Sprint(name, " ", lines))
	if f.readErr != nil {
		return tail.Tail{}, f.readErr
	}
	return tail.Tail{Member: name, PaneID: "p-" + name, Lines: []string{"one", "two"}}, nil
}

func (f *fakeTerminals) Follow(ctx context.Context, name string, lines int, emit func(tail.Frame) error) error {
	f.started <- fmt.Sprint(name, " ", lines)
	for {
		select {
		case fr := <-f.frames:
			if err := emit(fr); err != nil {
				return err
			}
		case err := <-f.end:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func startLogs(t *testing.T, terms *fakeTerminals, maxFollowers int) (string, *Handler) {
	t.Helper()
	var h *Handler
	srv, _ := startGatewayWith(t, nil, func(o *Options) {
		o.Terminals, o.MaxFollowers = terms, maxFollowers
	})
	h = srv.Config.Handler.(*Handler)
	return srv.URL, h
}

// GET /members/{ref}/logs: the primary reads any member's terminal by any
// reference, a worker only its own; lines and follow are checked before
// herdr is asked; a member with no pane is 503.
func TestREST_LogsReadsTheTerminal(t *testing.T) {
	terms := newFakeTerminals()
	url, _ := startLogs(t, terms, 0)
	code, body := do(t, "GET", url+"/members/p2/logs?lines=5", "primary-secret", "")
	var got LogsOutput
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("GET /members/p2/logs: %d %s", code, body)
	}
	if diff := cmp.Diff(LogsOutput{Member: "b", PaneID: "p-b", Lines: []string{"one", "two"}}, got); diff != "" {
		t.Errorf("logs of b by its pane id (-want +got):\n%s", diff)
	}
	if code, body := do(t, "GET", url+"/members/a/logs", "worker-secret", ""); code != 200 {
		t.Errorf("a worker reading its own terminal: %d %s", code, body)
	}
	for _, tt := range []struct {
		path, token string
		code        int
		want        string
	}{
		{"/members/b/logs", "worker-secret", 403, "only its own terminal"},
		{"/members/zz/logs", "primary-secret", 404, `"not_found"`},
		{"/members/a/logs?lines=1001", "primary-secret", 400, "lines: 1001 is out of range"},
		{"/members/a/logs?lines=-1", "primary-secret", 400, "lines: -1 is out of range"},
		{"/members/a/logs?lines=ten", "primary-secret", 400, "not a whole number"},
		{"/members/a/logs?follow=yes", "primary-secret", 400, "follow"},
		{"/members/a/logs", "nope", 401, `"unauthorized"`},
	} {
		if code, body := do(t, "GET", url+tt.path, tt.token, ""); code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %d %s, want %d naming %q", tt.path, code, body, tt.code, tt.want)
		}
	}
	terms.readErr = fmt.Errorf("%w: a is Starting", tail.ErrNoPane)
	if code, body := do(t, "GET", url+"/members/a/logs", "primary-secret", ""); code != 503 || !strings.Contains(body, `"unavailable"`) || !strings.Contains(body, "once it runs") {
		t.Errorf("a member with no pane: %d %s", code, body)
	}
	if diff := cmp.Diff([]string{"b 5", "a 0", "a 0"}, terms.reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type event struct {
	Name, Data string
}

// events reads server-sent events from r onto a channel, closed at the end
// of the stream.
func events(r io.Reader) <-chan event {
	ch := make(chan event, 16)
	go func() {
		defer close(ch)
		rd := sse.NewReader(r, 1<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			ch <- event{Name: ev.Name, Data: string(ev.Data)}
		}
	}()
	return ch
}

func openFollow(t *testing.T, url, path string) (*http.Response, <-chan event) {
	t.Helper()
	return openFollowAs(t, url, path, "primary-secret")
}

func openFollowAs(t *testing.T, url, path, token string) (*http.Response, <-chan event) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, events(resp.Body)
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return event{}
}

// follow=1 is an event stream: each frame one "lines" event whose data is
// one line of JSON (a line of the screen cannot end the event or forge
// another), then "gone" when the member was deleted or "error" when the
// first read failed.
func TestREST_LogsFollowStreamsFrames(t *testing.T) {
	terms := newFakeTerminals()
	url, _ := startLogs(t, terms, 0)

	resp, evs := openFollow(t, url, "/members/sess-a/logs?follow=1&lines=3")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("follow: %d %s", resp.StatusCode, ct)
	}
	if got := <-terms.started; got != "a 3" {
		t.Errorf("Follow(%s), want a 3", got)
	}
	terms.frames <- tail.Frame{Lines: []string{"x"}, PaneID: "p1"}
	terms.frames <- tail.Frame{Lines: []string{"forged\n\nevent: gone\ndata: {}"}, Redraw: true}
	terms.end <- fmt.Errorf("%w: a", tail.ErrNotFound)
	got := []event{next(t, evs), next(t, evs), next(t, evs)}
	want := []event{
		{"lines", `{"lines":["x"],"paneId":"p1"}`},
		{"lines", `{"lines":["forged\n\nevent: gone\ndata: {}"],"redraw":true}`},
		{"gone", `{"code":"not_found","message":"member a was deleted"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if ev, ok := <-evs; ok {
		t.Errorf("event %+v after gone; want the end of the stream", ev)
	}

	_, evs = openFollow(t, url, "/members/a/logs?follow=1")
	<-terms.started
	terms.end <- errors.New("herdr: agent_not_found")
	if ev := next(t, evs); ev.Name != "error" || !strings.Contains(ev.Data, `"unavailable"`) || !strings.Contains(ev.Data, "agent_not_found") {
		t.Errorf("a failed first read: %+v, want an error event", ev)
	}
}

// At most MaxFollowers streams at once: one more is 429 until one ends;
// EndStreams ends them all.
func TestREST_LogsFollowersAreCapped(t *testing.T) {
	terms := newFakeTerminals()
	url, h := startLogs(t, terms, 2)
	var streams []<-chan event
	for range 2 {
		_, evs := openFollow(t, url, "/members/a/logs?follow=1")
		<-terms.started
		streams = append(streams, evs)
	}
	if code, body := do(t, "GET", url+"/members/a/logs?follow=1", "primary-secret", ""); code != 429 || !strings.Contains(body, "2 terminal follows are open already") {
		t.Fatalf("a third follower: %d %s, want 429", code, body)
	}
	if code, _ := do(t, "GET", url+"/members/a/logs", "primary-secret", ""); code != 200 {
		t.Errorf("a plain read at the cap: %d, want 200", code)
	}
	// One follower ends (its member was deleted). Its stream ends after its
	// handler returned, which is after it gave up its place.
	terms.end <- fmt.Errorf("%w: a", tail.ErrNotFound)
	var rest <-chan event
	select {
	case ev := <-streams[0]:
		if ev.Name != "gone" {
			t.Fatalf("event %+v, want gone", ev)
		}
		drain(streams[0])
		rest = streams[1]
	case ev := <-streams[1]:
		if ev.Name != "gone" {
			t.Fatalf("event %+v, want gone", ev)
		}
		drain(streams[1])
		rest = streams[0]
	case <-time.After(10 * time.Second):
		t.Fatal("no follower ended")
	}
	resp, evs := openFollow(t, url, "/members/a/logs?follow=1")
	if resp.StatusCode != 200 {
		t.Fatalf("a follower after one ended: %d, want 200", resp.StatusCode)
	}
	<-terms.started
	streams = []<-chan event{rest, evs}
	h.EndStreams()
	for _, evs := range streams {
		deadline := time.After(10 * time.Second)
		for ended := false; !ended; {
			select {
			case _, ok := <-evs:
				ended = !ok
			case <-deadline:
				t.Fatal("a stream still open 10s after EndStreams")
			}
		}
	}
}

// The follow caps are per token, a quarter of them kept for the primary:
// one worker following its own terminal as often as it likes goes no
// further than its own few, and the primary's `fleetd logs -f` still
// follows.
func TestREST_LogsFollowCapsArePerTokenWithThePrimarysShareKept(t *testing.T) {
	terms := newFakeTerminals()
	url, _ := startLogs(t, terms, 0) // the defaults
	for i := range DefaultMaxFollowers {
		resp, _ := openFollowAs(t, url, "/members/a/logs?follow=1", "worker-secret")
		switch {
		case i < DefaultMaxFollowersPerToken && resp.StatusCode == http.StatusOK:
			<-terms.started
		case i < DefaultMaxFollowersPerToken:
			t.Fatalf("the worker's follow %d: %d, want 200", i+1, resp.StatusCode)
		case resp.StatusCode != http.StatusTooManyRequests:
			t.Fatalf("the worker's follow %d, past its own: %d, want 429", i+1, resp.StatusCode)
		}
	}
	resp, _ := openFollow(t, url, "/members/b/logs?follow=1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the primary's follow while a worker follows all it may: %d, want 200", resp.StatusCode)
	}
	if got := <-terms.started; got != "b 0" {
		t.Errorf("followed %q, want the primary's follow of b", got)
	}
}

// drain reads ch to its end: the stream closed.
func drain(ch <-chan event) {
	for range ch {
	}
}

func TestNewHandler_RefusesNegativeMaxFollowers(t *testing.T) {
	if _, err := NewHandler(Options{Members: fakeMembers{}, Terminals: newFakeTerminals(), MaxFollowers: -1}); err == nil || !strings.Contains(err.Error(), "MaxFollowers -1") {
		t.Errorf("NewHandler with MaxFollowers -1: %v, want an error naming it", err)
	}
}
