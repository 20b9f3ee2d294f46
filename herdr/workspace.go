package herdr

import "context"

// CreateWorkspace creates a workspace with one tab and one pane (workspace.create).
func (c *Client) CreateWorkspace(ctx context.Context, p WorkspaceCreateParams) (*WorkspaceCreated, error) {
	var r struct {
		resultTag
		WorkspaceCreated
	}
	if err := c.call(ctx, "workspace.create", p, "workspace_created", &r); err != nil {
		return nil, err
	}
	return &r.WorkspaceCreated, nil
}

// ListWorkspaces lists all workspaces (workspace.list).
func (c *Client) ListWorkspaces(ctx context.Context) ([]WorkspaceInfo, error) {
	var r struct {
		resultTag
		Workspaces []WorkspaceInfo `json:"workspaces"`
	}
	if err := c.call(ctx, "workspace.list", nil, "workspace_list", &r); err != nil {
		return nil, err
	}
	return r.Workspaces, nil
}

// CloseWorkspace closes a workspace with all its tabs and panes (workspace.close).
func (c *Client) CloseWorkspace(ctx context.Context, workspaceID string) error {
	return c.call(ctx, "workspace.close", struct {
		WorkspaceID string `json:"workspace_id"`
	}{workspaceID}, "ok", nil)
}

// Snapshot returns herdr's whole session in one call (session.snapshot):
// after subscribing, the resync herdr advises.
func (c *Client) Snapshot(ctx context.Context) (*SessionSnapshot, error) {
	var r struct {
		resultTag
		Snapshot SessionSnapshot `json:"snapshot"`
	}
	if err := c.call(ctx, "session.snapshot", nil, "session_snapshot", &r); err != nil {
		return nil, err
	}
	return &r.Snapshot, nil
}

// CreateTab creates a tab with one pane (tab.create).
func (c *Client) CreateTab(ctx context.Context, p TabCreateParams) (*TabCreated, error) {
	var r struct {
		resultTag
		TabCreated
	}
	if err := c.call(ctx, "tab.create", p, "tab_created", &r); err != nil {
		return nil, err
	}
	return &r.TabCreated, nil
}

// ListTabs lists the tabs of a workspace, or of herdr's default choice when
// workspaceID is empty (tab.list).
func (c *Client) ListTabs(ctx context.Context, workspaceID string) ([]TabInfo, error) {
	var r struct {
		resultTag
		Tabs []TabInfo `json:"tabs"`
	}
	if err := c.call(ctx, "tab.list", workspaceParam{workspaceID}, "tab_list", &r); err != nil {
		return nil, err
	}
	return r.Tabs, nil
}

// CloseTab closes a tab and its panes (tab.close). herdr emits tab_closed but
// no pane_closed for the panes.
func (c *Client) CloseTab(ctx context.Context, tabID string) error {
	return c.call(ctx, "tab.close", struct {
		TabID string `json:"tab_id"`
	}{tabID}, "ok", nil)
}

// workspaceParam is the optional workspace filter of the list methods.
type workspaceParam struct {
	WorkspaceID string `json:"workspace_id,omitempty"`
}
