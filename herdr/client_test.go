package herdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Wire fixtures shaped exactly like herdr's (they are schema-checked by reply).
const (
	paneJSON = `{"pane_id":"w1:p2","terminal_id":"term_18a2b3c4d5e6f7","workspace_id":"w1","tab_id":"w1:t1",` +
		`"focused":false,"agent_status":"idle","revision":7,"cwd":"/src","label":"claude","agent":"claude",` +
		`"state_labels":{"status":"ready"},"scroll":{"offset_from_bottom":0,"max_offset_from_bottom":12,"viewport_rows":40}}`
	tabJSON       = `{"tab_id":"w1:t1","workspace_id":"w1","number":1,"label":"api","focused":true,"pane_count":1,"agent_status":"unknown"}`
	workspaceJSON = `{"workspace_id":"w1","number":1,"label":"fleetd","focused":true,"pane_count":1,"tab_count":1,` +
		`"active_tab_id":"w1:t1","agent_status":"unknown"}`
	agentJSON = `{"terminal_id":"term_18a2b3c4d5e6f7","agent_status":"idle","workspace_id":"w1","tab_id":"w1:t1",` +
		`"pane_id":"w1:p2","focused":false,"revision":3,"state_change_seq":5,"name":"reviewer","agent":"claude",` +
		`"interactive_ready":true}`
	readJSON = `{"pane_id":"w1:p2","workspace_id":"w1","tab_id":"w1:t1","source":"recent","format":"text",` +
		`"text":"hello\n","revision":0,"truncated":false}`
)

var (
	wantPane = PaneInfo{
		PaneID: "w1:p2", TerminalID: "term_18a2b3c4d5e6f7", WorkspaceID: "w1", TabID: "w1:t1",
		AgentStatus: StatusIdle, Revision: 7, CWD: "/src", Label: "claude", Agent: "claude",
		StateLabels: map[string]string{"status": "ready"},
		Scroll:      &PaneScrollInfo{MaxOffsetFromBottom: 12, ViewportRows: 40},
	}
	wantTab = TabInfo{TabID: "w1:t1", WorkspaceID: "w1", Number: 1, Label: "api", Focused: true,
		PaneCount: 1, AgentStatus: StatusUnknown}
	wantWorkspace = WorkspaceInfo{WorkspaceID: "w1", Number: 1, Label: "fleetd", Focused: true,
		PaneCount: 1, TabCount: 1, ActiveTabID: "w1:t1", AgentStatus: StatusUnknown}
	wantAgent = AgentInfo{TerminalID: "term_18a2b3c4d5e6f7", AgentStatus: StatusIdle, WorkspaceID: "w1",
		TabID: "w1:t1", PaneID: "w1:p2", Revision: 3, StateChangeSeq: 5, Name: "reviewer", Agent: "claude",
		InteractiveReady: true}
	wantRead = PaneReadResult{PaneID: "w1:p2", WorkspaceID: "w1", TabID: "w1:t1", Source: SourceRecent,
		Format: FormatText, Text: "hello\n"}
)

func ptr[T any](v T) *T { return &v }

// TestMethods_ExactRequestsAndResults pins, for every method, the request
// herdr receives (method and params, schema-validated by the server) and the
// decoding of herdr's result, including fields the client does not know.
// methodCase is one call of a client method against a scripted herdr: the
// exact request it must send and the result herdr answers.
type methodCase struct {
	name       string
	call       func(context.Context, *Client) (any, error)
	wantMethod string
	wantParams string
	result     string
	want       any
}

// run makes the call against a scripted herdr checked as opts says, and
// checks the request, the decoded result and that one connection was used.
func (tt methodCase) run(t *testing.T, opts serverOptions) {
	t.Helper()
	srv := startServerOpts(t, opts, func(c *scriptConn) {
		if c.req.Method != tt.wantMethod {
			t.Errorf("method = %q, want %q", c.req.Method, tt.wantMethod)
		}
		var got, want any
		if err := json.Unmarshal(c.req.Params, &got); err != nil {
			t.Errorf("params %s: %v", c.req.Params, err)
		}
		if err := json.Unmarshal([]byte(tt.wantParams), &want); err != nil {
			t.Fatalf("bad wantParams: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("params mismatch (-want +got):\n%s", diff)
		}
		c.result(tt.result)
	})
	got, err := tt.call(t.Context(), newClient(t, &Options{SocketPath: srv.path}))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if tt.want != nil {
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("result mismatch (-want +got):\n%s", diff)
		}
	}
	if n := srv.accepted.Load(); n != 1 {
		t.Errorf("connections = %d, want 1", n)
	}
}

func TestMethods_ExactRequestsAndResults(t *testing.T) {
	tests := []methodCase{
		{
			name:       "ping",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.Ping(ctx) },
			wantMethod: "ping", wantParams: `{}`,
			result: `{"type":"pong","version":"0.8.2","protocol":20,"capabilities":{"live_handoff":true,"detached_server_daemon":false}}`,
			want:   &Pong{Version: "0.8.2", Protocol: 20, Capabilities: &Capabilities{LiveHandoff: true}},
		},
		{
			name:       "ping without capabilities",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.Ping(ctx) },
			wantMethod: "ping", wantParams: `{}`,
			result: `{"type":"pong","version":"0.8.0","protocol":20,"capabilities":null}`,
			want:   &Pong{Version: "0.8.0", Protocol: 20},
		},
		{
			name: "workspace.create with everything",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWorkspace(ctx, WorkspaceCreateParams{CWD: "/src", Focus: true, Label: "fleetd",
					Env: map[string]string{"FLEETD_MEMBER": "reviewer"}})
			},
			wantMethod: "workspace.create",
			wantParams: `{"cwd":"/src","focus":true,"label":"fleetd","env":{"FLEETD_MEMBER":"reviewer"}}`,
			result:     `{"type":"workspace_created","workspace":` + workspaceJSON + `,"tab":` + tabJSON + `,"root_pane":` + paneJSON + `}`,
			want:       &WorkspaceCreated{Workspace: wantWorkspace, Tab: wantTab, RootPane: wantPane},
		},
		{
			name: "workspace.create with defaults",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWorkspace(ctx, WorkspaceCreateParams{})
			},
			wantMethod: "workspace.create", wantParams: `{}`,
			result: `{"type":"workspace_created","workspace":` + workspaceJSON + `,"tab":` + tabJSON + `,"root_pane":` + paneJSON + `}`,
			want:   &WorkspaceCreated{Workspace: wantWorkspace, Tab: wantTab, RootPane: wantPane},
		},
		{
			name:       "workspace.list",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListWorkspaces(ctx) },
			wantMethod: "workspace.list", wantParams: `{}`,
			result: `{"type":"workspace_list","workspaces":[` + workspaceJSON + `]}`,
			want:   []WorkspaceInfo{wantWorkspace},
		},
		{
			name:       "workspace.close",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.CloseWorkspace(ctx, "w3") },
			wantMethod: "workspace.close", wantParams: `{"workspace_id":"w3"}`,
			result: `{"type":"ok"}`,
		},
		{
			name:       "session.snapshot",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.Snapshot(ctx) },
			wantMethod: "session.snapshot", wantParams: `{}`,
			result: `{"type":"session_snapshot","snapshot":{"version":"0.9.3","protocol":22,"workspaces":[` + workspaceJSON +
				`],"tabs":[` + tabJSON + `],"panes":[` + paneJSON + `],"layouts":[],"agents":[` + agentJSON + `],"focused_pane_id":"w1:p2"}}`,
			want: &SessionSnapshot{Version: "0.9.3", Protocol: 22, Workspaces: []WorkspaceInfo{wantWorkspace}, Tabs: []TabInfo{wantTab},
				Panes: []PaneInfo{wantPane}, Layouts: []json.RawMessage{}, Agents: []AgentInfo{wantAgent}, FocusedPaneID: "w1:p2"},
		},
		{
			name: "tab.create",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateTab(ctx, TabCreateParams{WorkspaceID: "w1", Label: "api", CWD: "/src",
					Env: map[string]string{"FLEETD_TOKEN": "t"}})
			},
			wantMethod: "tab.create",
			wantParams: `{"workspace_id":"w1","cwd":"/src","label":"api","env":{"FLEETD_TOKEN":"t"}}`,
			result:     `{"type":"tab_created","tab":` + tabJSON + `,"root_pane":` + paneJSON + `}`,
			want:       &TabCreated{Tab: wantTab, RootPane: wantPane},
		},
		{
			name:       "tab.list all",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListTabs(ctx, "") },
			wantMethod: "tab.list", wantParams: `{}`,
			result: `{"type":"tab_list","tabs":[` + tabJSON + `]}`,
			want:   []TabInfo{wantTab},
		},
		{
			name:       "tab.list one workspace",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListTabs(ctx, "w1") },
			wantMethod: "tab.list", wantParams: `{"workspace_id":"w1"}`,
			result: `{"type":"tab_list","tabs":[]}`,
			want:   []TabInfo{},
		},
		{
			name:       "tab.close",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.CloseTab(ctx, "w1:t2") },
			wantMethod: "tab.close", wantParams: `{"tab_id":"w1:t2"}`,
			result: `{"type":"ok"}`,
		},
		{
			name:       "pane.list",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListPanes(ctx, "") },
			wantMethod: "pane.list", wantParams: `{}`,
			result: `{"type":"pane_list","panes":[` + paneJSON + `]}`,
			want:   []PaneInfo{wantPane},
		},
		{
			name:       "pane.get tolerates unknown fields",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetPane(ctx, "w1:p2") },
			wantMethod: "pane.get", wantParams: `{"pane_id":"w1:p2"}`,
			result: `{"type":"pane_info","future_field":1,"pane":` + strings.Replace(paneJSON, `{`, `{"new_thing":{"x":1},`, 1) + `}`,
			want:   &wantPane,
		},
		{
			name:       "pane.close",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.ClosePane(ctx, "w1:p2") },
			wantMethod: "pane.close", wantParams: `{"pane_id":"w1:p2"}`,
			result: `{"type":"ok"}`,
		},
		{
			name: "pane.split",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.SplitPane(ctx, PaneSplitParams{TargetPaneID: "w1:p1", Direction: SplitRight, Ratio: ptr(float32(0.5)),
					Env: map[string]string{"A": "1"}})
			},
			wantMethod: "pane.split",
			wantParams: `{"target_pane_id":"w1:p1","direction":"right","ratio":0.5,"env":{"A":"1"}}`,
			result:     `{"type":"pane_info","pane":` + paneJSON + `}`,
			want:       &wantPane,
		},
		{
			name: "pane.read",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ReadPane(ctx, PaneReadParams{PaneID: "w1:p2", Source: SourceRecent, Lines: 200})
			},
			wantMethod: "pane.read", wantParams: `{"pane_id":"w1:p2","source":"recent","lines":200}`,
			result: `{"type":"pane_read","read":` + readJSON + `}`,
			want:   &wantRead,
		},
		{
			name:       "pane.send_text",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.SendText(ctx, "w1:p2", "ls -la") },
			wantMethod: "pane.send_text", wantParams: `{"pane_id":"w1:p2","text":"ls -la"}`,
			result: `{"type":"ok"}`,
		},
		{
			name: "pane.send_keys",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.SendKeys(ctx, "w1:p2", []string{"ctrl+c", "Enter"})
			},
			wantMethod: "pane.send_keys", wantParams: `{"pane_id":"w1:p2","keys":["ctrl+c","Enter"]}`,
			result: `{"type":"ok"}`,
		},
		{
			name:       "pane.send_keys with no keys sends an empty array",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.SendKeys(ctx, "w1:p2", nil) },
			wantMethod: "pane.send_keys", wantParams: `{"pane_id":"w1:p2","keys":[]}`,
			result: `{"type":"ok"}`,
		},
		{
			name: "agent.start",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.LaunchAgent(ctx, AgentStartParams{Name: "reviewer", Kind: "claude", PaneID: "w1:p2",
					Args: []string{"--model", "opus"}, TimeoutMS: 60000})
			},
			wantMethod: "agent.start",
			wantParams: `{"name":"reviewer","kind":"claude","pane_id":"w1:p2","args":["--model","opus"],"timeout_ms":60000}`,
			result: `{"type":"agent_started","argv":["claude","--model","opus"],"agent":` +
				strings.Replace(agentJSON, `"interactive_ready":true`, `"launch_pending":true`, 1) + `}`,
			want: &AgentStarted{Argv: []string{"claude", "--model", "opus"}, Agent: func() AgentInfo {
				a := wantAgent
				a.InteractiveReady, a.LaunchPending = false, true
				return a
			}()},
		},
		{
			name:       "agent.get",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetAgent(ctx, "reviewer") },
			wantMethod: "agent.get", wantParams: `{"target":"reviewer"}`,
			result: `{"type":"agent_info","agent":` + agentJSON + `}`,
			want:   &wantAgent,
		},
		{
			name:       "agent.get without state_change_seq",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetAgent(ctx, "w1:p2") },
			wantMethod: "agent.get", wantParams: `{"target":"w1:p2"}`,
			result: `{"type":"agent_info","agent":` + strings.Replace(agentJSON, `"state_change_seq":5,`, ``, 1) + `}`,
			want: func() *AgentInfo {
				a := wantAgent
				a.StateChangeSeq = 0
				return &a
			}(),
		},
		{
			name:       "agent.list",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListAgents(ctx) },
			wantMethod: "agent.list", wantParams: `{}`,
			result: `{"type":"agent_list","agents":[` + agentJSON + `]}`,
			want:   []AgentInfo{wantAgent},
		},
		{
			name: "agent.prompt",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PromptAgent(ctx, AgentPromptParams{Target: "reviewer", Text: "review PR 7"})
			},
			wantMethod: "agent.prompt", wantParams: `{"target":"reviewer","text":"review PR 7"}`,
			result: `{"type":"agent_prompted","agent":` + agentJSON + `}`,
			want:   &wantAgent,
		},
		{
			name: "agent.prompt with wait",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PromptAgent(ctx, AgentPromptParams{Target: "w1:p2", Text: "go",
					Wait: &AgentPromptWait{Until: []AgentStatus{StatusIdle, StatusDone}, TimeoutMS: 120000}})
			},
			wantMethod: "agent.prompt",
			wantParams: `{"target":"w1:p2","text":"go","wait":{"until":["idle","done"],"timeout_ms":120000}}`,
			result:     `{"type":"agent_prompted","agent":` + agentJSON + `}`,
			want:       &wantAgent,
		},
		{
			name: "agent.wait",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WaitAgent(ctx, AgentWaitParams{Target: "reviewer", Until: []AgentStatus{StatusIdle, StatusDone}})
			},
			wantMethod: "agent.wait", wantParams: `{"target":"reviewer","until":["idle","done"]}`,
			result: `{"type":"agent_info","agent":` + agentJSON + `}`,
			want:   &wantAgent,
		},
		{
			name: "agent.read",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ReadAgent(ctx, AgentReadParams{Target: "reviewer", Source: SourceVisible, Format: FormatANSI,
					StripANSI: ptr(false)})
			},
			wantMethod: "agent.read",
			wantParams: `{"target":"reviewer","source":"visible","format":"ansi","strip_ansi":false}`,
			result:     `{"type":"pane_read","read":` + readJSON + `}`,
			want:       &wantRead,
		},
		{
			name: "agent.send_keys",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.SendAgentKeys(ctx, "reviewer", []string{"esc"})
			},
			wantMethod: "agent.send_keys", wantParams: `{"target":"reviewer","keys":["esc"]}`,
			result: `{"type":"ok"}`,
		},
		{
			name:       "agent.rename",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.RenameAgent(ctx, "w1:p2", "reviewer") },
			wantMethod: "agent.rename", wantParams: `{"target":"w1:p2","name":"reviewer"}`,
			result: `{"type":"agent_info","agent":` + agentJSON + `}`,
			want:   &wantAgent,
		},
		{
			name:       "agent.rename clearing the name",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.RenameAgent(ctx, "w1:p2", "") },
			wantMethod: "agent.rename", wantParams: `{"target":"w1:p2"}`,
			result: `{"type":"agent_info","agent":` + agentJSON + `}`,
			want:   &wantAgent,
		},
		{
			name: "events.wait",
			call: func(ctx context.Context, c *Client) (any, error) {
				ev, err := c.WaitEvent(ctx, EventsWaitParams{MatchEvent: EventMatch{Event: EventPaneAgentStatusChanged,
					PaneID: "w1:p2", AgentStatus: StatusIdle}, TimeoutMS: 5000})
				if ev != nil {
					ev.Data = nil // compared separately in the event tests
				}
				return ev, err
			},
			wantMethod: "events.wait",
			wantParams: `{"match_event":{"event":"pane_agent_status_changed","pane_id":"w1:p2","agent_status":"idle"},"timeout_ms":5000}`,
			result: `{"type":"wait_matched","event":{"event":"pane_agent_status_changed","data":{"type":"pane_agent_status_changed",` +
				`"pane_id":"w1:p2","workspace_id":"w1","agent_status":"idle","agent":"claude"}}}`,
			want: &Event{Kind: EventPaneAgentStatusChanged, Name: "pane_agent_status_changed", PaneID: "w1:p2",
				WorkspaceID: "w1", AgentStatus: StatusIdle, Agent: "claude"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, serverOptions{}) })
	}
}

// TestRequests_OnePerConnectionWithUniqueIDs pins herdr's framing: every call
// opens its own connection carrying one request with a fresh id.
func TestRequests_OnePerConnectionWithUniqueIDs(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) { c.result(`{"type":"ok"}`) })
	c := newClient(t, &Options{SocketPath: srv.path})
	const calls = 5
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := c.ClosePane(t.Context(), "w1:p"+string(rune('1'+i))); err != nil {
				t.Errorf("close pane: %v", err)
			}
		})
	}
	wg.Wait()
	if n := srv.accepted.Load(); n != calls {
		t.Errorf("connections = %d, want %d", n, calls)
	}
	ids := map[string]bool{}
	for _, line := range srv.requests() {
		var r struct{ ID string }
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			t.Errorf("request %s has no id (%v)", line, err)
		}
		if ids[r.ID] {
			t.Errorf("request id %q used twice", r.ID)
		}
		ids[r.ID] = true
	}
}

// TestValidator_RejectsMalformedRequest proves the schema check in the
// scripted server is live: a request missing the required direction of
// pane.split (which the client sends as "") is rejected.
func TestValidator_RejectsMalformedRequest(t *testing.T) {
	lines := make(chan []byte, 1)
	srv := startServerOpts(t, serverOptions{skipValidation: true}, func(c *scriptConn) {
		lines <- c.line
		c.fail("invalid_request", "invalid request: unknown variant ``")
	})
	_, err := newClient(t, &Options{SocketPath: srv.path}).SplitPane(t.Context(), PaneSplitParams{TargetPaneID: "w1:p1"})
	if !IsCode(err, "invalid_request") {
		t.Fatalf("err = %v, want invalid_request", err)
	}
	if err := mustValidator(t).Request(<-lines); err == nil {
		t.Errorf("validator accepted a pane.split request with an empty direction")
	}
	if err := mustValidator(t).Request([]byte(`{"id":"1","method":"pane.get","params":{}}`)); err == nil {
		t.Errorf("validator accepted pane.get without pane_id")
	}
}

// TestResponse_LargerThanOneMiB pins that responses are read whole, with no
// size limit (pane.read can return 1000 long lines).
func TestResponse_LargerThanOneMiB(t *testing.T) {
	text := strings.Repeat("0123456789abcdef", 3<<15) // 1.5 MiB
	srv := startServer(t, func(c *scriptConn) {
		body, _ := json.Marshal(map[string]any{"type": "pane_read", "read": map[string]any{
			"pane_id": "w1:p2", "workspace_id": "w1", "tab_id": "w1:t1", "source": "recent",
			"format": "text", "text": text, "revision": 0, "truncated": false}})
		c.result(string(body))
	})
	got, err := newClient(t, &Options{SocketPath: srv.path}).ReadPane(t.Context(), PaneReadParams{PaneID: "w1:p2", Source: SourceRecent})
	if err != nil {
		t.Fatalf("read pane: %v", err)
	}
	if got.Text != text {
		t.Errorf("text has %d bytes, want %d", len(got.Text), len(text))
	}
}

// TestRequest_TooLargeIsRefusedLocally pins that a request herdr would drop
// silently (over 1 MiB) never leaves the client.
func TestRequest_TooLargeIsRefusedLocally(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) { c.result(`{"type":"ok"}`) })
	var codes []string
	c := newClient(t, &Options{SocketPath: srv.path, Observer: func(_, code string, _ time.Duration) { codes = append(codes, code) }})
	err := c.SendText(t.Context(), "w1:p2", strings.Repeat("x", MaxRequestBytes))
	if !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("err = %v, want ErrRequestTooLarge", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("a local refusal must not look like herdr being down: %v", err)
	}
	if n := srv.accepted.Load(); n != 0 {
		t.Errorf("connections = %d, want 0", n)
	}
	if diff := cmp.Diff([]string{"request_too_large"}, codes); diff != "" {
		t.Errorf("observer codes (-want +got):\n%s", diff)
	}
	// The refusal stays with that call: the client's next request goes out.
	for range 3 {
		if err := c.SendText(t.Context(), "w1:p2", "hello"); err != nil {
			t.Fatalf("a request after the refused one: %v", err)
		}
	}
}

// TestRequest_TextIsNotHTMLEscaped pins that <, > and & go to herdr as
// themselves: escaped (six bytes each) a 300 KiB prompt of them would be over
// herdr's 1 MiB and refused.
func TestRequest_TextIsNotHTMLEscaped(t *testing.T) {
	lines := make(chan string, 1)
	srv := startServer(t, func(c *scriptConn) {
		lines <- string(c.line)
		c.result(`{"type":"ok"}`)
	})
	text := strings.Repeat("<a&b>", 60<<10)
	if err := newClient(t, &Options{SocketPath: srv.path}).SendText(t.Context(), "w1:p2", text); err != nil {
		t.Fatalf("send %d bytes of <, > and &: %v", len(text), err)
	}
	line := <-lines
	if !strings.Contains(line, `"text":"`+text+`"`) || len(line) > len(text)+200 {
		t.Errorf("request line of %d bytes does not carry the %d-byte text as itself", len(line), len(text))
	}
}

// TestCancel_ClosesConnection pins how long calls are abandoned: the client
// closes the connection (herdr's only cancel signal) without writing a byte.
func TestCancel_ClosesConnection(t *testing.T) {
	received := make(chan struct{})
	closed := make(chan struct{})
	srv := startServer(t, func(c *scriptConn) {
		close(received)
		c.awaitClientClose() // fails the test if anything but EOF arrives
		close(closed)
	})
	var codes []string
	c := newClient(t, &Options{SocketPath: srv.path, Observer: func(method, code string, _ time.Duration) {
		codes = append(codes, method+" "+code)
	}})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-received
		cancel()
	}()
	_, err := c.WaitAgent(ctx, AgentWaitParams{Target: "reviewer", Until: []AgentStatus{StatusDone}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("cancellation must not look like herdr being down: %v", err)
	}
	<-closed
	if diff := cmp.Diff([]string{"agent.wait canceled"}, codes); diff != "" {
		t.Errorf("observer (-want +got):\n%s", diff)
	}
}

// TestErrors_HerdrRefusalVersusTransport pins the classification callers rely
// on: herdr's error envelope is an *Error, everything else that goes wrong on
// the wire is a *TransportError matching ErrUnavailable.
func TestErrors_HerdrRefusalVersusTransport(t *testing.T) {
	tests := []struct {
		name       string
		handler    func(c *scriptConn)
		wantCode   string // herdr error code, or "" for a transport error
		wantReason string
	}{
		{
			name:     "herdr error envelope",
			handler:  func(c *scriptConn) { c.fail("pane_not_found", "pane w1:p9 not found") },
			wantCode: "pane_not_found",
		},
		{
			name: "invalid_request with empty id",
			handler: func(c *scriptConn) {
				c.reply(`{"id":"","error":{"code":"invalid_request","message":"invalid request: missing field pane_id"}}`)
			},
			wantCode: "invalid_request",
		},
		{
			name:       "closed without a response",
			handler:    func(c *scriptConn) { c.hangUp() },
			wantReason: ReasonClosed,
		},
		{
			name: "closed mid-line",
			handler: func(c *scriptConn) {
				c.writeRaw(`{"id":"` + c.req.ID + `","result":{"type":"pane_info","pa`)
				c.hangUp()
			},
			wantReason: ReasonBadResponse,
		},
		{
			name:       "garbage",
			handler:    func(c *scriptConn) { c.writeRaw("HTTP/1.1 400 Bad Request\n") },
			wantReason: ReasonBadResponse,
		},
		{
			name:       "neither result nor error",
			handler:    func(c *scriptConn) { c.writeRaw(`{"id":"` + c.req.ID + `"}` + "\n") },
			wantReason: ReasonBadResponse,
		},
		{
			name:       "result of the wrong type",
			handler:    func(c *scriptConn) { c.result(`{"type":"ok"}`) },
			wantReason: ReasonBadResponse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, tt.handler)
			var codes []string
			c := newClient(t, &Options{SocketPath: srv.path, Observer: func(_, code string, _ time.Duration) { codes = append(codes, code) }})
			_, err := c.GetPane(t.Context(), "w1:p9")
			if err == nil {
				t.Fatal("GetPane succeeded")
			}
			he := errorsAsHerdr(err)
			var te *TransportError
			isTransport := errors.As(err, &te)
			if tt.wantCode != "" {
				if he == nil || he.Code != tt.wantCode || he.Method != "pane.get" || !IsCode(err, tt.wantCode) {
					t.Errorf("err = %#v, want herdr error %s from pane.get", err, tt.wantCode)
				}
				if isTransport || errors.Is(err, ErrUnavailable) {
					t.Errorf("herdr's refusal classified as transport failure: %v", err)
				}
				if diff := cmp.Diff([]string{tt.wantCode}, codes); diff != "" {
					t.Errorf("observer codes (-want +got):\n%s", diff)
				}
				return
			}
			if !isTransport || te.Reason != tt.wantReason || !errors.Is(err, ErrUnavailable) {
				t.Errorf("err = %v, want transport error %q matching ErrUnavailable", err, tt.wantReason)
			}
			if he != nil {
				t.Errorf("transport failure classified as herdr error: %v", err)
			}
			if diff := cmp.Diff([]string{tt.wantReason}, codes); diff != "" {
				t.Errorf("observer codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors_SocketMissingOrRefusing(t *testing.T) {
	dir := t.TempDir()
	refusing := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", refusing)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, nobody listens: a crashed herdr

	tests := []struct {
		name  string
		path  string
		cause error
	}{
		{"socket missing", filepath.Join(dir, "absent.sock"), fs.ErrNotExist},
		{"connection refused", refusing, syscall.ECONNREFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var codes []string
			c := newClient(t, &Options{SocketPath: tt.path, Observer: func(_, code string, _ time.Duration) { codes = append(codes, code) }})
			_, err := c.Ping(t.Context())
			var te *TransportError
			if !errors.As(err, &te) || te.Reason != ReasonUnavailable {
				t.Fatalf("err = %v, want TransportError %q", err, ReasonUnavailable)
			}
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tt.cause) {
				t.Errorf("err = %v, want it to match ErrUnavailable and %v", err, tt.cause)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not name the socket %s", err, tt.path)
			}
			if diff := cmp.Diff([]string{ReasonUnavailable}, codes); diff != "" {
				t.Errorf("observer codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPing_Protocols(t *testing.T) {
	tests := []struct {
		name     string
		pong     string
		wantErr  bool
		wantWarn bool
		// mention are strings the error or warning must contain.
		mention []string
	}{
		{name: "protocol 20 (herdr 0.8.2)", pong: `{"type":"pong","version":"0.8.2","protocol":20,"capabilities":{"live_handoff":false}}`},
		{name: "protocol 22 (herdr 0.9.3)", pong: `{"type":"pong","version":"0.9.3","protocol":22,"capabilities":{"live_handoff":true,"endpoint_protocol_generation":1}}`},
		{name: "protocol 22 without capabilities", pong: `{"type":"pong","version":"0.9.0","protocol":22,"capabilities":null}`},
		{name: "newer protocol is driven with a warning", pong: `{"type":"pong","version":"0.11.0","protocol":25,"capabilities":{"live_handoff":true}}`,
			wantWarn: true, mention: []string{"0.11.0", "protocol 25", "22"}},
		{name: "older protocol is refused", pong: `{"type":"pong","version":"0.7.1","protocol":19,"capabilities":{"live_handoff":false}}`,
			wantErr: true, mention: []string{"protocol 19", "protocol 20", "0.7.1", "0.8.2 or newer", "0.9.x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, func(c *scriptConn) { c.result(tt.pong) })
			pong, err := newClient(t, &Options{SocketPath: srv.path}).Ping(t.Context())
			if pong == nil {
				t.Fatalf("pong = nil (err %v), want the server's pong", err)
			}
			text := pong.Warning()
			if tt.wantErr {
				if !errors.Is(err, ErrProtocolMismatch) {
					t.Fatalf("err = %v, want ErrProtocolMismatch", err)
				}
				text = err.Error()
				if !strings.Contains(text, srv.path) {
					t.Errorf("error %q does not name the socket", text)
				}
			} else if err != nil {
				t.Fatalf("Ping: %v", err)
			}
			if got := pong.Newer(); got != tt.wantWarn {
				t.Errorf("Newer() = %v, want %v", got, tt.wantWarn)
			}
			if (pong.Warning() != "") != tt.wantWarn {
				t.Errorf("Warning() = %q, want a warning: %v", pong.Warning(), tt.wantWarn)
			}
			for _, want := range tt.mention {
				if !strings.Contains(text, want) {
					t.Errorf("%q does not mention %q", text, want)
				}
			}
		})
	}
}

func TestObserver_SeesMethodCodeAndDuration(t *testing.T) {
	srv := startServer(t, func(c *scriptConn) {
		if c.req.Method == "agent.get" {
			c.fail("agent_not_found", "no agent named ghost")
			return
		}
		c.result(`{"type":"agent_list","agents":[]}`)
	})
	type obs struct {
		Method, Code string
		NonNegative  bool
	}
	var got []obs
	c := newClient(t, &Options{SocketPath: srv.path, Observer: func(method, code string, d time.Duration) {
		got = append(got, obs{method, code, d >= 0})
	}})
	if _, err := c.ListAgents(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAgent(t.Context(), "ghost"); !IsCode(err, "agent_not_found") {
		t.Fatalf("err = %v", err)
	}
	want := []obs{{"agent.list", "ok", true}, {"agent.get", "agent_not_found", true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
}

func TestResolveSocketPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"default", nil, "/home/u/.config/herdr/herdr.sock"},
		{"explicit socket wins", map[string]string{"HERDR_SOCKET_PATH": "/run/h.sock", "HERDR_SESSION": "x",
			"XDG_CONFIG_HOME": "/xdg"}, "/run/h.sock"},
		{"named session", map[string]string{"HERDR_SESSION": "work"}, "/home/u/.config/herdr/sessions/work/herdr.sock"},
		{"default session", map[string]string{"HERDR_SESSION": "default"}, "/home/u/.config/herdr/herdr.sock"},
		{"xdg config home", map[string]string{"XDG_CONFIG_HOME": "/xdg"}, "/xdg/herdr/herdr.sock"},
		{"xdg with session", map[string]string{"XDG_CONFIG_HOME": "/xdg", "HERDR_SESSION": "s1"}, "/xdg/herdr/sessions/s1/herdr.sock"},
		{"relative xdg ignored", map[string]string{"XDG_CONFIG_HOME": "rel"}, "/home/u/.config/herdr/herdr.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ResolveSocketPath(func(k string) string { return tt.env[k] }, "/home/u")
			if got != tt.want {
				t.Errorf("ResolveSocketPath = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNew_NilOptionsResolvesFromEnvironment(t *testing.T) {
	t.Setenv("HERDR_SOCKET_PATH", "/tmp/from-env.sock")
	if got := New(nil).SocketPath(); got != "/tmp/from-env.sock" {
		t.Errorf("SocketPath = %q", got)
	}
	if got := newClient(t, &Options{SocketPath: "/x.sock"}).SocketPath(); got != "/x.sock" {
		t.Errorf("SocketPath = %q, want the override", got)
	}
}

func TestOptions_DialOpensOneConnectionPerCall(t *testing.T) {
	v := mustValidator(t)
	var mu sync.Mutex
	var lines []string
	dial := func(ctx context.Context) (net.Conn, error) {
		client, server := net.Pipe()
		go func() { // a one-exchange herdr on the other end of the pipe
			defer server.Close()
			line, err := bufio.NewReader(server).ReadBytes('\n')
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, string(line))
			mu.Unlock()
			var req struct{ ID string }
			json.Unmarshal(line, &req)
			server.Write([]byte(`{"id":"` + req.ID + `","result":{"type":"ok"}}` + "\n"))
		}()
		return client, nil
	}
	c := New(&Options{Dial: dial})
	if c.SocketPath() != "" {
		t.Errorf("SocketPath = %q with Dial set, want none resolved", c.SocketPath())
	}
	for _, pane := range []string{"w1:p1", "w1:p2"} {
		if err := c.ClosePane(t.Context(), pane); err != nil {
			t.Fatalf("close pane %s over Dial: %v", pane, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 {
		t.Fatalf("requests over Dial = %q, want one per call", lines)
	}
	for _, l := range lines {
		if err := v.Request([]byte(strings.TrimSuffix(l, "\n"))); err != nil {
			t.Errorf("request %q: %v", l, err)
		}
	}
}

func TestOptions_DialFailureIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "pipe", Err: syscall.ECONNREFUSED}
	var codes []string
	c := New(&Options{
		Dial:     func(context.Context) (net.Conn, error) { return nil, refused },
		Observer: func(_, code string, _ time.Duration) { codes = append(codes, code) },
	})
	_, err := c.ListWorkspaces(t.Context())
	var te *TransportError
	if !errors.As(err, &te) || te.Reason != ReasonUnavailable || !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want a TransportError %q matching ErrUnavailable and ECONNREFUSED", err, ReasonUnavailable)
	}
	if diff := cmp.Diff([]string{ReasonUnavailable}, codes); diff != "" {
		t.Errorf("observer codes (-want +got):\n%s", diff)
	}
}

// TestCalls_EachReadsItsOwnAnswer pins that calls made one after another
// on one client each send their own request line and read their own
// answer, whatever the call before left: an answer longer than a call's
// read buffer, a request longer than the buffers the client keeps, an
// answer cut off by herdr hanging up.
func TestCalls_EachReadsItsOwnAnswer(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 256) // 4 KiB, over a call's read buffer
	var n atomic.Int32
	srv := startServer(t, func(c *scriptConn) {
		switch n.Add(1) {
		case 1:
			body, _ := json.Marshal(map[string]any{"type": "pane_read", "read": map[string]any{
				"pane_id": "w1:p2", "workspace_id": "w1", "tab_id": "w1:t1", "source": "recent",
				"format": "text", "text": long, "revision": 0, "truncated": false}})
			c.result(string(body))
		case 4:
			c.writeRaw(`{"id":"` + c.req.ID + `","result":{"type":"pane_info","pa`)
			c.hangUp()
		case 2, 6:
			c.result(`{"type":"pane_info","pane":` + paneJSON + `}`)
		default:
			c.result(`{"type":"ok"}`)
		}
	})
	c := newClient(t, &Options{SocketPath: srv.path})
	ctx := t.Context()
	if got, err := c.ReadPane(ctx, PaneReadParams{PaneID: "w1:p2", Source: SourceRecent}); err != nil || got.Text != long {
		t.Fatalf("read pane: %v (text of %d bytes, want %d)", err, len(got.Text), len(long))
	}
	if got, err := c.GetPane(ctx, "w1:p2"); err != nil || got.PaneID != "w1:p2" || got.Revision != 7 {
		t.Fatalf("get pane after a long answer = %+v, %v", got, err)
	}
	if err := c.SendText(ctx, "w1:p2", strings.Repeat("y", 100<<10)); err != nil {
		t.Fatalf("send a long text: %v", err)
	}
	if _, err := c.GetPane(ctx, "w1:p2"); err == nil || errorsAsHerdr(err) != nil {
		t.Fatalf("get pane from a herdr that hung up mid-answer: %v, want a transport error", err)
	}
	if err := c.SendText(ctx, "w1:p2", "short"); err != nil {
		t.Fatalf("send a short text: %v", err)
	}
	if got, err := c.GetPane(ctx, "w1:p2"); err != nil || got.PaneID != "w1:p2" || got.Revision != 7 {
		t.Fatalf("get pane after a cut-off answer = %+v, %v", got, err)
	}
	reqs := srv.requests()
	if len(reqs) != 6 {
		t.Fatalf("requests = %d, want 6", len(reqs))
	}
	var short struct {
		Method string
		Params struct{ Text string }
	}
	if err := json.Unmarshal(reqs[4], &short); err != nil || short.Method != "pane.send_text" || short.Params.Text != "short" {
		t.Errorf("request after a long one = %s (%v), want the short text alone", reqs[4], err)
	}
}

// BenchmarkCall is one call's cost to the client: the request line, the
// connection's read buffer and the answer's decoding, over an in-memory
// pipe to a herdr that answers at once (with buffers of its own that it
// reuses, so that the figures are mostly the client's).
func BenchmarkCall(b *testing.B) {
	answer := []byte(`{"id":"x","result":{"type":"pane_info","pane":` + paneJSON + `}}` + "\n")
	bufs := sync.Pool{New: func() any { return new([4096]byte) }}
	dial := func(ctx context.Context) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			buf := bufs.Get().(*[4096]byte)
			defer bufs.Put(buf)
			for n := 0; !bytes.Contains(buf[:n], []byte("\n")); {
				m, err := server.Read(buf[n:])
				if err != nil {
					return
				}
				n += m
			}
			server.Write(answer)
		}()
		return client, nil
	}
	c := New(&Options{Dial: dial})
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GetPane(ctx, "w1:p2"); err != nil {
			b.Fatal(err)
		}
	}
}
