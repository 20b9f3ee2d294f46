package herdrsim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
)

// The worktree methods of protocol 22 on real git, in throwaway
// repositories. The harness checks every request, response and stream line
// against herdr's protocol-22 schema.

// worktreeSetup starts a fake with a workspace open in a fresh repository
// (the repository's own workspace) and returns the repository and that
// workspace's id.
func worktreeSetup(t *testing.T) (*harness, string, string) {
	t.Helper()
	h := newHarness(t, nil)
	repo := gitrepotest.Repo(t)
	main, _ := h.workspace(map[string]any{"cwd": repo})
	return h, repo, main
}

// hasWorkspace reports whether workspace.list shows workspace id.
func (h *harness) hasWorkspace(id string) bool {
	h.t.Helper()
	for _, w := range h.ok("workspace.list", map[string]any{})["workspaces"].([]any) {
		if w.(map[string]any)["workspace_id"] == id {
			return true
		}
	}
	return false
}

func gitWorktrees(t *testing.T, repo string) string {
	t.Helper()
	return gitrepotest.Git(t, repo, "worktree", "list", "--porcelain")
}

func TestWorktree_CreateOpensALinkedWorkspace(t *testing.T) {
	t.Parallel()
	h, repo, main := worktreeSetup(t)
	s := h.subscribe(sub("workspace.created"), sub("worktree.created"))
	res := h.ok("worktree.create", map[string]any{"cwd": repo, "branch": "agents/x", "trust_repository": true})
	path := filepath.Join(filepath.Dir(repo), "repo.worktrees", "agents/x")
	ws := str(res, "workspace", "workspace_id")
	want := map[string]any{"repo_key": repo, "repo_name": "repo", "repo_root": repo, "checkout_path": path, "is_linked_worktree": true}
	if diff := cmp.Diff(want, res["workspace"].(map[string]any)["worktree"]); diff != "" {
		t.Errorf("workspace's worktree (-want +got):\n%s", diff)
	}
	if wt := res["worktree"].(map[string]any); wt["path"] != path || wt["branch"] != "agents/x" || wt["open_workspace_id"] != ws || wt["is_linked_worktree"] != true {
		t.Errorf("worktree = %v", wt)
	}
	if str(res, "root_pane", "cwd") != path || str(res, "root_pane", "workspace_id") != ws {
		t.Errorf("root pane = %v, want one in %s", res["root_pane"], path)
	}
	if list := gitWorktrees(t, repo); !strings.Contains(list, "worktree "+path+"\n") || !strings.Contains(list, "branch refs/heads/agents/x") {
		t.Errorf("git does not know the worktree:\n%s", list)
	}
	if ev := s.event(); ev.Event != "workspace_created" || str(ev.Data, "workspace", "workspace_id") != ws {
		t.Errorf("first event %s, want the new workspace", ev.raw)
	}
	if ev := s.event(); ev.Event != "worktree_created" || str(ev.Data, "worktree", "path") != path {
		t.Errorf("second event %s, want worktree_created", ev.raw)
	}
	if got := h.srv.TrustedRepositories(); !slices.Equal(got, []string{repo}) {
		t.Errorf("trusted %v, want the repository", got)
	}
	// The repository's own workspace now has a linked worktree workspace.
	if code, _ := h.fail("workspace.close", map[string]any{"workspace_id": main}); code != "workspace_group_close_required" {
		t.Errorf("closing the repository's workspace: %s, want workspace_group_close_required", code)
	}
	// Without trust_repository nothing is trusted; a path and base are honoured.
	h2, repo2, _ := worktreeSetup(t)
	gitrepotest.Git(t, repo2, "branch", "base")
	gitrepotest.Commit(t, repo2, "later", "x", "after base")
	at := filepath.Join(t.TempDir(), "checkout")
	h2.ok("worktree.create", map[string]any{"cwd": repo2, "branch": "feature", "base": "base", "path": at})
	if got := gitrepotest.Git(t, at, "rev-parse", "HEAD"); got != gitrepotest.Git(t, repo2, "rev-parse", "base") {
		t.Errorf("feature starts at %s, not at its base", got)
	}
	if got := h2.srv.TrustedRepositories(); len(got) != 0 {
		t.Errorf("trusted %v without trust_repository", got)
	}
}

func TestWorktree_OpenExistingOnceThenAlreadyOpen(t *testing.T) {
	t.Parallel()
	h, repo, _ := worktreeSetup(t)
	path := filepath.Join(t.TempDir(), "wt")
	gitrepotest.Git(t, repo, "worktree", "add", "-b", "made-by-hand", path)
	s := h.subscribe(sub("worktree.opened"))
	first := h.ok("worktree.open", map[string]any{"cwd": repo, "branch": "made-by-hand"})
	ws := str(first, "workspace", "workspace_id")
	if first["already_open"] != false || str(first, "workspace", "worktree", "checkout_path") != path {
		t.Errorf("first open = %v", first)
	}
	again := h.ok("worktree.open", map[string]any{"cwd": repo, "path": path})
	if again["already_open"] != true || str(again, "workspace", "workspace_id") != ws || str(again, "root_pane", "workspace_id") != ws {
		t.Errorf("second open = %v, want workspace %s already open", again, ws)
	}
	for _, already := range []bool{false, true} {
		if ev := s.event(); ev.Event != "worktree_opened" || ev.Data["already_open"] != already {
			t.Errorf("event %s, want worktree_opened already_open %v", ev.raw, already)
		}
	}
	if n := strings.Count(gitWorktrees(t, repo), "worktree "); n != 2 {
		t.Errorf("%d worktrees after two opens, want 2", n)
	}
}

func TestWorktree_ListShowsOpenWorkspaces(t *testing.T) {
	t.Parallel()
	h, repo, main := worktreeSetup(t)
	wt := str(h.ok("worktree.create", map[string]any{"workspace_id": main, "branch": "b1"}), "workspace", "workspace_id")
	closed := filepath.Join(t.TempDir(), "closed")
	gitrepotest.Git(t, repo, "worktree", "add", "-b", "b2", closed)
	res := h.ok("worktree.list", map[string]any{"cwd": repo})
	if src := res["source"].(map[string]any); src["repo_root"] != repo || src["source_checkout_path"] != repo || src["source_workspace_id"] != main {
		t.Errorf("source = %v", src)
	}
	type row struct {
		Path, Branch string
		Linked       bool
		Open         any
	}
	var got []row
	for _, w := range res["worktrees"].([]any) {
		m := w.(map[string]any)
		got = append(got, row{m["path"].(string), m["branch"].(string), m["is_linked_worktree"].(bool), m["open_workspace_id"]})
	}
	want := []row{{repo, "main", false, main}, {filepath.Join(filepath.Dir(repo), "repo.worktrees", "b1"), "b1", true, wt}, {closed, "b2", true, nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("worktrees (-want +got):\n%s", diff)
	}
}

func TestWorktree_RemoveRefusesChangesUnlessForced(t *testing.T) {
	t.Parallel()
	h, repo, _ := worktreeSetup(t)
	res := h.ok("worktree.create", map[string]any{"cwd": repo, "branch": "work"})
	ws, path := str(res, "workspace", "workspace_id"), str(res, "worktree", "path")
	gitrepotest.Write(t, path, "notes.txt", "not committed")
	s := h.subscribe(sub("workspace.closed"), sub("worktree.removed"))
	if code, _ := h.fail("worktree.remove", map[string]any{"workspace_id": ws}); code != "git_failed" {
		t.Errorf("remove of a dirty worktree: %s, want git_failed", code)
	}
	if _, err := os.Stat(filepath.Join(path, "notes.txt")); err != nil {
		t.Fatalf("the uncommitted file is gone: %v", err)
	}
	if !h.hasWorkspace(ws) {
		t.Fatal("a refused remove closed the workspace")
	}
	got := h.ok("worktree.remove", map[string]any{"workspace_id": ws, "force": true})
	if diff := cmp.Diff(map[string]any{"type": "worktree_removed", "workspace_id": ws, "path": path, "forced": true}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("worktree directory after a forced remove: %v", err)
	}
	if h.hasWorkspace(ws) {
		t.Error("the workspace of the removed worktree is still open")
	}
	if ev := s.event(); ev.Event != "workspace_closed" || str(ev.Data, "workspace_id") != ws {
		t.Errorf("event %s, want workspace_closed", ev.raw)
	}
	if ev := s.event(); ev.Event != "worktree_removed" || ev.Data["forced"] != true || str(ev.Data, "worktree", "path") != path {
		t.Errorf("event %s, want worktree_removed forced", ev.raw)
	}
	if gitrepotest.Git(t, repo, "branch", "--list", "work") == "" {
		t.Error("the branch went with its worktree")
	}
	// A clean one goes without force.
	clean := str(h.ok("worktree.create", map[string]any{"cwd": repo, "branch": "clean"}), "workspace", "workspace_id")
	if got := h.ok("worktree.remove", map[string]any{"workspace_id": clean}); got["forced"] != false {
		t.Errorf("clean remove = %v", got)
	}
}

func TestWorktree_Errors(t *testing.T) {
	t.Parallel()
	h, repo, main := worktreeSetup(t)
	plain, _ := h.workspace(map[string]any{"cwd": t.TempDir()})
	h.ok("worktree.create", map[string]any{"cwd": repo, "branch": "taken"})
	for _, tt := range []struct {
		name, method string
		params       map[string]any
		code         string
	}{
		{"create outside a repository", "worktree.create", map[string]any{"cwd": t.TempDir(), "branch": "x"}, "not_a_git_repository"},
		{"list of a missing directory", "worktree.list", map[string]any{"cwd": "/nonexistent/fleetd-sim"}, "not_a_git_repository"},
		{"list of a workspace in no repository", "worktree.list", map[string]any{"workspace_id": plain}, "not_a_git_repository"},
		{"create of a branch checked out elsewhere", "worktree.create", map[string]any{"cwd": repo, "branch": "main"}, "git_failed"},
		{"open of no worktree", "worktree.open", map[string]any{"cwd": repo, "branch": "nope"}, "worktree_not_found"},
		{"remove of the repository's own workspace", "worktree.remove", map[string]any{"workspace_id": main}, "not_a_linked_worktree"},
		{"remove of an unknown workspace", "worktree.remove", map[string]any{"workspace_id": "w99"}, "workspace_not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, _ := h.fail(tt.method, tt.params); code != tt.code {
				t.Errorf("%s = %s, want %s", tt.method, code, tt.code)
			}
		})
	}
}

// herdr 0.8 (protocol 20) has no worktree methods: invalid_request under an
// empty id, with or without the fake's schema check.
func TestWorktree_Protocol20AnswersInvalidRequest(t *testing.T) {
	t.Parallel()
	repo := gitrepotest.Repo(t)
	for _, validate := range []bool{true, false} {
		o := &herdrsim.Options{Protocol: 20, InMemory: true}
		var srv *herdrsim.Server
		var err error
		if validate {
			h := newHarness(t, o)
			srv = h.srv
		} else if srv, err = herdrsim.Start(o); err != nil {
			t.Fatal(err)
		} else {
			t.Cleanup(func() { srv.Close() })
		}
		c, err := srv.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]any{"id": "req-1", "method": "worktree.list", "params": map[string]any{"cwd": repo}})
		c.Write(append(line, '\n'))
		resp, err := bufio.NewReader(c).ReadBytes('\n')
		c.Close()
		var r response
		if err != nil || json.Unmarshal(resp, &r) != nil || r.Error == nil || r.Error.Code != "invalid_request" || r.ID != "" {
			t.Errorf("validate %v: %s (%v), want invalid_request under \"\"", validate, resp, err)
		}
	}
	if n := strings.Count(gitWorktrees(t, repo), "worktree "); n != 1 {
		t.Errorf("protocol 20 made a worktree")
	}
}
