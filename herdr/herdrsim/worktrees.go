package herdrsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/fleetd-dev/fleetd/internal/gitrepo"
)

// Worktrees (protocol 22). herdr 0.9 runs git for worktree.create, open,
// list and remove, and so does the fake: the system git, through package
// internal/gitrepo, on real repositories (tests make throwaway ones). git
// runs outside the model's lock, which every other request waits on: a
// method reads what it needs under the lock, runs git without it, then
// takes the lock again to change the model (a workspace that closed
// meanwhile is not resurrected). Protocol 20 has no worktree methods: the
// fake answers them with invalid_request, as herdr 0.8 answers a method it
// does not know.
//
// The fake's own choices where herdr's documents are silent: the error
// codes not_a_git_repository (the cwd or workspace is in no repository),
// worktree_not_found (open: no worktree has that path or branch),
// not_a_linked_worktree (remove: the workspace shows no linked worktree)
// and git_failed (git refused; the message is git's); the path of a
// worktree created without one (REPO.worktrees/BRANCH beside the
// repository); a new workspace's label (the label asked for, else the
// branch, else the checkout's directory name) and a worktree's label (its
// branch, else its directory name); and worktree.remove closing the
// workspace that showed the removed worktree.

// checkout is the git checkout a workspace shows.
type checkout struct {
	repo   string // the repository's main working tree: repo_key and repo_root
	path   string // the checkout itself
	branch string
	linked bool // a linked worktree, not the main working tree
}

// checkoutLocked returns the checkout ws shows as a worktree workspace:
// its own, or — for a repository's workspace that linked worktree
// workspaces were opened from — the main working tree; nil otherwise.
func (s *Server) checkoutLocked(ws *workspace) *checkout {
	if ws.tree != nil {
		return ws.tree
	}
	if len(s.linkedWorkspacesLocked(ws)) > 0 {
		return &checkout{repo: ws.cwd, path: ws.cwd}
	}
	return nil
}

// showingLocked returns the workspace that shows the checkout at path: a
// worktree workspace of it, or a plain workspace opened in it.
func (s *Server) showingLocked(path string) *workspace {
	for _, ws := range s.workspaces {
		if t := ws.tree; t != nil && t.path == path || t == nil && ws.cwd == path {
			return ws
		}
	}
	return nil
}

func worktreeAPIError(err error) *apiError {
	if errors.Is(err, gitrepo.ErrNotRepository) {
		return errorf("not_a_git_repository", "%v", err)
	}
	return errorf("git_failed", "%v", err)
}

// worktreeMethod serves worktree.create, open, list and remove.
func (s *Server) worktreeMethod(c *conn, req Request) {
	if !s.p22() {
		c.writeLine(s.invalidRequest(req, fmt.Errorf("unknown variant `%s`", req.Method)))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends with the call; cancels git when the fake stops first
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	h := map[string]func(*Server, context.Context, json.RawMessage) (typed, *apiError){
		"worktree.create": (*Server).worktreeCreate,
		"worktree.open":   (*Server).worktreeOpen,
		"worktree.list":   (*Server).worktreeList,
		"worktree.remove": (*Server).worktreeRemove,
	}[req.Method]
	res, aerr := h(s, ctx, req.Params)
	if aerr != nil {
		c.writeLine(s.errLine(aerr, req, req.ID))
		return
	}
	c.writeLine(successLine{ID: req.ID, Result: res})
}

// repoParams names the repository of a worktree method: the one cwd is in,
// or the checkout of workspace_id, or (neither) the active workspace's.
type repoParams struct {
	Cwd             *string `json:"cwd"`
	WorkspaceID     *string `json:"workspace_id"`
	TrustRepository bool    `json:"trust_repository"`
}

// repository resolves p to the directory git runs in and the workspace it
// came from (nil for a cwd), under the lock.
func (s *Server) repository(p repoParams) (dir string, from *workspace, aerr *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Cwd != nil && *p.Cwd != "" {
		return *p.Cwd, nil, nil
	}
	ws, aerr := s.targetWorkspaceLocked(p.WorkspaceID)
	if aerr != nil {
		return "", nil, aerr
	}
	if ws.tree != nil {
		return ws.tree.path, ws, nil
	}
	return ws.cwd, ws, nil
}

// repoOf runs git to find the repository dir is in: its main working tree
// and dir's own checkout, with the worktrees.
func repoOf(ctx context.Context, dir string) (root, top string, list []gitrepo.Worktree, aerr *apiError) {
	top, err := gitrepo.Toplevel(ctx, dir)
	if err != nil {
		return "", "", nil, worktreeAPIError(err)
	}
	list, err = gitrepo.Worktrees(ctx, top)
	if err != nil || len(list) == 0 {
		return "", "", nil, worktreeAPIError(err)
	}
	return list[0].Path, top, list, nil
}

// trustLocked records that herdr was asked to trust a repository.
func (s *Server) trustLocked(repo string, trust bool) {
	if trust && !slices.Contains(s.trusted, repo) {
		s.trusted = append(s.trusted, repo)
	}
}

// worktreeInfoLocked renders a worktree as herdr's WorktreeInfo.
func (s *Server) worktreeInfoLocked(w gitrepo.Worktree, root string) wireWorktree {
	info := wireWorktree{Path: w.Path, Label: filepath.Base(w.Path), IsBare: w.Bare, IsDetached: w.Detached,
		IsPrunable: w.Prunable, IsLinkedWorktree: w.Path != root}
	if w.Branch != "" {
		b := w.Branch
		info.Branch, info.Label = &b, b
	}
	if ws := s.showingLocked(w.Path); ws != nil {
		id := ws.id
		info.OpenWorkspaceID = &id
	}
	return info
}

// openWorkspaceLocked opens a workspace for the checkout w of the
// repository root, as worktree.create and open do: one tab, one pane in
// the checkout, the creation events, linked to the repository's own
// workspace when one is open.
func (s *Server) openWorkspaceLocked(w gitrepo.Worktree, root, label string, focus bool) (*workspace, *tab, *pane) {
	if label == "" {
		label = w.Branch
	}
	ws := s.newWorkspaceLocked(label, w.Path)
	ws.tree = &checkout{repo: root, path: w.Path, branch: w.Branch, linked: w.Path != root}
	if main := s.showingLocked(root); main != nil && main != ws && ws.tree.linked {
		ws.primary = main
	}
	t := s.newTabLocked(ws, "")
	root0 := s.newPaneLocked(t, w.Path, nil)
	t.root = &layoutNode{pane: root0}
	if focus || s.activeWS == nil {
		s.focusTabLocked(t)
	}
	s.emitLocked("workspace_created", typed{"workspace": s.workspaceInfoLocked(ws)})
	s.emitLocked("tab_created", typed{"tab": s.tabInfoLocked(t)})
	s.emitLocked("pane_created", typed{"pane": s.paneInfoLocked(root0)})
	s.emitLocked("layout_updated", typed{"layout": s.layoutLocked(t)})
	if focus {
		s.emitLocked("workspace_focused", typed{"workspace_id": ws.id})
	}
	return ws, t, root0
}

type worktreeParams struct {
	repoParams
	Branch *string `json:"branch"`
	Base   *string `json:"base"`
	Path   *string `json:"path"`
	Label  *string `json:"label"`
	Focus  bool    `json:"focus"`
}

// worktreeTarget decodes the params of worktree.create or open and runs
// git to find the repository they name: its main working tree and its
// worktrees.
func (s *Server) worktreeTarget(ctx context.Context, raw json.RawMessage) (p worktreeParams, root string, list []gitrepo.Worktree, aerr *apiError) {
	if aerr = decode(raw, &p); aerr != nil {
		return p, "", nil, aerr
	}
	dir, _, aerr := s.repository(p.repoParams)
	if aerr != nil {
		return p, "", nil, aerr
	}
	root, _, list, aerr = repoOf(ctx, dir)
	return p, root, list, aerr
}

// worktree.create: git worktree add (the branch as it is, or new from
// base), then a new workspace linked to the repository.
func (s *Server) worktreeCreate(ctx context.Context, raw json.RawMessage) (typed, *apiError) {
	p, root, _, aerr := s.worktreeTarget(ctx, raw)
	if aerr != nil {
		return nil, aerr
	}
	branch, path := deref(p.Branch), deref(p.Path)
	if branch == "" && path == "" {
		return nil, errorf("invalid_request", "invalid request: worktree.create needs a branch or a path")
	}
	if path == "" {
		path = filepath.Join(filepath.Dir(root), filepath.Base(root)+".worktrees", branch)
	}
	if branch == "" {
		branch = filepath.Base(path) // git's own choice for `git worktree add PATH`
	}
	if err := gitrepo.AddWorktree(ctx, root, path, branch, deref(p.Base)); err != nil {
		return nil, worktreeAPIError(err)
	}
	list, err := gitrepo.Worktrees(ctx, root)
	if err != nil {
		return nil, worktreeAPIError(err)
	}
	w, ok := gitrepo.FindBranch(list, branch)
	if !ok {
		return nil, errorf("git_failed", "git made no worktree for branch %s", branch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	s.trustLocked(root, p.TrustRepository)
	ws, t, pn := s.openWorkspaceLocked(w, root, deref(p.Label), p.Focus)
	wsInfo, info := s.workspaceInfoLocked(ws), s.worktreeInfoLocked(w, root)
	s.emitLocked("worktree_created", typed{"workspace": wsInfo, "worktree": info})
	return result("worktree_created", "workspace", wsInfo, "tab", s.tabInfoLocked(t), "root_pane", s.paneInfoLocked(pn), "worktree", info), nil
}

// worktree.open: the workspace that shows the worktree (already_open), or
// a new one.
func (s *Server) worktreeOpen(ctx context.Context, raw json.RawMessage) (typed, *apiError) {
	p, root, list, aerr := s.worktreeTarget(ctx, raw)
	if aerr != nil {
		return nil, aerr
	}
	path, branch := deref(p.Path), deref(p.Branch)
	i := slices.IndexFunc(list, func(w gitrepo.Worktree) bool {
		return path != "" && w.Path == filepath.Clean(path) || path == "" && branch != "" && w.Branch == branch
	})
	if i < 0 {
		return nil, errorf("worktree_not_found", "no worktree of %s at path %q or on branch %q", root, path, branch)
	}
	w := list[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	s.trustLocked(root, p.TrustRepository)
	ws, already := s.showingLocked(w.Path), true
	var t *tab
	var pn *pane
	if ws == nil {
		ws, t, pn = s.openWorkspaceLocked(w, root, deref(p.Label), p.Focus)
		already = false
	} else {
		t = ws.active
		pn = t.focused
		if p.Focus {
			s.focusTabLocked(t)
		}
	}
	wsInfo, info := s.workspaceInfoLocked(ws), s.worktreeInfoLocked(w, root)
	s.emitLocked("worktree_opened", typed{"workspace": wsInfo, "worktree": info, "already_open": already})
	return result("worktree_opened", "workspace", wsInfo, "tab", s.tabInfoLocked(t), "root_pane", s.paneInfoLocked(pn),
		"worktree", info, "already_open", already), nil
}

// worktree.list: the repository's worktrees, with the workspaces that show
// them.
func (s *Server) worktreeList(ctx context.Context, raw json.RawMessage) (typed, *apiError) {
	var p repoParams
	if aerr := decode(raw, &p); aerr != nil {
		return nil, aerr
	}
	dir, from, aerr := s.repository(p)
	if aerr != nil {
		return nil, aerr
	}
	root, top, list, aerr := repoOf(ctx, dir)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trustLocked(root, p.TrustRepository)
	source := wireWorktreeSource{RepoKey: root, RepoName: filepath.Base(root), RepoRoot: root, SourceCheckoutPath: top}
	if from == nil {
		from = s.showingLocked(top)
	}
	if from != nil {
		id := from.id
		source.SourceWorkspaceID = &id
	}
	out := make([]wireWorktree, 0, len(list))
	for _, w := range list {
		out = append(out, s.worktreeInfoLocked(w, root))
	}
	return result("worktree_list", "source", source, "worktrees", out), nil
}

// worktree.remove: git worktree remove (--force only when asked: git
// refuses a checkout with changes otherwise), then the workspace that
// showed it closes.
func (s *Server) worktreeRemove(ctx context.Context, raw json.RawMessage) (typed, *apiError) {
	var p struct {
		WorkspaceID     string `json:"workspace_id"`
		Force           bool   `json:"force"`
		TrustRepository bool   `json:"trust_repository"`
	}
	if aerr := decode(raw, &p); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	ws := s.findWorkspaceLocked(p.WorkspaceID)
	var tree checkout
	if ws != nil && s.checkoutLocked(ws) != nil {
		tree = *s.checkoutLocked(ws)
	}
	s.mu.Unlock()
	switch {
	case ws == nil:
		return nil, workspaceNotFound(p.WorkspaceID)
	case !tree.linked:
		return nil, errorf("not_a_linked_worktree", "workspace %s shows no linked worktree", p.WorkspaceID)
	}
	list, err := gitrepo.Worktrees(ctx, tree.repo)
	if err != nil {
		return nil, worktreeAPIError(err)
	}
	i := slices.IndexFunc(list, func(w gitrepo.Worktree) bool { return w.Path == tree.path })
	if i < 0 {
		return nil, errorf("worktree_not_found", "workspace %s shows %s, which is no worktree of %s any more", p.WorkspaceID, tree.path, tree.repo)
	}
	args := []string{"worktree", "remove", "--", tree.path}
	if p.Force {
		args = []string{"worktree", "remove", "--force", "--", tree.path}
	}
	if _, err := gitrepo.Run(ctx, tree.repo, args...); err != nil {
		return nil, worktreeAPIError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	s.trustLocked(tree.repo, p.TrustRepository)
	info := s.worktreeInfoLocked(list[i], tree.repo)
	info.OpenWorkspaceID = nil
	if s.findWorkspaceLocked(ws.id) == ws {
		closed := s.workspaceInfoLocked(ws)
		s.removeWorkspaceLocked(ws)
		s.emitLocked("workspace_closed", typed{"workspace_id": ws.id, "workspace": closed})
		s.settleFocusLocked()
	}
	s.emitLocked("worktree_removed", typed{"workspace_id": ws.id, "workspace": nil, "worktree": info, "forced": p.Force})
	return result("worktree_removed", "workspace_id", ws.id, "path", tree.path, "forced", p.Force), nil
}

// TrustedRepositories lists the repositories a worktree method was asked
// to trust (trust_repository), in the order first asked.
func (s *Server) TrustedRepositories() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.trusted)
}
