package herdr

import (
	"context"
	"errors"
	"fmt"
)

// herdr 0.9 (protocol 22) makes git worktrees: worktree.create checks a
// branch out in a new linked worktree and opens it as a new workspace
// linked to the repository; worktree.open opens an existing one (a
// workspace already showing it is answered with AlreadyOpen);
// worktree.list lists a repository's worktrees; worktree.remove removes
// the worktree a workspace shows (git refuses one with changes unless
// Force). Protocol 20 has none of them: the methods then fail with an
// error matching [ErrUnsupported].

// ErrUnsupported matches the error of a method this herdr does not have:
// it answered unknown_method or not_implemented, or — to a request that is
// valid in protocol 22, as every worktree request of this package is —
// invalid_request, which is how herdr 0.8 (protocol 20) answers a method it
// does not know. The herdr [*Error] stays in the chain.
var ErrUnsupported = errors.New("not supported by this herdr")

// unsupported marks herdr's refusal of a protocol-22 method as
// ErrUnsupported when it says herdr does not know the method.
func unsupported(err error) error {
	if IsCode(err, "unknown_method") || IsCode(err, "not_implemented") || IsCode(err, "invalid_request") {
		return fmt.Errorf("%w (herdr 0.9, protocol 22, has it): %w", ErrUnsupported, err)
	}
	return err
}

// WorktreeInfo is one git worktree of a repository, as herdr reports it.
type WorktreeInfo struct {
	Path string `json:"path"`
	// Branch is the branch checked out; "" when detached (or bare).
	Branch           string `json:"branch,omitempty"`
	Label            string `json:"label"`
	IsBare           bool   `json:"is_bare"`
	IsDetached       bool   `json:"is_detached"`
	IsPrunable       bool   `json:"is_prunable"`
	IsLinkedWorktree bool   `json:"is_linked_worktree"`
	// OpenWorkspaceID is the workspace that shows the worktree; "" when
	// none does.
	OpenWorkspaceID string `json:"open_workspace_id,omitempty"`
}

// WorktreeSourceInfo is the repository a worktree.list answered for.
type WorktreeSourceInfo struct {
	RepoKey            string `json:"repo_key"`
	RepoName           string `json:"repo_name"`
	RepoRoot           string `json:"repo_root"`
	SourceCheckoutPath string `json:"source_checkout_path"`
	SourceWorkspaceID  string `json:"source_workspace_id,omitempty"`
}

// WorktreeList is the result of worktree.list.
type WorktreeList struct {
	Source    WorktreeSourceInfo `json:"source"`
	Worktrees []WorktreeInfo     `json:"worktrees"`
}

// WorktreeWorkspace is the result of worktree.create and worktree.open:
// the worktree and the workspace that shows it, with the workspace's tab
// and root pane. AlreadyOpen (worktree.open only) says the workspace was
// showing the worktree before.
type WorktreeWorkspace struct {
	Workspace   WorkspaceInfo `json:"workspace"`
	Tab         TabInfo       `json:"tab"`
	RootPane    PaneInfo      `json:"root_pane"`
	Worktree    WorktreeInfo  `json:"worktree"`
	AlreadyOpen bool          `json:"already_open,omitempty"`
}

// WorktreeRemoved is the result of worktree.remove.
type WorktreeRemoved struct {
	WorkspaceID string `json:"workspace_id"`
	Path        string `json:"path"`
	Forced      bool   `json:"forced"`
}

// WorktreeCreateParams are the parameters of worktree.create. The
// repository is the one containing CWD, or the checkout WorkspaceID shows.
// Branch is checked out as it is, or created from Base; Path is where the
// worktree goes (herdr chooses when empty; pass it to find the checkout
// again). TrustRepository lets herdr trust the repository for the agents
// started there: the operator's choice, never a default.
type WorktreeCreateParams struct {
	CWD             string `json:"cwd,omitempty"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	Branch          string `json:"branch,omitempty"`
	Base            string `json:"base,omitempty"`
	Path            string `json:"path,omitempty"`
	Label           string `json:"label,omitempty"`
	Focus           bool   `json:"focus,omitempty"`
	TrustRepository bool   `json:"trust_repository,omitempty"`
}

// WorktreeOpenParams are the parameters of worktree.open: the worktree of
// the repository (as for create) at Path, or with Branch checked out.
type WorktreeOpenParams struct {
	CWD             string `json:"cwd,omitempty"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	Branch          string `json:"branch,omitempty"`
	Path            string `json:"path,omitempty"`
	Label           string `json:"label,omitempty"`
	Focus           bool   `json:"focus,omitempty"`
	TrustRepository bool   `json:"trust_repository,omitempty"`
}

// WorktreeListParams are the parameters of worktree.list.
type WorktreeListParams struct {
	CWD             string `json:"cwd,omitempty"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	TrustRepository bool   `json:"trust_repository,omitempty"`
}

// WorktreeRemoveParams are the parameters of worktree.remove.
type WorktreeRemoveParams struct {
	WorkspaceID     string `json:"workspace_id"`
	Force           bool   `json:"force,omitempty"`
	TrustRepository bool   `json:"trust_repository,omitempty"`
}

// CreateWorktree makes a linked worktree and opens it as a new workspace
// (worktree.create, protocol 22).
func (c *Client) CreateWorktree(ctx context.Context, p WorktreeCreateParams) (*WorktreeWorkspace, error) {
	var r struct {
		resultTag
		WorktreeWorkspace
	}
	if err := c.worktreeCall(ctx, "worktree.create", p, "worktree_created", &r); err != nil {
		return nil, err
	}
	return &r.WorktreeWorkspace, nil
}

// OpenWorktree opens an existing worktree in a workspace, or answers with
// the workspace that shows it already (worktree.open, protocol 22).
func (c *Client) OpenWorktree(ctx context.Context, p WorktreeOpenParams) (*WorktreeWorkspace, error) {
	var r struct {
		resultTag
		WorktreeWorkspace
	}
	if err := c.worktreeCall(ctx, "worktree.open", p, "worktree_opened", &r); err != nil {
		return nil, err
	}
	return &r.WorktreeWorkspace, nil
}

// ListWorktrees lists a repository's worktrees (worktree.list, protocol
// 22).
func (c *Client) ListWorktrees(ctx context.Context, p WorktreeListParams) (*WorktreeList, error) {
	var r struct {
		resultTag
		WorktreeList
	}
	if err := c.worktreeCall(ctx, "worktree.list", p, "worktree_list", &r); err != nil {
		return nil, err
	}
	return &r.WorktreeList, nil
}

// RemoveWorktree removes the worktree a workspace shows (worktree.remove,
// protocol 22); without Force, git refuses a checkout with changes.
func (c *Client) RemoveWorktree(ctx context.Context, p WorktreeRemoveParams) (*WorktreeRemoved, error) {
	var r struct {
		resultTag
		WorktreeRemoved
	}
	if err := c.worktreeCall(ctx, "worktree.remove", p, "worktree_removed", &r); err != nil {
		return nil, err
	}
	return &r.WorktreeRemoved, nil
}

// worktreeCall is one call of a worktree method, its result decoded into r.
func (c *Client) worktreeCall(ctx context.Context, method string, p any, wantType string, r typedResult) error {
	if err := c.call(ctx, method, p, wantType, r); err != nil {
		return unsupported(err)
	}
	return nil
}
