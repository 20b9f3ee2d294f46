package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// The session tests drive idle expiry with a fake clock: its timers fire
// only when the test steps it, on the test's goroutine. Before stepping, a
// test waits (on the table's change notifications, never by sleeping)
// until the server has finished the requests it cares about, because a
// client gets its response a moment before the server's handler returns.

const testSessionTimeout = 10 * time.Minute

// sessionGateway is a gateway with a fake clock and its session table.
type sessionGateway struct {
	url   string
	clock *clock.Fake
	table *sessionTable
	// held, while non-nil, holds every bridge_send until it is closed.
	held chan struct{}
}

func startSessionGateway(t *testing.T, maxPerToken int) *sessionGateway {
	t.Helper()
	g := &sessionGateway{clock: clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), held: make(chan struct{})}
	msg := &fakeMessenger{send: func(r messaging.SendRequest) (messaging.SendResult, error) {
		<-g.held
		return messaging.SendResult{Outcome: messaging.OutcomeReply, Text: "done", TurnID: "t1", Worker: r.To}, nil
	}}
	members := fakeMembers{"a": {ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, PaneID: "p1"}}}
	toks := fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a", PaneID: "p1"}}
	h, err := NewHandler(Options{Members: members, Tokens: toks, Loopback: true, Messages: msg,
		SessionTimeout: testSessionTimeout, MaxSessionsPerToken: maxPerToken, Clock: g.clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		select {
		case <-g.held:
		default:
			close(g.held)
		}
		srv.Close()
		h.Close()
	})
	g.url, g.table = srv.URL, h.s.sessions
	return g
}

// connect opens a session; with listen, the client also keeps its
// standalone event stream open, and connect returns once the gateway
// serves it.
func (g *sessionGateway) connect(t *testing.T, token string, listen bool) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: g.url + "/mcp",
		HTTPClient: &http.Client{Transport: tokenHeader{token, http.DefaultTransport}}, MaxRetries: -1, DisableStandaloneSSE: !listen}, nil)
	if err != nil {
		t.Fatalf("connect with %s: %v", token, err)
	}
	t.Cleanup(func() { s.Close() })
	want := 0
	if listen {
		want = 1
	}
	g.waitInFlight(t, s, want)
	return s
}

// waitInFlight waits until the gateway serves exactly n requests on s.
func (g *sessionGateway) waitInFlight(t *testing.T, s *sdk.ClientSession, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.table.waitFor(ctx, func(m map[string]*session) bool { return m[s.ID()] != nil && m[s.ID()].inFlight == n })
	if err != nil {
		t.Fatalf("session %s never had %d requests in flight", s.ID(), n)
	}
}

// alive reports whether s still works; an ended session answers 404.
func alive(t *testing.T, s *sdk.ClientSession) bool {
	t.Helper()
	_, err := s.ListTools(context.Background(), nil)
	if err != nil && !errors.Is(err, sdk.ErrSessionMissing) {
		t.Fatalf("tools/list: %v, want success or a missing session", err)
	}
	return err == nil
}

func TestSessions_IdleSessionsExpire(t *testing.T) {
	g := startSessionGateway(t, 0)
	s := g.connect(t, "primary-secret", false)

	g.clock.Step(testSessionTimeout - time.Second)
	if !alive(t, s) {
		t.Fatal("a session idle for less than the timeout was closed")
	}
	g.waitInFlight(t, s, 0)
	// The request above restarted the idle time.
	g.clock.Step(testSessionTimeout - time.Second)
	g.waitInFlight(t, s, 0)
	g.clock.Step(time.Second)
	g.table.settle()
	if alive(t, s) {
		t.Fatalf("a session idle for %v still works", testSessionTimeout)
	}
}

func TestSessions_ListeningOrHeldSessionsDoNotExpire(t *testing.T) {
	g := startSessionGateway(t, 0)
	listening := g.connect(t, "worker-secret", true)
	holding := g.connect(t, "primary-secret", false)
	sent := make(chan error, 1)
	go func() {
		res, err := holding.CallTool(context.Background(), &sdk.CallToolParams{Name: "bridge_send", Arguments: map[string]any{"content": "x", "sessionId": "a"}})
		if err == nil && res.IsError {
			err = errors.New("tool error")
		}
		sent <- err
	}()
	g.waitInFlight(t, holding, 1)

	g.clock.Step(3 * testSessionTimeout)
	close(g.held)
	if err := <-sent; err != nil {
		t.Fatalf("a call held past the session timeout: %v", err)
	}
	if !alive(t, holding) {
		t.Error("the session of a held call expired while it was held")
	}
	if !alive(t, listening) {
		t.Error("a session with its event stream open expired")
	}
}

func TestSessions_CappedPerTokenEvictingTheLeastRecentlyUsed(t *testing.T) {
	g := startSessionGateway(t, 2)
	worker := g.connect(t, "worker-secret", false)
	first := g.connect(t, "primary-secret", false)
	second := g.connect(t, "primary-secret", false)
	if !alive(t, first) { // now second is the least recently used
		t.Fatal("first session closed")
	}
	g.waitInFlight(t, first, 0)

	third := g.connect(t, "primary-secret", false)
	g.table.settle()
	if alive(t, second) {
		t.Error("the least recently used session survived a third one over the cap of 2")
	}
	for name, s := range map[string]*sdk.ClientSession{"first": first, "third": third, "the worker's": worker} {
		if !alive(t, s) {
			t.Errorf("%s session was closed", name)
		}
	}

	// A session its client ended frees its slot.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	g.connect(t, "primary-secret", false)
	if !alive(t, third) {
		t.Error("a session was evicted although a slot had been freed")
	}
}

func TestSessions_RefusedWhenEverySessionIsBusy(t *testing.T) {
	g := startSessionGateway(t, 1)
	busy := g.connect(t, "primary-secret", true) // its event stream is in flight

	req, _ := http.NewRequest("POST", g.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer primary-secret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpc struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &rpc); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		!strings.HasPrefix(rpc.Error.Message, "too_many_sessions: ") || !strings.Contains(rpc.Error.Message, "DELETE") {
		t.Fatalf("new session over the cap with none idle: %d %s, want 429 with a too_many_sessions JSON-RPC error", resp.StatusCode, body)
	}
	if !alive(t, busy) {
		t.Error("the busy session was cut")
	}
}

func TestSessions_NegativeBoundsRefused(t *testing.T) {
	for _, o := range []Options{{SessionTimeout: -time.Second}, {MaxSessionsPerToken: -1}} {
		o.Messages = &fakeMessenger{}
		if _, err := NewHandler(o); err == nil {
			t.Errorf("NewHandler(%+v) = nil error, want one naming the bound", o)
		}
	}
}
