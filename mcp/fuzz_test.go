package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// toolArgSeeds are well-formed and malformed arguments for every tool.
var toolArgSeeds = map[string][]string{
	toolSend: {`{"content":"do X","sessionId":"a"}`, `{"content":"x","wait":false}`, `{"content":"x","turnId":"t-1","timeoutMs":-5}`,
		`{"content":5}`, `{"content":"x","timeoutMs":1e309}`, `{"content":"x","profile":{"env":{"ANTHROPIC_BASE_URL":"http://evil"}}}`},
	toolReply: {`{"content":"done"}`, `{"content":"half","final":false}`, `{"content":null}`, `{}`},
	toolAsk:   {`{"content":"which config?","timeoutMs":1000}`, `{"content":"","timeoutMs":"soon"}`},
	toolPoll: {`{}`, `{"wait":true,"timeoutMs":1}`, `{"wait":"yes"}`, `{"limit":1000,"cursor":"c12"}`, `{"limit":-3,"cursor":"c-1"}`,
		`{"cursor":"c18446744073709551616","timeoutMs":86400001}`},
	toolAck:      {`{"ids":["m-1","m-2"]}`, `{"ids":"m-1"}`, `{"ids":[1,{"a":[]}]}`},
	toolStatus:   {`{}`, `{"sessionId":"b"}`, `{"sessionId":["a"]}`},
	toolSpawn:    {`{"profile":"codex-fast","name":"rev"}`, `{"profile":"p","env":{"ANTHROPIC_BASE_URL":"x"}}`, `{"profile":"p","mcpTarget":{"kind":"tenant"},"transport":"http"}`, `{"profile":"p","name":"UPPER","spec":{"command":["sh"]}}`},
	toolList:     {`{}`, `{"x":1}`},
	toolStop:     {`{"paneId":"p1"}`, `{"paneId":"","wait":false,"timeoutMs":0}`, `{"paneId":7}`},
	toolProfiles: {`{}`},
	toolWhoami:   {`{}`, `[]`},
}

// fuzzCallers connects the primary and a worker to a gateway over fakes.
func fuzzCallers(f *testing.F) []*sdk.ClientSession {
	f.Helper()
	members := fakeMembers{
		"a": {ObjectMeta: v1alpha1.ObjectMeta{Name: "a"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, SessionID: "sess-a", PaneID: "p1"}},
		"b": {ObjectMeta: v1alpha1.ObjectMeta{Name: "b"}, Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, SessionID: "sess-b", PaneID: "p2"}},
	}
	toks := fakeTokens{"primary-secret": {Role: "primary"}, "worker-secret": {Role: "worker", Member: "a", PaneID: "p1"}}
	msg := &fakeMessenger{send: func(r messaging.SendRequest) (messaging.SendResult, error) {
		return messaging.SendResult{Outcome: messaging.OutcomeReply, Text: "ok", TurnID: "t-1", Worker: r.To}, nil
	}}
	// No rate limit: the fuzzer's thousands of calls are about the
	// arguments, not the limiter.
	h, err := NewHandler(Options{Members: members, Tokens: toks, Loopback: true, Messages: msg, ToolCallRate: -1})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(h)
	f.Cleanup(srv.Close)
	var out []*sdk.ClientSession
	for _, token := range []string{"primary-secret", "worker-secret"} {
		c := sdk.NewClient(&sdk.Implementation{Name: "fuzz", Version: "1"}, nil)
		s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
			HTTPClient: &http.Client{Transport: tokenHeader{token, http.DefaultTransport}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// FuzzToolArguments sends arbitrary JSON arguments to each bridge_* tool,
// as the primary and as a worker, through the whole gateway (HTTP, the
// SDK's schema validation, each tool's own decoding, the subscription guard
// of bridge_spawn). Every call must come back — a result, a tool error with
// a message, or a protocol error — never a panic or a hang, and the session
// must stay usable afterwards.
func FuzzToolArguments(f *testing.F) {
	for i, name := range toolNames {
		for _, args := range toolArgSeeds[name] {
			f.Add(uint8(i), []byte(args))
			f.Add(uint8(i+len(toolNames)), []byte(args)) // the same as the worker
		}
	}
	callers := fuzzCallers(f)
	f.Fuzz(func(t *testing.T, pick uint8, args []byte) {
		if !json.Valid(args) {
			return // not a JSON-RPC message at all; the transport's business
		}
		tool := toolNames[int(pick)%len(toolNames)]
		s := callers[int(pick)/len(toolNames)%len(callers)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if ctx.Err() != nil {
			t.Fatalf("%s(%s) did not return", tool, args)
		}
		if err == nil && res.IsError {
			text := ""
			for _, c := range res.Content {
				if tc, ok := c.(*sdk.TextContent); ok {
					text += tc.Text
				}
			}
			if text == "" {
				t.Fatalf("%s(%s): tool error without a message", tool, args)
			}
		}
		if _, err := s.CallTool(ctx, &sdk.CallToolParams{Name: toolWhoami}); err != nil {
			t.Fatalf("session unusable after %s(%s): %v", tool, args, err)
		}
	})
}

// FuzzSpawnDecoding feeds arbitrary bridge_spawn argument objects and POST
// /members bodies to their decoders: no panic, and whatever they accept is
// a member that passes validation.
func FuzzSpawnDecoding(f *testing.F) {
	for _, args := range toolArgSeeds[toolSpawn] {
		f.Add([]byte(args))
	}
	f.Add([]byte(`{"apiVersion":"fleetd.dev/v1alpha1","kind":"Member","metadata":{"name":"rev"},"spec":{"profile":"p"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(how string, sr spawnRequest, err error) {
			if err != nil {
				return
			}
			if sr.member == nil {
				t.Fatalf("%s accepted %s without a member", how, body)
			}
			if errs := sr.member.Validate(); len(errs) > 0 {
				t.Fatalf("%s accepted an invalid member from %s: %v", how, body, errs)
			}
		}
		sr, err := decodeSpawnArgs(body)
		check("decodeSpawnArgs", sr, err)
		sr, err = decodeMemberBody(body)
		check("decodeMemberBody", sr, err)
	})
}
