package herdr

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const ackResult = `{"type":"subscription_started"}`

// Stream lines exactly as herdr writes them: lifecycle events snake_case with
// a type tag, per-pane events dot-named without one.
var streamLines = []string{
	`{"event":"pane_created","data":{"type":"pane_created","pane":` + paneJSON + `}}`,
	`{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p2","workspace_id":"w1","agent_status":"working","agent":"claude"}}`,
	`{"event":"tab_closed","data":{"type":"tab_closed","tab_id":"w1:t2","workspace_id":"w1"}}`,
	`{"event":"pane_agent_detected","data":{"type":"pane_agent_detected","pane_id":"w1:p2","workspace_id":"w1","agent":"claude","released":true,"final_status":"done"}}`,
	`{"event":"pane.output_matched","data":{"pane_id":"w1:p2","matched_line":"PASS","read":` + readJSON + `}}`,
	`{"event":"workspace_reordered","data":{"type":"workspace_reordered","workspace_ids":["w2","w1"],"workspaces":[]}}`,
}

var wantStreamEvents = []Event{
	{Kind: EventPaneCreated, Name: "pane_created", PaneID: "w1:p2", WorkspaceID: "w1", Pane: &wantPane},
	{Kind: EventPaneAgentStatusChanged, Name: "pane.agent_status_changed", PaneID: "w1:p2", WorkspaceID: "w1",
		AgentStatus: StatusWorking, Agent: "claude"},
	{Kind: EventTabClosed, Name: "tab_closed", TabID: "w1:t2", WorkspaceID: "w1"},
	{Kind: EventPaneAgentDetected, Name: "pane_agent_detected", PaneID: "w1:p2", WorkspaceID: "w1", Agent: "claude",
		Released: true, FinalStatus: StatusDone},
	{Kind: EventPaneOutputMatched, Name: "pane.output_matched", PaneID: "w1:p2", MatchedLine: "PASS", Read: &wantRead},
	{Kind: "workspace_reordered", Name: "workspace_reordered"}, // not modelled: delivered raw
}

var subscriptions = []Subscription{
	{Type: SubPaneCreated},
	{Type: SubTabClosed},
	{Type: SubPaneAgentDetected},
	{Type: SubPaneAgentStatusChanged, PaneID: "w1:p2"},
	{Type: SubPaneOutputMatched, PaneID: "w1:p2", Source: SourceRecent, Match: &OutputMatch{Type: "substring", Value: "PASS"}},
}

const wantSubscribeParams = `{"subscriptions":[{"type":"pane.created"},{"type":"tab.closed"},{"type":"pane.agent_detected"},` +
	`{"type":"pane.agent_status_changed","pane_id":"w1:p2"},` +
	`{"type":"pane.output_matched","pane_id":"w1:p2","source":"recent","match":{"type":"substring","value":"PASS"}}]}`

// collect reads n events or fails.
func collect(t *testing.T, s *Stream, n int) []Event {
	t.Helper()
	var got []Event
	for range n {
		ev, ok := <-s.Events()
		if !ok {
			t.Fatalf("stream ended after %d events (err %v), want %d", len(got), s.Err(), n)
		}
		got = append(got, ev)
	}
	return got
}

func diffEvents(t *testing.T, want, got []Event) {
	t.Helper()
	for i := range got {
		if !json.Valid(got[i].Data) {
			t.Errorf("event %d: Data %q is not the raw payload", i, got[i].Data)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Event{}, "Data")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestSubscribe_BothEnvelopeStylesThenCancel pins the stream contract: the
// exact subscribe request, the ack wait, decoding of both envelope styles and
// of unknown kinds, and a clean end (connection closed, Err nil) on cancel.
func TestSubscribe_BothEnvelopeStylesThenCancel(t *testing.T) {
	clientClosed := make(chan struct{})
	srv := startServer(t, func(c *scriptConn) {
		var got, want any
		json.Unmarshal(c.req.Params, &got)
		json.Unmarshal([]byte(wantSubscribeParams), &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("subscribe params (-want +got):\n%s", diff)
		}
		c.result(ackResult)
		for _, l := range streamLines {
			c.event(l)
		}
		c.awaitClientClose()
		close(clientClosed)
	})
	var codes []string
	c := newClient(t, &Options{SocketPath: srv.path, Observer: func(m, code string, _ time.Duration) { codes = append(codes, m+" "+code) }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := c.Subscribe(ctx, subscriptions)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	diffEvents(t, wantStreamEvents, collect(t, s, len(wantStreamEvents)))
	if wantStreamEvents[5].Known() || !wantStreamEvents[1].Known() {
		t.Errorf("Known() misclassifies kinds")
	}
	cancel()
	for range s.Events() {
		t.Errorf("event after cancel")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after cancel = %v, want nil", err)
	}
	<-clientClosed
	s.Close() // after the end: a no-op
	if diff := cmp.Diff([]string{"events.subscribe ok"}, codes); diff != "" {
		t.Errorf("observer (-want +got):\n%s", diff)
	}
}

func TestSubscribe_CloseEndsCleanly(t *testing.T) {
	clientClosed := make(chan struct{})
	srv := startServer(t, func(c *scriptConn) {
		c.result(ackResult)
		c.event(streamLines[0])
		c.awaitClientClose()
		close(clientClosed)
	})
	s, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(t.Context(), []Subscription{{Type: SubPaneCreated}})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s, 1)
	s.Close()
	if _, ok := <-s.Events(); ok {
		t.Errorf("Events still open after Close")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	<-clientClosed
}

// TestSubscribe_DroppedStreamIsReported pins that every way herdr can end a
// stream is reported as ErrStreamDropped, with the right classification.
func TestSubscribe_DroppedStreamIsReported(t *testing.T) {
	tests := []struct {
		name          string
		after         func(c *scriptConn)
		wantCode      string // herdr error code inside, if any
		wantTransport bool
		wantLost      bool
	}{
		{
			name:          "herdr closes the connection",
			after:         func(c *scriptConn) { c.hangUp() },
			wantTransport: true,
		},
		{
			name: "garbage line",
			after: func(c *scriptConn) {
				c.writeRaw("not json\n")
				c.awaitClientClose()
			},
			wantTransport: true,
		},
		{
			name: "error line for a vanished pane",
			after: func(c *scriptConn) {
				c.event(`{"id":"` + c.req.ID + `:sub:0:probe","error":{"code":"pane_not_found","message":"pane w1:p2 not found"}}`)
				c.hangUp()
			},
			wantCode: "pane_not_found",
		},
		{
			name: "events_lost (protocol 22): the subscriber fell behind",
			after: func(c *scriptConn) {
				c.event(`{"id":"` + c.req.ID + `","error":{"code":"events_lost","message":"event subscriber fell behind; resubscribe and resync with session.snapshot"}}`)
				c.hangUp()
			},
			wantCode: "events_lost",
			wantLost: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, func(c *scriptConn) {
				c.result(ackResult)
				c.event(streamLines[1])
				tt.after(c)
			})
			s, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(t.Context(),
				[]Subscription{{Type: SubPaneAgentStatusChanged, PaneID: "w1:p2"}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			diffEvents(t, wantStreamEvents[1:2], collect(t, s, 1))
			for range s.Events() {
				t.Errorf("unexpected event")
			}
			err = s.Err()
			if !errors.Is(err, ErrStreamDropped) {
				t.Fatalf("Err = %v, want ErrStreamDropped", err)
			}
			if got := errors.Is(err, ErrUnavailable); got != tt.wantTransport {
				t.Errorf("errors.Is(ErrUnavailable) = %v, want %v (err %v)", got, tt.wantTransport, err)
			}
			if tt.wantCode != "" && !IsCode(err, tt.wantCode) {
				t.Errorf("Err = %v, want herdr code %s", err, tt.wantCode)
			}
			if got := errors.Is(err, ErrEventsLost); got != tt.wantLost {
				t.Errorf("errors.Is(ErrEventsLost) = %v, want %v (err %v)", got, tt.wantLost, err)
			}
		})
	}
}

// TestSubscribe_SetupErrorIDs: a setup failure is herdr's error whether it
// carries protocol 20's probe id, protocol 22's request id or "".
func TestSubscribe_SetupErrorIDs(t *testing.T) {
	tests := []struct {
		name string
		id   func(reqID string) string
	}{
		{"protocol 20 probe id", func(id string) string { return id + ":sub:3:probe" }},
		{"protocol 22 request id", func(id string) string { return id }},
		{"empty id", func(string) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, func(c *scriptConn) {
				c.reply(`{"id":"` + tt.id(c.req.ID) + `","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`)
				c.hangUp()
			})
			_, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(t.Context(),
				[]Subscription{{Type: SubPaneAgentStatusChanged, PaneID: "w1:p9"}})
			if errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want herdr's refusal, not a bad response", err)
			}
			if !IsCode(err, "pane_not_found") {
				t.Errorf("err = %v, want pane_not_found", err)
			}
		})
	}
}

// TestSubscribe_ErrorInsteadOfAck pins that a setup failure (herdr's error
// line, with its probe id) is returned from Subscribe as herdr's error.
func TestSubscribe_ErrorInsteadOfAck(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		c.reply(`{"id":"` + c.req.ID + `:sub:0:probe","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`)
		c.hangUp()
	})
	s, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(t.Context(),
		[]Subscription{{Type: SubPaneAgentStatusChanged, PaneID: "w1:p9"}})
	if s != nil {
		s.Close()
		t.Fatalf("got a stream, want an error")
	}
	if he := errorsAsHerdr(err); he == nil || he.Code != "pane_not_found" || he.Method != "events.subscribe" {
		t.Fatalf("err = %v, want herdr pane_not_found from events.subscribe", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("a refusal must not look like herdr being down")
	}
}

func TestSubscribe_EmptyListSendsEmptyArray(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		if got := string(c.req.Params); got != `{"subscriptions":[]}` {
			t.Errorf("params = %s", got)
		}
		c.result(ackResult)
		c.awaitClientClose()
	})
	s, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestEvent_DecodeRejectsNonEvents(t *testing.T) {
	for _, line := range []string{`{"data":{}}`, `{"event":"pane_created"}`, `{"event":"pane_created","data":null}`, `[]`} {
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err == nil {
			t.Errorf("decoded %s as %+v, want an error", line, ev)
		}
	}
}

func TestEvent_UnknownKindWithUnfamiliarFieldsIsKeptRaw(t *testing.T) {
	var ev Event
	line := `{"event":"pane.future_thing","data":{"pane_id":"w1:p2","revision":"v2"}}`
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := Event{Kind: "pane_future_thing", Name: "pane.future_thing", Data: json.RawMessage(`{"pane_id":"w1:p2","revision":"v2"}`)}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	// The same mistyped field in a kind this package models is an error.
	if err := json.Unmarshal([]byte(`{"event":"pane_exited","data":{"type":"pane_exited","pane_id":7,"workspace_id":"w1"}}`), &ev); err == nil {
		t.Errorf("decoded a pane_exited with a numeric pane_id")
	}
}
