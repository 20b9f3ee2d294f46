package herdr

import (
	"context"
	"errors"
	"testing"
	"time"
)

const (
	worktreeJSON = `{"path":"/srv/api.worktrees/agents/x","branch":"agents/x","label":"agents/x","is_bare":false,` +
		`"is_detached":false,"is_prunable":false,"is_linked_worktree":true,"open_workspace_id":"w1"}`
	linkedWorkspaceJSON = `{"workspace_id":"w1","number":1,"label":"fleetd","focused":true,"pane_count":1,"tab_count":1,` +
		`"active_tab_id":"w1:t1","agent_status":"unknown","worktree":{"repo_key":"/srv/api","repo_name":"api",` +
		`"repo_root":"/srv/api","checkout_path":"/srv/api.worktrees/agents/x","is_linked_worktree":true}}`
)

var (
	wantWorktree = WorktreeInfo{Path: "/srv/api.worktrees/agents/x", Branch: "agents/x", Label: "agents/x",
		IsLinkedWorktree: true, OpenWorkspaceID: "w1"}
	wantLinkedWorkspace = func() WorkspaceInfo {
		w := wantWorkspace
		w.Worktree = &WorkspaceWorktreeInfo{RepoKey: "/srv/api", RepoName: "api", RepoRoot: "/srv/api",
			CheckoutPath: "/srv/api.worktrees/agents/x", IsLinkedWorktree: true}
		return w
	}()
)

// The worktree methods send exactly herdr 0.9's requests (checked against
// the protocol-22 schema, which alone has them) and decode its results.
func TestWorktreeMethods_ExactRequestsAndResults(t *testing.T) {
	opened := `{"type":"worktree_opened","workspace":` + linkedWorkspaceJSON + `,"tab":` + tabJSON + `,"root_pane":` + paneJSON +
		`,"worktree":` + worktreeJSON + `,"already_open":true}`
	for _, tt := range []methodCase{
		{
			name: "worktree.create with everything",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWorktree(ctx, WorktreeCreateParams{CWD: "/srv/api", Branch: "agents/x", Base: "main",
					Path: "/srv/api.worktrees/agents/x", Label: "agents/x", Focus: true, TrustRepository: true})
			},
			wantMethod: "worktree.create",
			wantParams: `{"cwd":"/srv/api","branch":"agents/x","base":"main","path":"/srv/api.worktrees/agents/x","label":"agents/x",` +
				`"focus":true,"trust_repository":true}`,
			result: `{"type":"worktree_created","workspace":` + linkedWorkspaceJSON + `,"tab":` + tabJSON + `,"root_pane":` + paneJSON +
				`,"worktree":` + worktreeJSON + `}`,
			want: &WorktreeWorkspace{Workspace: wantLinkedWorkspace, Tab: wantTab, RootPane: wantPane, Worktree: wantWorktree},
		},
		{
			name: "worktree.create of a workspace's repository, herdr's defaults",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWorktree(ctx, WorktreeCreateParams{WorkspaceID: "w2"})
			},
			wantMethod: "worktree.create", wantParams: `{"workspace_id":"w2"}`,
			result: `{"type":"worktree_created","workspace":` + linkedWorkspaceJSON + `,"tab":` + tabJSON + `,"root_pane":` + paneJSON +
				`,"worktree":` + worktreeJSON + `}`,
			want: &WorktreeWorkspace{Workspace: wantLinkedWorkspace, Tab: wantTab, RootPane: wantPane, Worktree: wantWorktree},
		},
		{
			name: "worktree.open by path",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.OpenWorktree(ctx, WorktreeOpenParams{CWD: "/srv/api", Path: "/srv/api.worktrees/agents/x"})
			},
			wantMethod: "worktree.open", wantParams: `{"cwd":"/srv/api","path":"/srv/api.worktrees/agents/x"}`,
			result: opened,
			want:   &WorktreeWorkspace{Workspace: wantLinkedWorkspace, Tab: wantTab, RootPane: wantPane, Worktree: wantWorktree, AlreadyOpen: true},
		},
		{
			name: "worktree.list",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListWorktrees(ctx, WorktreeListParams{CWD: "/srv/api"})
			},
			wantMethod: "worktree.list", wantParams: `{"cwd":"/srv/api"}`,
			result: `{"type":"worktree_list","source":{"repo_key":"/srv/api","repo_name":"api","repo_root":"/srv/api",` +
				`"source_checkout_path":"/srv/api","source_workspace_id":null},"worktrees":[` + worktreeJSON +
				`,{"path":"/srv/api","branch":null,"label":"api","is_bare":false,"is_detached":true,"is_prunable":false,"is_linked_worktree":false,"open_workspace_id":null}]}`,
			want: &WorktreeList{Source: WorktreeSourceInfo{RepoKey: "/srv/api", RepoName: "api", RepoRoot: "/srv/api", SourceCheckoutPath: "/srv/api"},
				Worktrees: []WorktreeInfo{wantWorktree, {Path: "/srv/api", Label: "api", IsDetached: true}}},
		},
		{
			name: "worktree.remove",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.RemoveWorktree(ctx, WorktreeRemoveParams{WorkspaceID: "w1"})
			},
			wantMethod: "worktree.remove", wantParams: `{"workspace_id":"w1"}`,
			result: `{"type":"worktree_removed","workspace_id":"w1","path":"/srv/api.worktrees/agents/x","forced":false}`,
			want:   &WorktreeRemoved{WorkspaceID: "w1", Path: "/srv/api.worktrees/agents/x"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, serverOptions{protocol: 22}) })
	}
}

// herdr 0.8 (protocol 20) has no worktree API: it answers invalid_request
// (an unknown method, with an empty id), which the client reports as
// unsupported, herdr's error still in the chain; a refusal of herdr 0.9 is
// no such thing.
func TestWorktreeMethods_UnsupportedByProtocol20(t *testing.T) {
	for _, tt := range []struct {
		name, code, message string
		unsupported         bool
	}{
		{"herdr 0.8", "invalid_request", "invalid request: unknown variant `worktree.list`", true},
		{"a newer herdr without it", "unknown_method", "unknown method worktree.list", true},
		{"herdr 0.9 refusing", "workspace_not_found", "workspace w9 not found", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServerOpts(t, serverOptions{protocol: 22}, func(c *scriptConn) {
				id := c.req.ID
				if tt.code == "invalid_request" {
					c.req.ID = "" // protocol 20 answers an unparseable request under ""
				}
				c.fail(tt.code, tt.message)
				c.req.ID = id
			})
			_, err := newClient(t, &Options{SocketPath: srv.path}).ListWorktrees(t.Context(), WorktreeListParams{WorkspaceID: "w9"})
			if errors.Is(err, ErrUnsupported) != tt.unsupported || !IsCode(err, tt.code) || errors.Is(err, ErrUnavailable) {
				t.Errorf("err = %v; want unsupported %v with herdr's %s in the chain, not unavailable", err, tt.unsupported, tt.code)
			}
		})
	}
}

// The worktree events (protocol 22's global subscriptions) decode with
// their worktree, and the workspace they concern.
func TestSubscribe_WorktreeEvents(t *testing.T) {
	lines := []string{
		`{"event":"worktree_created","data":{"type":"worktree_created","workspace":` + linkedWorkspaceJSON + `,"worktree":` + worktreeJSON + `}}`,
		`{"event":"worktree_opened","data":{"type":"worktree_opened","workspace":` + linkedWorkspaceJSON + `,"worktree":` + worktreeJSON + `,"already_open":true}}`,
		`{"event":"worktree_removed","data":{"type":"worktree_removed","workspace_id":"w1","workspace":null,"worktree":` + worktreeJSON + `,"forced":true}}`,
	}
	srv := startServerOpts(t, serverOptions{protocol: 22}, func(c *scriptConn) {
		c.result(ackResult)
		for _, l := range lines {
			c.event(l)
		}
		c.awaitClientClose()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := newClient(t, &Options{SocketPath: srv.path}).Subscribe(ctx, []Subscription{
		{Type: SubWorktreeCreated}, {Type: SubWorktreeOpened}, {Type: SubWorktreeRemoved}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ws, wt := wantLinkedWorkspace, wantWorktree
	diffEvents(t, []Event{
		{Kind: EventWorktreeCreated, Name: "worktree_created", WorkspaceID: "w1", Workspace: &ws, Worktree: &wt},
		{Kind: EventWorktreeOpened, Name: "worktree_opened", WorkspaceID: "w1", Workspace: &ws, Worktree: &wt, AlreadyOpen: true},
		{Kind: EventWorktreeRemoved, Name: "worktree_removed", WorkspaceID: "w1", Worktree: &wt, Forced: true},
	}, collect(t, s, len(lines)))
	for _, k := range []EventKind{EventWorktreeCreated, EventWorktreeOpened, EventWorktreeRemoved} {
		if !(&Event{Kind: k}).Known() {
			t.Errorf("%s is not a known kind", k)
		}
	}
}
