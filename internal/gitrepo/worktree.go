package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Toplevel returns the root of the working tree dir is in: dir itself for a
// repository's root or a linked worktree's. A dir that is in no repository,
// or does not exist, is an error matching ErrNotRepository.
func Toplevel(ctx context.Context, dir string) (string, error) {
	top, err := output(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	if top == "" {
		return "", fmt.Errorf("%s: %w (a bare repository has no working tree)", dir, ErrNotRepository)
	}
	return filepath.Clean(top), nil
}

// Worktree is one of a repository's worktrees, as `git worktree list
// --porcelain` reports it. The first one is the main working tree.
type Worktree struct {
	Path string
	// Head is the commit checked out; empty in a bare repository.
	Head string
	// Branch is the branch checked out, without refs/heads/; empty when
	// the head is detached.
	Branch   string
	Bare     bool
	Detached bool
	// Prunable: git would prune it (its directory is gone).
	Prunable bool
	Locked   bool
}

// Worktrees lists the worktrees of the repository dir is in.
func Worktrees(ctx context.Context, dir string) ([]Worktree, error) {
	out, err := run(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	return parseWorktrees(string(out)), nil
}

// parseWorktrees reads `git worktree list --porcelain`: blocks of
// "key value" lines separated by an empty line, each opened by "worktree
// PATH".
func parseWorktrees(out string) []Worktree {
	var list []Worktree
	var cur *Worktree
	for _, line := range strings.Split(out, "\n") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "worktree":
			list = append(list, Worktree{Path: filepath.Clean(value)})
			cur = &list[len(list)-1]
		case "":
			cur = nil
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = value
		case "branch":
			cur.Branch = strings.TrimPrefix(value, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "prunable":
			cur.Prunable = true
		case "locked":
			cur.Locked = true
		}
	}
	return list
}

// FindBranch returns the worktree that has branch checked out.
func FindBranch(list []Worktree, branch string) (Worktree, bool) {
	for _, w := range list {
		if w.Branch == branch && !w.Bare {
			return w, true
		}
	}
	return Worktree{}, false
}

// BranchExists reports whether the repository dir is in has a local branch
// of that name.
func BranchExists(ctx context.Context, dir, branch string) (bool, error) {
	if err := checkValue("branch", branch); err != nil {
		return false, err
	}
	_, err := run(ctx, dir, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
	if err == nil {
		return true, nil
	}
	if exitCode(err) == 1 {
		return false, nil
	}
	return false, err
}

// AddWorktree checks branch out in a new worktree at path, a directory
// that does not exist yet (git creates it and its parents): the branch as
// it is when it exists, else a new branch from base (the repository's HEAD
// when base is empty).
func AddWorktree(ctx context.Context, dir, path, branch, base string) error {
	for what, v := range map[string]string{"worktree path": path, "branch": branch} {
		if err := checkValue(what, v); err != nil {
			return err
		}
	}
	exists, err := BranchExists(ctx, dir, branch)
	if err != nil {
		return err
	}
	args := []string{"worktree", "add", "--", path, branch}
	if !exists {
		if base == "" {
			base = "HEAD"
		}
		if err := checkValue("base", base); err != nil {
			return err
		}
		args = []string{"worktree", "add", "-b", branch, "--", path, base}
	}
	_, err = runFor(ctx, CheckoutTimeout, dir, args...)
	return err
}

// RemoveWorktree removes the linked worktree at path. git refuses one with
// changes (no --force, ever) and the main working tree. The branch stays.
func RemoveWorktree(ctx context.Context, dir, path string) error {
	if err := checkValue("worktree path", path); err != nil {
		return err
	}
	_, err := runFor(ctx, CheckoutTimeout, dir, "worktree", "remove", "--", path)
	return err
}

// exitCode is the exit code of a git command that ran and failed; -1 for
// any other error.
func exitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}
