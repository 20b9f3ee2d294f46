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

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/quota"
)

// toolError calls a tool and returns its error, or fails the test when the
// call succeeded.
func toolError(t *testing.T, s *sdk.ClientSession, tool string, args any) ToolError {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	var te ToolError
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &te)
	if !res.IsError {
		t.Fatalf("%s %v succeeded: %s; want a tool error", tool, args, b)
	}
	return te
}

// A negative or overflowing timeoutMs is refused where it enters, by every
// tool that takes one; it never becomes a wrapped duration.
func TestTools_TimeoutOutOfRangeIsInvalidArgument(t *testing.T) {
	msg := &fakeMessenger{send: func(r messaging.SendRequest) (messaging.SendResult, error) {
		return messaging.SendResult{Outcome: messaging.OutcomeTimeout, Worker: r.To}, nil
	}}
	srv, _ := startGateway(t, msg)
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := connect(t, srv.URL, "worker-secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []json.RawMessage{
		json.RawMessage(`-1`),
		json.RawMessage(`86400001`),            // a millisecond over 24 hours
		json.RawMessage(`9223372036854775807`), // fits int64, overflows a Duration
		json.RawMessage(`1e30`),                // overflows int64
	} {
		for _, tc := range []struct {
			sess *sdk.ClientSession
			tool string
			args map[string]any
		}{
			{primary, toolSend, map[string]any{"content": "x", "sessionId": "a"}},
			{worker, toolAsk, map[string]any{"content": "x"}},
			{primary, toolPoll, map[string]any{"wait": true}},
			{primary, toolSpawn, map[string]any{"profile": "claude"}},
			{primary, toolStop, map[string]any{"paneId": "a"}},
		} {
			tc.args["timeoutMs"] = bad
			if te := toolError(t, tc.sess, tc.tool, tc.args); te.Code != codeInvalidArgument || !strings.Contains(te.Message, "timeoutMs") {
				t.Errorf("%s timeoutMs=%s: %+v, want invalid_argument about timeoutMs", tc.tool, bad, te)
			}
		}
	}
	if len(msg.sends) != 0 || len(msg.polls) != 0 {
		t.Errorf("the core saw %d sends, %d polls with a bad timeout; want none", len(msg.sends), len(msg.polls))
	}
}

func TestTimeoutArg(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
		ok   bool
	}{
		{0, 0, true}, {1500, 1500 * time.Millisecond, true}, {MaxTimeout.Milliseconds(), MaxTimeout, true},
		{-1, 0, false}, {MaxTimeout.Milliseconds() + 1, 0, false}, {1 << 62, 0, false},
	} {
		got, err := timeoutArg(tc.ms)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("timeoutArg(%d) = %v, %v; want %v, ok %v", tc.ms, got, err, tc.want, tc.ok)
		}
	}
}

// Each token has its own bucket of tool calls; a call over it fails at once
// with rate_limited, saying when to retry, and is counted.
func TestGateway_RateLimitsToolCallsPerToken(t *testing.T) {
	srv, reg := startGatewayWith(t, &fakeMessenger{}, func(o *Options) { o.ToolCallRate, o.ToolCallBurst = 0.001, 3 })
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if res, err := primary.CallTool(ctx, &sdk.CallToolParams{Name: toolWhoami}); err != nil || res.IsError {
			t.Fatalf("call %d within the burst: %v %+v", i, err, res)
		}
	}
	te := toolError(t, primary, toolStatus, map[string]any{})
	if te.Code != codeRateLimited || !strings.Contains(te.Message, "bursts of 3") || !strings.Contains(te.Message, "retry in") {
		t.Fatalf("call over the burst: %+v, want rate_limited naming the limit and when to retry", te)
	}
	// Another token is not slowed by the primary's calls; a second session
	// of the same token is.
	worker, err := connect(t, srv.URL, "worker-secret")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := worker.CallTool(ctx, &sdk.CallToolParams{Name: toolWhoami}); err != nil || res.IsError {
		t.Fatalf("another token's call: %v %+v", err, res)
	}
	again, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	if te := toolError(t, again, toolWhoami, map[string]any{}); te.Code != codeRateLimited {
		t.Fatalf("a new session of a limited token: %+v, want rate_limited", te)
	}
	if got := counterValue(t, reg, toolStatus, codeRateLimited); got != 1 {
		t.Errorf("fleetd_mcp_tool_calls_total{tool=bridge_status,outcome=rate_limited} = %v, want 1", got)
	}
}

func TestCallerLimits_DefaultsAndRefill(t *testing.T) {
	if newCallerLimits(-1, 0) != nil {
		t.Error("a negative rate must turn the limit off")
	}
	l := newCallerLimits(0, 0)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range DefaultToolCallBurst {
		if te := l.allow("k"); te != nil {
			t.Fatalf("call %d within the default burst: %v", i, te)
		}
	}
	if l.allow("k") == nil {
		t.Fatalf("call %d passed; the default burst is %d", DefaultToolCallBurst+1, DefaultToolCallBurst)
	}
	now = now.Add(time.Second)
	for i := range int(DefaultToolCallRate) {
		if te := l.allow("k"); te != nil {
			t.Fatalf("call %d a second later: %v; the default rate is %v per second", i, te, DefaultToolCallRate)
		}
	}
	if l.allow("k") == nil {
		t.Fatal("more calls than the rate refilled passed")
	}
}

// bridge_poll passes limit and cursor to the core, returns the page with
// its cursor, and sends each content once: in the structured result, not
// again in the text block.
func TestGateway_PollReturnsAPageAndEachContentOnce(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	msg := &fakeMessenger{page: messaging.PollPage{
		Messages: []messaging.Message{
			{ID: "m-1", From: "a", Kind: messaging.KindReply, Content: "CONTENT-ONE", TurnID: "t-1", CreatedAt: at},
			{ID: "m-2", From: PrimaryName, Kind: messaging.KindAnswer, Content: "CONTENT-TWO", CreatedAt: at},
		},
		Next: "c7", More: 5,
	}}
	srv, _ := startGateway(t, msg)
	primary, err := connect(t, srv.URL, "primary-secret")
	if err != nil {
		t.Fatal(err)
	}
	res, err := primary.CallTool(context.Background(), &sdk.CallToolParams{Name: toolPoll, Arguments: map[string]any{"limit": 2, "cursor": "c3"}})
	if err != nil || res.IsError {
		t.Fatalf("poll: %v %+v", err, res)
	}
	var out PollOutput
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	want := PollOutput{Messages: []MessageView{
		{ID: "m-1", From: "a", Kind: "reply", Content: "CONTENT-ONE", TurnID: "t-1", CreatedAt: "2026-12-01T10:00:00Z"},
		{ID: "m-2", From: "primary", Kind: "answer", Content: "CONTENT-TWO", CreatedAt: "2026-12-01T10:00:00Z"},
	}, NextCursor: "c7", More: 5}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("poll (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]messaging.PollRequest{{Cursor: "c3", Limit: 2, Timeout: 0}}, msg.polls); diff != "" {
		t.Errorf("core got (-want +got):\n%s", diff)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks, want one summary", len(res.Content))
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if strings.Contains(text, "CONTENT-") || !strings.Contains(text, "m-1, m-2") || !strings.Contains(text, "cursor c7") {
		t.Errorf("text block %q: want the ids and the next cursor, never a content again", text)
	}
	for _, limit := range []int{-1, maxPollLimit + 1} {
		if te := toolError(t, primary, toolPoll, map[string]any{"limit": limit}); te.Code != codeInvalidArgument {
			t.Errorf("limit %d: %+v, want invalid_argument", limit, te)
		}
	}
}

// holdingMessenger is fakeMessenger whose polls with wait hold until their
// request ends or the test wakes one of the recipient's, reporting each on
// entered.
type holdingMessenger struct {
	fakeMessenger
	entered chan string
	wake    map[string]chan struct{} // by recipient
}

func (h *holdingMessenger) PollPage(ctx context.Context, recipient string, r messaging.PollRequest) (messaging.PollPage, error) {
	if r.Wait {
		h.entered <- recipient
		select {
		case <-ctx.Done():
			return messaging.PollPage{}, ctx.Err()
		case <-h.wake[recipient]:
		}
	}
	return messaging.PollPage{}, nil
}

// Calls held open are bounded per worker token and for the workers
// together, a share kept for the primary: past a bound a held call is
// refused at once with too_many_waiters (429), over REST and MCP alike,
// and a slot given back is taken again.
func TestHeldCalls_BoundedPerWorkerTokenWithThePrimarysShareKept(t *testing.T) {
	msg := &holdingMessenger{entered: make(chan string, 8), wake: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), PrimaryName: make(chan struct{})}}
	holds, err := quota.New(quota.Limits{PerCaller: 2, Total: 4, Reserved: 1}) // the workers: 3
	if err != nil {
		t.Fatal(err)
	}
	toks := fakeTokens{"primary-secret": {Role: "primary"}, "a-secret": {Role: "worker", Member: "a"}, "b-secret": {Role: "worker", Member: "b"}}
	h, err := NewHandler(Options{Members: fakeMembers{}, Tokens: toks, Messages: msg, Holds: holds})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() }) // after the session's own cleanup

	answered := make(chan int, 8) // the statuses of held calls that ended
	hold := func(token string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/inbox?wait=true", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		<-msg.entered
	}
	// end wakes one held call of recipient and waits for its answer: its
	// slot is given back before the answer is sent.
	end := func(recipient string) {
		t.Helper()
		msg.wake[recipient] <- struct{}{}
		if code := <-answered; code != http.StatusOK {
			t.Fatalf("a held call that ended: %d, want 200", code)
		}
	}
	refused := func(token, want string) {
		t.Helper()
		code, body := do(t, "GET", srv.URL+"/inbox?wait=true", token, "")
		if code != http.StatusTooManyRequests || !strings.Contains(body, `"too_many_waiters"`) || !strings.Contains(body, want) {
			t.Fatalf("a held call over the bound: %d %s, want 429 too_many_waiters saying %q", code, body, want)
		}
	}
	hold("a-secret")
	hold("a-secret")
	refused("a-secret", "the most one worker may")
	if code, _ := do(t, "GET", srv.URL+"/inbox", "a-secret", ""); code != http.StatusOK {
		t.Errorf("a poll that does not wait, at the bound: %d, want 200", code)
	}
	hold("b-secret")
	refused("b-secret", "the rest is the primary's") // the workers hold 3
	hold("primary-secret")                           // the primary's share
	refused("primary-secret", "the most this fleetd's listener carries")

	// Over MCP the same bound refuses a held tool call (bridge_poll with
	// wait), and lets one that does not wait through.
	cs, err := connectWithoutStream(t, srv.URL, "a-secret")
	if err != nil {
		t.Fatal(err)
	}
	if te := toolError(t, cs, "bridge_poll", map[string]any{"wait": true}); te.Code != "too_many_waiters" {
		t.Errorf("bridge_poll with wait over the bound: %+v, want too_many_waiters", te)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "bridge_poll", Arguments: map[string]any{}}); err != nil {
		t.Errorf("bridge_poll without wait over the bound: %v", err)
	}

	end("a")
	hold("a-secret") // a slot given back is taken again
	for _, r := range []string{"a", "a", "b", PrimaryName} {
		end(r)
	}
}

// connectWithoutStream opens an MCP session that opens no event stream of
// its own (GET /mcp), which would take a held-call slot.
func connectWithoutStream(t *testing.T, url, token string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: tokenHeader{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestHeldTool_TheCallsThatWaitForAnOutcome(t *testing.T) {
	for _, tt := range []struct {
		tool, args string
		held       bool
	}{
		{toolAsk, `{"content":"?"}`, true},
		{toolSend, `{"content":"x"}`, true}, // wait defaults to true
		{toolSend, `{"content":"x","wait":false}`, false},
		{toolPoll, `{}`, false},
		{toolPoll, `{"wait":true}`, true},
		{toolStatus, `{}`, false},
		{toolSend, `not json`, true},
	} {
		if got := heldTool(tt.tool, json.RawMessage(tt.args)); got != tt.held {
			t.Errorf("heldTool(%s, %s) = %v, want %v", tt.tool, tt.args, got, tt.held)
		}
	}
}
