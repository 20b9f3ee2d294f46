package simagent_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/simagent"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

// reply is one bridge_reply call as the gateway saw it.
type reply struct {
	Token   string
	Content string
}

type replyArgs struct {
	Content string `json:"content"`
	Final   *bool  `json:"final,omitempty"`
}

type replyResult struct {
	Delivered bool   `json:"delivered"`
	Mode      string `json:"mode"`
}

// gateway is an in-process Streamable HTTP MCP server with a bridge_reply
// tool that records its calls; requests without a known bearer token get
// 401, as fleetd's gateway answers them.
type gateway struct {
	url     string
	calls   chan reply
	refuse  bool          // answer every call with a tool error
	block   chan struct{} // when set, calls wait until it is closed
	entered chan struct{} // a blocked call has started
}

func newGateway(t *testing.T, tokens ...string) *gateway {
	t.Helper()
	g := &gateway{calls: make(chan reply, 10), entered: make(chan struct{}, 10)}
	server := mcp.NewServer(&mcp.Implementation{Name: "fake-fleetd", Version: "test"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "bridge_reply", Description: "reply to the primary"},
		func(ctx context.Context, req *mcp.CallToolRequest, in replyArgs) (*mcp.CallToolResult, replyResult, error) {
			if g.block != nil {
				g.entered <- struct{}{}
				select {
				case <-g.block:
				case <-ctx.Done():
					return nil, replyResult{}, ctx.Err()
				}
			}
			g.calls <- reply{Token: strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer "), Content: in.Content}
			if g.refuse {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "worker_gone: member deleted"}}}, replyResult{}, nil
			}
			return nil, replyResult{Delivered: true, Mode: "resolved"}, nil
		})
	known := map[string]bool{}
	for _, tok := range tokens {
		known["Bearer "+tok] = true
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !known[r.Header.Get("Authorization")] {
			http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		// A session its agent abandoned (simulated agents send nothing,
		// not even the DELETE, once closed) is the gateway's to end.
		for ss := range server.Sessions() {
			ss.Close()
		}
	})
	g.url = srv.URL + "/mcp"
	return g
}

// fleet is a simulated herdr whose agents answer through simagent.
type fleet struct {
	srv    *herdrsim.Server
	client *herdr.Client
	agents *simagent.Agents
	logs   *syncbuf.Buffer
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	logs := &syncbuf.Buffer{}
	agents := simagent.New(&simagent.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	srv, err := validated.Start(&herdrsim.Options{Behavior: agents.Behavior()})
	if err != nil {
		t.Fatal(err)
	}
	agents.Attach(srv)
	t.Cleanup(func() {
		agents.Close()
		srv.Close()
	})
	return &fleet{srv: srv, client: herdr.New(&herdr.Options{SocketPath: srv.SocketPath()}), agents: agents, logs: logs}
}

// startAgent opens a tab with env and starts a ready agent in it; it
// returns the pane id.
func (f *fleet) startAgent(t *testing.T, name string, env map[string]string) string {
	t.Helper()
	ctx := t.Context()
	ws, err := f.client.CreateWorkspace(ctx, herdr.WorkspaceCreateParams{Label: name, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	pane := ws.RootPane.PaneID
	if _, err := f.client.LaunchAgent(ctx, herdr.AgentStartParams{Name: name, Kind: "claude", PaneID: pane}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.WaitAgent(ctx, herdr.AgentWaitParams{Target: pane, Until: []herdr.AgentStatus{herdr.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	return pane
}

// prompt types text into the pane's agent and returns once the agent has
// worked on it and stopped (idle or done).
func (f *fleet) prompt(t *testing.T, pane, text string) herdr.AgentStatus {
	t.Helper()
	info, err := f.client.PromptAgent(t.Context(), herdr.AgentPromptParams{Target: pane, Text: text,
		Wait: &herdr.AgentPromptWait{Until: []herdr.AgentStatus{herdr.StatusIdle, herdr.StatusDone}}})
	if err != nil {
		t.Fatal(err)
	}
	return info.AgentStatus
}

func TestAgents_ReplyThroughGatewayWithOwnPaneToken(t *testing.T) {
	g := newGateway(t, "tok-reviewer", "tok-coder")
	f := newFleet(t)
	reviewer := f.startAgent(t, "reviewer", map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-reviewer"})
	coder := f.startAgent(t, "coder", map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-coder"})

	for _, tt := range []struct {
		pane, text string
		want       reply
	}{
		{reviewer, "hello", reply{Token: "tok-reviewer", Content: "echo: hello"}},
		{coder, "fix the build", reply{Token: "tok-coder", Content: "echo: fix the build"}},
		{reviewer, "again", reply{Token: "tok-reviewer", Content: "echo: again"}},
	} {
		if st := f.prompt(t, tt.pane, tt.text); st != herdr.StatusIdle && st != herdr.StatusDone {
			t.Errorf("after prompt %q the agent is %s, want idle or done", tt.text, st)
		}
		if diff := cmp.Diff(tt.want, <-g.calls); diff != "" {
			t.Errorf("bridge_reply for %q (-want +got):\n%s", tt.text, diff)
		}
		if st, _ := f.srv.Pane(tt.pane); !strings.Contains(st.Screen, tt.want.Content) {
			t.Errorf("screen of %s does not show %q:\n%s", tt.pane, tt.want.Content, st.Screen)
		}
	}
	if logs := f.logs.String(); logs != "" {
		t.Errorf("unexpected log lines:\n%s", logs)
	}
}

func TestAgents_FailuresAreLoggedAndTheTurnEnds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     func(g *gateway) map[string]string
		refuse  bool
		wantLog string
	}{
		{"unknown token", func(g *gateway) map[string]string {
			return map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-stolen"}
		}, false, "connect to gateway"},
		{"no fleetd environment", func(*gateway) map[string]string { return nil }, false, "not started by fleetd"},
		{"gateway unreachable", func(*gateway) map[string]string {
			return map[string]string{harness.URLEnv: "http://127.0.0.1:1/mcp", harness.TokenEnv: "tok-a"}
		}, false, "connect to gateway"},
		{"tool error", func(g *gateway) map[string]string {
			return map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-a"}
		}, true, "bridge_reply refused: worker_gone: member deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, "tok-a")
			g.refuse = tt.refuse
			f := newFleet(t)
			pane := f.startAgent(t, "w", tt.env(g))
			if st := f.prompt(t, pane, "hello"); st != herdr.StatusIdle && st != herdr.StatusDone {
				t.Errorf("agent is %s after a failed reply, want idle or done", st)
			}
			f.agents.Close() // waits for the prompt's goroutine, so its log line is written
			logs := f.logs.String()
			if !strings.Contains(logs, "simulated agent could not answer") || !strings.Contains(logs, tt.wantLog) {
				t.Errorf("log does not report %q:\n%s", tt.wantLog, logs)
			}
			if strings.Contains(logs, "tok-") {
				t.Errorf("log shows a token:\n%s", logs)
			}
		})
	}
}

func TestAgents_CloseCancelsAReplyInFlight(t *testing.T) {
	g := newGateway(t, "tok-a")
	// The gateway holds the call until the test ends: only Close's
	// cancellation can end the agent's side of it.
	g.block = make(chan struct{})
	t.Cleanup(func() { close(g.block) })
	f := newFleet(t)
	pane := f.startAgent(t, "w", map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-a"})
	if _, err := f.client.PromptAgent(t.Context(), herdr.AgentPromptParams{Target: pane, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	f.agents.Close() // returns only once the prompt's goroutine has ended
	if logs := f.logs.String(); !strings.Contains(logs, "context canceled") {
		t.Errorf("log does not show the cancelled reply:\n%s", logs)
	}
	if st, _ := f.srv.Pane(pane); st.Status != string(herdr.StatusIdle) && st.Status != string(herdr.StatusDone) {
		t.Errorf("agent is %s after Close, want idle or done", st.Status)
	}
	// A prompt after Close is ignored: no turn, nothing printed.
	f.agents.Behavior().OnPrompt(pane, "late")
	f.agents.Close() // would wait for a goroutine the late prompt started
	if st, _ := f.srv.Pane(pane); strings.Contains(st.Screen, "echo: late") || st.Status == string(herdr.StatusWorking) {
		t.Errorf("a prompt after Close was answered: status %s, screen:\n%s", st.Status, st.Screen)
	}
}

// A prompt "sleep N rest" is answered "echo: rest" once its turn ended.
func TestAgents_SleepPrefixAnswersTheRestWhenTheTurnEnds(t *testing.T) {
	g := newGateway(t, "tok-a")
	f := newFleet(t)
	pane := f.startAgent(t, "w", map[string]string{harness.URLEnv: g.url, harness.TokenEnv: "tok-a"})
	if st := f.prompt(t, pane, "sleep 20ms hello"); st != herdr.StatusIdle && st != herdr.StatusDone {
		t.Errorf("after the turn the agent is %s, want idle or done", st)
	}
	if diff := cmp.Diff(reply{Token: "tok-a", Content: "echo: hello"}, <-g.calls); diff != "" {
		t.Errorf("bridge_reply (-want +got):\n%s", diff)
	}
}
