package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/mcp"
)

// mcpFleetd imitates fleetd's gateway for `fleetd send`: a Streamable HTTP
// MCP server at /mcp whose bridge_send answers by content and records its
// arguments; requests without the primary token get 401.
type mcpFleetd struct {
	url      string
	stateDir string
	calls    chan mcp.SendInput
}

// sendAnswers maps a bridge_send content to the tool's outcome; a
// *mcp.ToolError becomes a tool error result shaped as the gateway's.
var sendAnswers = map[string]any{
	"hello":        mcp.SendOutput{Outcome: "reply", Text: "echo: hello", TurnID: "t-1", Name: "reviewer"},
	"which config": mcp.SendOutput{Outcome: "question", Text: "which config?\nA or B", TurnID: "t-2", Name: "reviewer"},
	"use A":        mcp.SendOutput{Outcome: "reply", Text: "done with A\n", TurnID: "t-2", Name: "reviewer"},
	"silent":       mcp.SendOutput{Outcome: "turn_done", Text: "$ make\nok\n", TurnID: "t-3", Name: "reviewer"},
	"slow":         mcp.SendOutput{Outcome: "timeout", TurnID: "t-4", Name: "reviewer"},
	"later":        mcp.SendOutput{Outcome: "dispatched", TurnID: "t-5", DispatchID: "m-9", Name: "reviewer"},
	"elsewhere":    mcp.SendOutput{Outcome: "dispatched", TurnID: "t-6", Name: "trainer"}, // a member on another node: its node names the message
	"gone":         &mcp.ToolError{Code: "worker_gone", Message: "reviewer was deleted while the call waited"},
	// What a hostile worker (or gateway) can put in what send prints.
	"evil reply":    mcp.SendOutput{Outcome: "reply", Text: "ok\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x03 done\r\n", TurnID: "t-6", Name: "reviewer"},
	"evil question": mcp.SendOutput{Outcome: "question", Text: "pick\x1b[201~\rA", TurnID: "t-7\x1b[8m", Name: "rev\x1b[31m"},
	"evil tail":     mcp.SendOutput{Outcome: "turn_done", Text: "$ make\x1b[1;32m\nok\x1b]0;owned\x07\u202e\n", TurnID: "t-8", Name: "reviewer"},
	"evil queued":   mcp.SendOutput{Outcome: "dispatched", TurnID: "t-9", DispatchID: "m-1\n[fleetd] x", Name: "reviewer"},
	"evil error":    &mcp.ToolError{Code: "mailbox_full", Message: "no\x1b]0;pwned\x07 room\nfor you"},
}

func newMCPFleetd(t *testing.T) *mcpFleetd {
	t.Helper()
	f := &mcpFleetd{stateDir: writeTree(t, map[string]string{"primary.token": testPrimaryToken + "\n"}), calls: make(chan mcp.SendInput, 10)}
	server := sdk.NewServer(&sdk.Implementation{Name: "fake-fleetd", Version: "test"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "bridge_send", Description: "give a worker a task"},
		func(_ context.Context, _ *sdk.CallToolRequest, in mcp.SendInput) (*sdk.CallToolResult, mcp.SendOutput, error) {
			f.calls <- in
			switch a := sendAnswers[in.Content].(type) {
			case mcp.SendOutput:
				return nil, a, nil
			case *mcp.ToolError:
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: a.Error()}}, StructuredContent: a}, mcp.SendOutput{}, nil
			default:
				t.Errorf("unexpected bridge_send content %q", in.Content)
				return nil, mcp.SendOutput{}, nil
			}
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testPrimaryToken {
			writeTestJSON(w, 401, `{"error":{"code":"unauthorized","message":"missing or unknown bearer token"}}`)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func TestSend(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		args             []string
		wantCode         int
		wantOut, wantErr string
		wantCall         *mcp.SendInput
	}{
		{name: "reply", args: []string{"reviewer", "hello"},
			wantOut:  "echo: hello\n",
			wantCall: &mcp.SendInput{Content: "hello", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "question", args: []string{"reviewer", "which config", "--timeout", "90s"},
			wantOut:  "reviewer asks (turn t-2):\n  which config?\n  A or B\nAnswer with: fleetd send reviewer --turn t-2{FLAGS} ANSWER\n",
			wantCall: &mcp.SendInput{Content: "which config", SessionID: "reviewer", TimeoutMs: 90000, Wait: true}},
		{name: "answer with --turn", args: []string{"reviewer", "--turn", "t-2", "use A"},
			wantOut:  "done with A\n",
			wantCall: &mcp.SendInput{Content: "use A", SessionID: "reviewer", TimeoutMs: 600000, Wait: true, TurnID: "t-2"}},
		{name: "turn done", args: []string{"reviewer", "silent"},
			wantOut:  "reviewer ended its turn t-3 without replying; the end of its terminal:\n  $ make\n  ok\n",
			wantCall: &mcp.SendInput{Content: "silent", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "timeout", args: []string{"reviewer", "slow", "--timeout", "2m"}, wantCode: 1,
			wantErr:  "fleetd send: no outcome from reviewer within 2m0s; turn t-4 stays open and its reply will land in the primary's mailbox: fleetd inbox --wait{FLAGS}\n",
			wantCall: &mcp.SendInput{Content: "slow", SessionID: "reviewer", TimeoutMs: 120000, Wait: true}},
		{name: "no wait", args: []string{"reviewer", "later", "--no-wait"},
			wantOut:  "queued for reviewer (turn t-5, message m-9); the reply will land in the primary's mailbox: fleetd inbox --wait{FLAGS}\n",
			wantCall: &mcp.SendInput{Content: "later", SessionID: "reviewer", TimeoutMs: 600000, Wait: false}},
		{name: "no wait, another node", args: []string{"trainer", "elsewhere", "--no-wait"},
			wantOut:  "queued for trainer (turn t-6); the reply will land in the primary's mailbox: fleetd inbox --wait{FLAGS}\n",
			wantCall: &mcp.SendInput{Content: "elsewhere", SessionID: "trainer", TimeoutMs: 600000, Wait: false}},
		{name: "tool error", args: []string{"reviewer", "gone"}, wantCode: 1,
			wantErr:  "fleetd send: worker_gone: reviewer was deleted while the call waited\n",
			wantCall: &mcp.SendInput{Content: "gone", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "reply made safe", args: []string{"reviewer", "evil reply"},
			wantOut:  "ok\\x03 done\n",
			wantCall: &mcp.SendInput{Content: "evil reply", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "question made safe", args: []string{"reviewer", "evil question"},
			wantOut:  "rev asks (turn t-7):\n  pick\n  A\nAnswer with: fleetd send reviewer --turn t-7{FLAGS} ANSWER\n",
			wantCall: &mcp.SendInput{Content: "evil question", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "terminal tail made safe", args: []string{"reviewer", "evil tail"},
			wantOut:  "reviewer ended its turn t-8 without replying; the end of its terminal:\n  $ make\n  ok\\u202e\n",
			wantCall: &mcp.SendInput{Content: "evil tail", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "ids made safe", args: []string{"reviewer", "evil queued", "--no-wait"},
			wantOut:  "queued for reviewer (turn t-9, message m-1\\n[fleetd] x); the reply will land in the primary's mailbox: fleetd inbox --wait{FLAGS}\n",
			wantCall: &mcp.SendInput{Content: "evil queued", SessionID: "reviewer", TimeoutMs: 600000, Wait: false}},
		{name: "tool error made safe", args: []string{"reviewer", "evil error"}, wantCode: 1,
			wantErr:  "fleetd send: mailbox_full: no room\\nfor you\n",
			wantCall: &mcp.SendInput{Content: "evil error", SessionID: "reviewer", TimeoutMs: 600000, Wait: true}},
		{name: "empty text", args: []string{"reviewer", " "}, wantCode: 2},
		{name: "one argument", args: []string{"reviewer"}, wantCode: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newMCPFleetd(t)
			code, stdout, stderr := runCLI(t, append(append([]string{"send"}, tt.args...), "--server", f.url, "--state-dir", f.stateDir)...)
			// Hints reach this fleetd: its --server and --state-dir.
			flags := " --server " + f.url + " --state-dir " + f.stateDir
			tt.wantOut = strings.ReplaceAll(tt.wantOut, "{FLAGS}", flags)
			tt.wantErr = strings.ReplaceAll(tt.wantErr, "{FLAGS}", flags)
			if code != tt.wantCode || stdout != tt.wantOut {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, tt.wantCode, tt.wantOut, stderr)
			}
			if tt.wantCode == 2 {
				if !strings.Contains(stderr, "Usage: fleetd send NAME TEXT") {
					t.Errorf("usage error without usage line:\n%s", stderr)
				}
			} else if stderr != tt.wantErr {
				t.Errorf("stderr:\n%s\nwant:\n%s", stderr, tt.wantErr)
			}
			select {
			case got := <-f.calls:
				if tt.wantCall == nil {
					t.Errorf("unexpected bridge_send %+v", got)
				} else if diff := cmp.Diff(*tt.wantCall, got); diff != "" {
					t.Errorf("bridge_send arguments (-want +got):\n%s", diff)
				}
			default:
				if tt.wantCall != nil {
					t.Error("bridge_send was not called")
				}
			}
		})
	}
}

func TestSend_RefusedToken(t *testing.T) {
	t.Parallel()
	f := newMCPFleetd(t)
	if err := os.WriteFile(filepath.Join(f.stateDir, "primary.token"), []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "send", "reviewer", "hello", "--server", f.url, "--state-dir", f.stateDir)
	want := "fleetd send: the gateway at " + f.url + "/mcp refused the token: use the primary token of the fleetd you are talking to (--state-dir, --server)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
	if strings.Contains(stderr, "stale") {
		t.Error("the token is in the error")
	}
}

func TestSend_Unreachable(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{"primary.token": testPrimaryToken})
	code, _, stderr := runCLI(t, "send", "reviewer", "hello", "--server", "http://127.0.0.1:1", "--state-dir", dir)
	if code != 1 || !strings.HasPrefix(stderr, "fleetd send: cannot reach fleetd's gateway at http://127.0.0.1:1/mcp (is `fleetd serve` running?)") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}
