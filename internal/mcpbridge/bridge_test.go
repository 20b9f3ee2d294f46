package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
)

const goodToken = "tok-0123456789abcdef-secret"

// gateway is an in-process go-sdk Streamable HTTP server behind a bearer
// check, standing in for fleetd's gateway.
type gateway struct {
	server *mcp.Server
	srv    *httptest.Server

	mu       sync.Mutex
	requests []seenRequest // every request that passed the bearer check

	streamOpen chan struct{} // closed when the standalone GET stream is served
	openOnce   sync.Once
}

type seenRequest struct {
	method, mcpMethod, protocolVersion string
}

func newGateway(t *testing.T, token string) *gateway {
	t.Helper()
	g := &gateway{
		server:     mcp.NewServer(&mcp.Implementation{Name: "gateway", Version: "test"}, nil),
		streamOpen: make(chan struct{}),
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, nil)
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var rpc struct {
			Method string `json:"method"`
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			json.Unmarshal(body, &rpc) // a batch or response has no method; that is fine
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		g.mu.Lock()
		g.requests = append(g.requests, seenRequest{r.Method, rpc.Method, r.Header.Get("Mcp-Protocol-Version")})
		g.mu.Unlock()
		if r.Method == http.MethodGet {
			w = &headerSignal{ResponseWriter: w, signal: func() { g.openOnce.Do(func() { close(g.streamOpen) }) }}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gateway) url() string { return g.srv.URL + "/mcp" }

func (g *gateway) seen() []seenRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]seenRequest(nil), g.requests...)
}

// headerSignal reports when the handler commits the response headers of the
// standalone stream, i.e. when the stream is about to be registered.
type headerSignal struct {
	http.ResponseWriter
	signal func()
}

func (h *headerSignal) WriteHeader(code int) {
	h.ResponseWriter.WriteHeader(code)
	if code == http.StatusOK {
		h.signal()
	}
}

func (h *headerSignal) Flush() { h.ResponseWriter.(http.Flusher).Flush() }

func (h *headerSignal) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// bridge runs mcpbridge.Run on a pair of pipes; clientTransport is the
// harness's end of them.
type bridge struct {
	clientTransport mcp.Transport
	done            chan error
	stdinWriter     *io.PipeWriter
}

func startBridge(t *testing.T, opts mcpbridge.Options) *bridge {
	t.Helper()
	inR, inW := io.Pipe()   // harness → bridge (the bridge's stdin)
	outR, outW := io.Pipe() // bridge → harness (the bridge's stdout)
	b := &bridge{
		clientTransport: &mcp.IOTransport{Reader: outR, Writer: inW},
		done:            make(chan error, 1),
		stdinWriter:     inW,
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		b.done <- mcpbridge.Run(ctx, inR, outW, opts)
		outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
		// Run ends the gateway session (DELETE) on its way out; the
		// gateway must still be serving then, or the session would
		// outlive the test.
		<-exited
	})
	return b
}

// wait returns Run's result, failing the test if Run does not end.
func (b *bridge) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-b.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("mcpbridge.Run did not return")
		return nil
	}
}

// legacyInitialize makes the harness open with initialize, as today's
// harnesses do, instead of the go-sdk's server/discover probe.
var legacyInitialize = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// connect starts a go-sdk client session through the bridge.
func connect(t *testing.T, b *bridge, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "test"}, opts)
	cs, err := client.Connect(context.Background(), b.clientTransport, nil)
	if err != nil {
		t.Fatalf("connect through the bridge: %v", err)
	}
	return cs
}

type echoArgs struct {
	Text string `json:"text"`
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool returned an error: %+v", res.Content)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestRun_RelaysToolCallAndExitsWhenStdinCloses(t *testing.T) {
	g := newGateway(t, goodToken)
	mcp.AddTool(g.server, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	b := startBridge(t, mcpbridge.Options{URL: g.url(), Token: goodToken})
	cs := connect(t, b, nil)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("ListTools = %+v, want the gateway's echo tool", tools.Tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got, want := textOf(t, res), "echo: hello"; got != want {
		t.Errorf("tool result = %q, want %q", got, want)
	}

	// The harness going away closes the bridge's stdin.
	if err := cs.Close(); err != nil {
		t.Fatalf("close client session: %v", err)
	}
	if err := b.wait(t); err != nil {
		t.Fatalf("Run after stdin closed = %v, want nil", err)
	}

	// After initialize, every request to the gateway named the negotiated
	// protocol version, and the session was ended with a DELETE.
	seen := g.seen()
	var version string
	for _, r := range seen {
		if r.method == http.MethodPost && r.mcpMethod == "tools/call" {
			version = r.protocolVersion
		}
	}
	if version == "" {
		t.Errorf("tools/call reached the gateway without Mcp-Protocol-Version; requests: %+v", seen)
	}
	if last := seen[len(seen)-1]; last.method != http.MethodDelete {
		t.Errorf("last request to the gateway = %s, want DELETE (end of session)", last.method)
	}
}

func TestRun_RelaysServerRequestDuringToolCall(t *testing.T) {
	g := newGateway(t, goodToken)
	mcp.AddTool(g.server, &mcp.Tool{Name: "ask-user"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		answer, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: "which config?",
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"file": map[string]any{"type": "string"}},
			},
		})
		if err != nil {
			return nil, nil, fmt.Errorf("elicit: %w", err)
		}
		text := fmt.Sprintf("%s %v", answer.Action, answer.Content["file"])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	b := startBridge(t, mcpbridge.Options{URL: g.url(), Token: goodToken})
	cs := connect(t, b, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Message != "which config?" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"file": "config.yaml"}}, nil
		},
	})
	defer cs.Close()

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user"})
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got, want := textOf(t, res), "accept config.yaml"; got != want {
		t.Errorf("tool result = %q, want %q", got, want)
	}
}

func TestRun_RelaysProgressNotifications(t *testing.T) {
	g := newGateway(t, goodToken)
	mcp.AddTool(g.server, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
			}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	b := startBridge(t, mcpbridge.Options{URL: g.url(), Token: goodToken})
	progress := make(chan string, 10)
	cs := connect(t, b, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- fmt.Sprintf("%v %v/%v %s", req.Params.ProgressToken, req.Params.Progress, req.Params.Total, req.Params.Message)
		},
	})
	defer cs.Close()

	params := &mcp.CallToolParams{Name: "slow"}
	params.SetProgressToken("p-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := textOf(t, res); got != "done" {
		t.Errorf("tool result = %q, want done", got)
	}
	var got []string
	for range 3 {
		select {
		case p := <-progress:
			got = append(got, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d progress notifications, want 3: %q", len(got), got)
		}
	}
	want := []string{"p-1 1/3 step 1", "p-1 2/3 step 2", "p-1 3/3 step 3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress notifications (-want +got):\n%s", diff)
	}
}

func TestRun_RelaysMessagesOutsideAnyRequest(t *testing.T) {
	g := newGateway(t, goodToken)
	mcp.AddTool(g.server, &mcp.Tool{Name: "first"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	b := startBridge(t, mcpbridge.Options{URL: g.url(), Token: goodToken})
	changed := make(chan struct{}, 10)
	cs := connect(t, b, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	defer cs.Close()

	select {
	case <-g.streamOpen:
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge never opened the standalone stream")
	}
	// A tool appearing later is announced on the standalone stream only.
	mcp.AddTool(g.server, &mcp.Tool{Name: "second"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("notifications/tools/list_changed never reached the harness")
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools.Tools) != 2 {
		t.Errorf("ListTools after the change = %d tools, want 2", len(tools.Tools))
	}
}

func TestRun_GatewayRefusesToken(t *testing.T) {
	g := newGateway(t, goodToken)
	const wrong = "wrong-token-value-xyz"
	b := startBridge(t, mcpbridge.Options{URL: g.url(), Token: wrong, TokenEnv: "FLEETD_TOKEN"})

	client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "test"}, nil)
	_, connErr := client.Connect(context.Background(), b.clientTransport, legacyInitialize)
	if connErr == nil {
		t.Fatal("connect with a refused token succeeded")
	}
	err := b.wait(t)
	if !errors.Is(err, mcpbridge.ErrTokenRefused) {
		t.Fatalf("Run = %v, want ErrTokenRefused", err)
	}
	for _, msg := range []string{err.Error(), connErr.Error()} {
		if !strings.Contains(msg, "refused the token in $FLEETD_TOKEN") {
			t.Errorf("error %q does not say the token in $FLEETD_TOKEN was refused", msg)
		}
		if strings.Contains(msg, wrong) {
			t.Errorf("error %q contains the token", msg)
		}
	}
}

func TestRun_GatewayUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/mcp"
	srv.Close() // nothing listens there any more

	b := startBridge(t, mcpbridge.Options{URL: url, Token: goodToken})
	client := mcp.NewClient(&mcp.Implementation{Name: "harness", Version: "test"}, nil)
	_, connErr := client.Connect(context.Background(), b.clientTransport, legacyInitialize)
	if connErr == nil {
		t.Fatal("connect to an unreachable gateway succeeded")
	}
	err := b.wait(t)
	if !errors.Is(err, mcpbridge.ErrUnreachable) {
		t.Fatalf("Run = %v, want ErrUnreachable", err)
	}
	for _, msg := range []string{err.Error(), connErr.Error()} {
		if !strings.Contains(msg, "cannot reach the gateway at "+url) {
			t.Errorf("error %q does not say the gateway at %s is unreachable", msg, url)
		}
	}
	if strings.Contains(err.Error(), goodToken) || strings.Contains(connErr.Error(), goodToken) {
		t.Errorf("error contains the token: %v / %v", err, connErr)
	}
}

func TestRun_EmptyStdinExitsWithoutContactingGateway(t *testing.T) {
	g := newGateway(t, goodToken)
	if err := mcpbridge.Run(context.Background(), strings.NewReader(""), io.Discard, mcpbridge.Options{URL: g.url(), Token: goodToken}); err != nil {
		t.Fatalf("Run on empty stdin = %v, want nil", err)
	}
	if seen := g.seen(); len(seen) != 0 {
		t.Errorf("the gateway saw %+v, want nothing", seen)
	}
}

func TestRun_CancelledContextStops(t *testing.T) {
	g := newGateway(t, goodToken)
	inR, inW := io.Pipe()
	defer inW.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mcpbridge.Run(ctx, inR, io.Discard, mcpbridge.Options{URL: g.url(), Token: goodToken}) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestRun_RejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts mcpbridge.Options
		want string
	}{
		{"no token", mcpbridge.Options{URL: "http://127.0.0.1:8080/mcp", TokenEnv: "MY_TOKEN"}, "$MY_TOKEN is empty or unset"},
		{"relative URL", mcpbridge.Options{URL: "/mcp", Token: goodToken}, "want an absolute http:// or https:// URL"},
		{"other scheme", mcpbridge.Options{URL: "ftp://example.com/mcp", Token: goodToken}, "want an absolute http:// or https:// URL"},
		{"user info", mcpbridge.Options{URL: "http://u:p@127.0.0.1/mcp", Token: goodToken}, "must not carry user info"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mcpbridge.Run(context.Background(), strings.NewReader(""), io.Discard, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestRun_AnswersACallInFlightWhenStdinCloses: a script that writes its
// requests and closes stdin at once (`printf … | fleetd mcp-bridge`) gets
// the answer to its call before the bridge exits.
func TestRun_AnswersACallInFlightWhenStdinCloses(t *testing.T) {
	g := newGateway(t, goodToken)
	release := make(chan struct{})
	called := make(chan struct{})
	mcp.AddTool(g.server, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		close(called)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done: " + in.Text}}}, nil, nil
	})
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"text":"hi"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer // read only once Run has returned
	done := make(chan error, 1)
	go func() {
		done <- mcpbridge.Run(context.Background(), strings.NewReader(input), &out, mcpbridge.Options{URL: g.url(), Token: goodToken})
	}()
	select {
	case <-called:
	case err := <-done:
		t.Fatalf("Run returned %v before the call reached the gateway; stdout:\n%s", err, out.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the gateway")
	}
	// stdin is exhausted by now; the answer is still owed.
	select {
	case err := <-done:
		t.Fatalf("Run returned %v with a call in flight; stdout:\n%s", err, out.String())
	default:
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the last answer")
	}
	// The answers come in the order the gateway connection delivers them,
	// one goroutine per POST (the SDK's): the answer to initialize may
	// come after it.
	type answer struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Text string }
		}
	}
	var got *answer
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("a line on stdout is not JSON-RPC: %q: %v", line, err)
		}
		if a.ID == 2 {
			got = &a
		}
	}
	if got == nil || len(got.Result.Content) != 1 || got.Result.Content[0].Text != "done: hi" {
		t.Errorf("the answer to call 2 = %+v, want its result; stdout:\n%s", got, out.String())
	}
}
