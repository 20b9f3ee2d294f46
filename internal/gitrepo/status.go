package gitrepo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxSubject bounds the last commit's subject in a Status (bytes, cut on a
// rune boundary).
const MaxSubject = 200

// Status is what a worktree looks like at a glance.
type Status struct {
	// Head is the commit checked out (full hash).
	Head string
	// Branch is the branch checked out; empty when the head is detached.
	Branch string
	// Dirty is the number of files with uncommitted changes, untracked
	// files included (`git status --porcelain`, one per entry).
	Dirty int
	// Ahead and Behind count the commits of the head not in the base, and
	// of the base not in the head.
	Ahead, Behind int
	// LastCommit is the subject of the head commit, at most MaxSubject
	// bytes.
	LastCommit string
}

// ReadStatus reads the worktree at path of the repository repo; base is
// the ref ahead and behind count against (the repository's HEAD when
// empty: its checked-out branch, read in repo, not in the worktree).
func ReadStatus(ctx context.Context, repo, path, base string) (Status, error) {
	var st Status
	var err error
	if st.Head, err = output(ctx, path, "rev-parse", "--verify", "HEAD"); err != nil {
		return st, err
	}
	branch, err := output(ctx, path, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil && exitCode(err) != 1 { // 1: detached
		return st, err
	}
	st.Branch = branch
	if st.Dirty, err = dirtyCount(ctx, path); err != nil {
		return st, err
	}
	baseCommit, err := resolveBase(ctx, repo, base)
	if err != nil {
		return st, err
	}
	counts, err := output(ctx, path, "rev-list", "--left-right", "--count", baseCommit+"..."+st.Head)
	if err != nil {
		return st, err
	}
	behind, ahead, ok := strings.Cut(counts, "\t")
	if st.Behind, err = strconv.Atoi(behind); err != nil || !ok {
		return st, fmt.Errorf("git rev-list --left-right --count in %s: unexpected output %q", path, counts)
	}
	if st.Ahead, err = strconv.Atoi(ahead); err != nil {
		return st, fmt.Errorf("git rev-list --left-right --count in %s: unexpected output %q", path, counts)
	}
	subject, err := output(ctx, path, "log", "-1", "--format=%s", "HEAD")
	if err != nil {
		return st, err
	}
	st.LastCommit = cut(subject, MaxSubject)
	return st, nil
}

// resolveBase returns the commit base names in repo (its HEAD when base
// is empty).
func resolveBase(ctx context.Context, repo, base string) (string, error) {
	if base == "" {
		base = "HEAD"
	}
	if err := checkValue("base", base); err != nil {
		return "", err
	}
	return output(ctx, repo, "rev-parse", "--verify", base+"^{commit}")
}

// dirtyCount counts the entries of `git status --porcelain -z` in path as
// git prints them, without keeping them.
func dirtyCount(ctx context.Context, path string) (int, error) {
	var c entryCounter
	if err := stream(ctx, Timeout, path, &c, "status", "--porcelain=v1", "-z", "--untracked-files=normal"); err != nil {
		return 0, err
	}
	return c.n, nil
}

// entryCounter counts NUL-terminated porcelain v1 entries; a rename or
// copy ("R " / "C ") is followed by its source path, which is not an entry
// of its own.
type entryCounter struct {
	n        int
	skipNext bool // the next field is a rename's source
	field    int  // bytes seen of the current field
	first    byte // the current field's first byte
}

func (c *entryCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == 0 {
			switch {
			case c.skipNext:
				c.skipNext = false
			case c.field > 0:
				c.n++
				c.skipNext = c.first == 'R' || c.first == 'C'
			}
			c.field = 0
			continue
		}
		if c.field == 0 {
			c.first = b
		}
		c.field++
	}
	return len(p), nil
}

// cut returns s cut to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Removal is what the delete check found: a worktree may go when it has
// no uncommitted change, is still on its branch, and the branch is merged
// into the base or pushed to its upstream.
type Removal struct {
	Dirty int
	// OnBranch: the worktree's head is its branch's tip.
	OnBranch bool
	Merged   bool
	// Upstream is the branch's upstream ("" when it has none); Pushed:
	// every commit of the branch is in it.
	Upstream string
	Pushed   bool
}

// OK reports whether the worktree may be removed without losing work.
func (r Removal) OK() bool { return r.Dirty == 0 && r.OnBranch && (r.Merged || r.Pushed) }

// Why says why the worktree must stay; "" when it may go.
func (r Removal) Why(branch, base string) string {
	if base == "" {
		base = "the repository's HEAD"
	}
	var why []string
	if r.Dirty > 0 {
		why = append(why, fmt.Sprintf("%d uncommitted %s", r.Dirty, plural(r.Dirty, "change", "changes")))
	}
	if !r.OnBranch {
		why = append(why, fmt.Sprintf("it is not on branch %s any more", branch))
	}
	if !r.Merged && !r.Pushed {
		pushed := "it has no upstream"
		if r.Upstream != "" {
			pushed = "not all of it is pushed to " + r.Upstream
		}
		why = append(why, fmt.Sprintf("branch %s is not merged into %s and %s", branch, base, pushed))
	}
	return strings.Join(why, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// CheckRemovable runs the delete check on the worktree at path of repo,
// which should be on branch; base as for ReadStatus.
func CheckRemovable(ctx context.Context, repo, path, branch, base string) (Removal, error) {
	var r Removal
	if err := checkValue("branch", branch); err != nil {
		return r, err
	}
	var err error
	if r.Dirty, err = dirtyCount(ctx, path); err != nil {
		return r, err
	}
	ref := "refs/heads/" + branch
	tip, err := output(ctx, repo, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return r, err
	}
	head, err := output(ctx, path, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return r, err
	}
	r.OnBranch = head == tip
	baseCommit, err := resolveBase(ctx, repo, base)
	if err != nil {
		return r, err
	}
	_, err = run(ctx, repo, "merge-base", "--is-ancestor", tip, baseCommit)
	switch {
	case err == nil:
		r.Merged = true
	case exitCode(err) != 1: // 1: not an ancestor
		return r, err
	}
	if r.Upstream, err = output(ctx, repo, "for-each-ref", "--format=%(upstream)", ref); err != nil {
		return r, err
	}
	if r.Upstream != "" {
		// An upstream never fetched has no ref here: not pushed, as far
		// as this repository knows.
		n, err := output(ctx, repo, "rev-list", "--count", r.Upstream+".."+tip)
		r.Pushed = err == nil && n == "0"
		r.Upstream = strings.TrimPrefix(r.Upstream, "refs/remotes/")
	}
	return r, nil
}
