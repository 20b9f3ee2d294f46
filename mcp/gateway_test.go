package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// fakeMessenger answers Send from a script and records who called.
type fakeMessenger struct {
	sends []messaging.SendRequest
	send  func(messaging.SendRequest) (messaging.SendResult, error)
	polls []messaging.PollRequest
	page  messaging.PollPage
}

func (f *fakeMessenger) Send(_ context.Context, r messaging.SendRequest) (messaging.SendResult, error) {
	f.sends = append(f.sends, r)
	return f.send(r)
}
func (f *fakeMessenger) Reply(_ context.Context, w, _ string, _ bool) (messaging.ReplyResult, error) {
	return messaging.ReplyResult{Mode: messaging.ReplyQueued, TurnID: "t-" + w}, nil
}
func (f *fakeMessenger) Ask(context.Context, string, string, time.Duration) (messaging.AskResult, error) {
	return messaging.AskResult{Outcome: messaging.OutcomeTimeout}, nil
}
func (f *fakeMessenger) PollPage(_ context.Context, _ string, r messaging.PollRequest) (messaging.PollPage, error) {
	f.polls = append(f.polls, r)
	return f.page, nil
}
func (f *fakeMessenger) Ack(string, []string) (int, error) { return 0, nil }
func (f *fakeMessenger) Pending(string) int                { return 0 }
func (f *fakeMessenger) Status(name string) messaging.WorkerStatus {
	return messaging.WorkerStatus{Worker: name, AgentStatus: "unknown"}
}

type tokenHeader struct {
	token string
	next  http.RoundTripper
}

func (t tokenHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if t.token != "" {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.next.RoundTrip(r)
}

func startGateway(t *testing.T, msg Messenger) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	return startGatewayWith(t, msg, nil)
}

// startGatewayWith is startGateway with tune applied to the handler's
// options.
func startGatewayWith(t *testing.T, msg Messenger, tune func(*Options)) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	members := fakeMembers{
		"a": {ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, SessionID: "sess-a", PaneID: "p1"}},
		"b": {ObjectMeta: v1alpha1.ObjectMeta{Name: "b"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, SessionID: "sess-b", PaneID: "p2"}},
	}
	toks := fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a", PaneID: "p1"}}
	reg := prometheus.NewRegistry()
	opts := Options{Members: members, Tokens: toks, Loopback: true, Messages: msg, Registerer: reg}
	if tune != nil {
		tune(&opts)
	}
	h, err := NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, reg
}

func connect(t *testing.T, url, token string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: tokenHeader{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestGateway_AuthenticatesAndBindsSessions(t *testing.T) {
	srv, _ := startGateway(t, &fakeMessenger{})
	for _, token := range []string{"", "wrong"} {
		if _, err := connect(t, srv.URL, token); err == nil {
			t.Errorf("token %q: connected, want refused", token)
		}
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body APIError
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %+v, want 401 unauthorized with WWW-Authenticate", token, resp.StatusCode, body)
		}
	}
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	// The primary's session, presented with the worker's token.
	req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer worker-secret")
	req.Header.Set("Mcp-Session-Id", primary.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("session switched to another token: %d, want 403", resp.StatusCode)
	}
}

func TestGateway_ToolErrorsCarryCodesAndAreCounted(t *testing.T) {
	msg := &fakeMessenger{send: func(r messaging.SendRequest) (messaging.SendResult, error) {
		if r.To == "b" {
			return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeWorkerGone, Msg: "b is gone: pane closed"}
		}
		return messaging.SendResult{Outcome: messaging.OutcomeReply, Text: "done", TurnID: "t1", Worker: r.To}, nil
	}}
	srv, reg := startGateway(t, msg)
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := connect(t, srv.URL, "worker-secret")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	res, err := primary.CallTool(ctx, &sdk.CallToolParams{Name: "bridge_send", Arguments: map[string]any{"content": "x", "sessionId": "sess-a"}})
	if err != nil || res.IsError {
		t.Fatalf("send: %v %+v", err, res)
	}
	var out SendOutput
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if diff := cmp.Diff(SendOutput{Outcome: "reply", Text: "done", TurnID: "t1", Name: "a", SessionID: "sess-a"}, out); diff != "" {
		t.Errorf("send (-want +got):\n%s", diff)
	}
	want := []messaging.SendRequest{{From: PrimaryName, To: "a", Content: "x", Wait: true, Timeout: 600 * time.Second}}
	if diff := cmp.Diff(want, msg.sends); diff != "" {
		t.Errorf("core got (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		sess     *sdk.ClientSession
		tool     string
		args     map[string]any
		wantCode string
	}{
		{primary, "bridge_send", map[string]any{"content": "x", "sessionId": "p2"}, "worker_gone"},
		{primary, "bridge_send", map[string]any{"content": "x"}, "invalid_argument"}, // two workers: sessionId required
		{worker, "bridge_send", map[string]any{"content": "x", "sessionId": "b"}, "forbidden"},
		{primary, "bridge_reply", map[string]any{"content": "x"}, "forbidden"},
		{primary, "bridge_spawn", map[string]any{"profile": "claude"}, "unavailable"}, // no store configured
	} {
		res, err := tc.sess.CallTool(ctx, &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		var te ToolError
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &te)
		text := res.Content[0].(*sdk.TextContent).Text
		if !res.IsError || te.Code != tc.wantCode || text != te.Code+": "+te.Message {
			t.Errorf("%s %v = %+v %q, want a %s tool error", tc.tool, tc.args, te, text, tc.wantCode)
		}
	}
	for _, c := range []struct {
		tool, outcome string
		n             float64
	}{{"bridge_send", "ok", 1}, {"bridge_send", "worker_gone", 1}, {"bridge_send", "forbidden", 1}, {"bridge_reply", "forbidden", 1}, {"bridge_ask", "ok", 0}} {
		if got := counterValue(t, reg, c.tool, c.outcome); got != c.n {
			t.Errorf("fleetd_mcp_tool_calls_total{tool=%s,outcome=%s} = %v, want %v", c.tool, c.outcome, got, c.n)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// TestGateway_SpawnJudgesRawArguments: bridge_spawn's guard reads the
// arguments as the client sent them, so a duplicate key cannot hide a value
// from it and is refused itself.
func TestGateway_SpawnJudgesRawArguments(t *testing.T) {
	srv, _ := startGateway(t, &fakeMessenger{})
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, wantCode string }{
		{`{"profile":"claude","workspace":"${ANTHROPIC_BASE_URL}","workspace":"api"}`, "subscription_boundary"},
		{`{"profile":"claude","workspace":"api","workspace":"ops"}`, "invalid_spec"},
		{`{"profile":"claude","workspace":"api"}`, "unavailable"}, // passes; no store configured
	} {
		res, err := primary.CallTool(context.Background(), &sdk.CallToolParams{Name: toolSpawn, Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		var te ToolError
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &te)
		if !res.IsError || te.Code != tc.wantCode {
			t.Errorf("bridge_spawn %s = %+v, want a %s tool error", tc.args, te, tc.wantCode)
		}
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, tool, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fleetd_mcp_tool_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
