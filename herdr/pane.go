package herdr

import "context"

type paneParam struct {
	PaneID string `json:"pane_id"`
}

// ListPanes lists the panes of a workspace, or of all workspaces when
// workspaceID is empty (pane.list).
func (c *Client) ListPanes(ctx context.Context, workspaceID string) ([]PaneInfo, error) {
	var r struct {
		resultTag
		Panes []PaneInfo `json:"panes"`
	}
	if err := c.call(ctx, "pane.list", workspaceParam{workspaceID}, "pane_list", &r); err != nil {
		return nil, err
	}
	return r.Panes, nil
}

// GetPane returns one pane (pane.get); a closed pane gives pane_not_found.
func (c *Client) GetPane(ctx context.Context, paneID string) (*PaneInfo, error) {
	var r struct {
		resultTag
		Pane PaneInfo `json:"pane"`
	}
	if err := c.call(ctx, "pane.get", paneParam{paneID}, "pane_info", &r); err != nil {
		return nil, err
	}
	return &r.Pane, nil
}

// ClosePane closes a pane (pane.close). herdr hangs up the pane's processes
// (SIGHUP, SIGTERM, SIGKILL) before it replies.
func (c *Client) ClosePane(ctx context.Context, paneID string) error {
	return c.call(ctx, "pane.close", paneParam{paneID}, "ok", nil)
}

// SplitPane splits a pane and returns the new pane (pane.split).
func (c *Client) SplitPane(ctx context.Context, p PaneSplitParams) (*PaneInfo, error) {
	var r struct {
		resultTag
		Pane PaneInfo `json:"pane"`
	}
	if err := c.call(ctx, "pane.split", p, "pane_info", &r); err != nil {
		return nil, err
	}
	return &r.Pane, nil
}

// ReadPane reads a pane's terminal text (pane.read).
func (c *Client) ReadPane(ctx context.Context, p PaneReadParams) (*PaneReadResult, error) {
	var r struct {
		resultTag
		Read PaneReadResult `json:"read"`
	}
	if err := c.call(ctx, "pane.read", p, "pane_read", &r); err != nil {
		return nil, err
	}
	return &r.Read, nil
}

// SendText writes text to a pane as raw bytes: no bracketed paste, no Enter
// (pane.send_text).
func (c *Client) SendText(ctx context.Context, paneID, text string) error {
	return c.call(ctx, "pane.send_text", struct {
		PaneID string `json:"pane_id"`
		Text   string `json:"text"`
	}{paneID, text}, "ok", nil)
}

// SendKeys presses keys in a pane ("enter", "ctrl+c", "esc", …;
// pane.send_keys). An unknown key fails with invalid_key before any is sent.
func (c *Client) SendKeys(ctx context.Context, paneID string, keys []string) error {
	return c.call(ctx, "pane.send_keys", struct {
		PaneID string   `json:"pane_id"`
		Keys   []string `json:"keys"`
	}{paneID, nonNil(keys)}, "ok", nil)
}

// nonNil makes a nil slice encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
