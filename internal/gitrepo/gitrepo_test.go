package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
)

func TestToplevel(t *testing.T) {
	ctx := context.Background()
	repo := gitrepotest.Repo(t)
	gitrepotest.Write(t, repo, "sub/file", "x")
	plain := t.TempDir()
	for _, tt := range []struct {
		name, dir, want string
		notRepo         bool
	}{
		{"the root", repo, repo, false},
		{"a subdirectory", filepath.Join(repo, "sub"), repo, false},
		{"a directory in no repository", plain, "", true},
		{"a directory that does not exist", filepath.Join(plain, "missing"), "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Toplevel(ctx, tt.dir)
			if tt.notRepo {
				if !errors.Is(err, ErrNotRepository) {
					t.Fatalf("Toplevel(%s) = %q, %v; want an error matching ErrNotRepository", tt.dir, got, err)
				}
				if !strings.Contains(err.Error(), tt.dir) {
					t.Errorf("error %q does not name the directory", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Toplevel(%s) = %q, %v; want %q", tt.dir, got, err, tt.want)
			}
		})
	}
}

// The variables that point git at another repository are not passed on:
// a fleetd started from a git hook still works on the repository it names.
func TestToplevel_IgnoresGitDirFromTheEnvironment(t *testing.T) {
	repo, other := gitrepotest.Repo(t), gitrepotest.Repo(t)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	if got, err := Toplevel(context.Background(), repo); err != nil || got != repo {
		t.Fatalf("Toplevel = %q, %v; want %q", got, err, repo)
	}
}

func TestNoGitInstalled(t *testing.T) {
	repo := gitrepotest.Repo(t)
	t.Setenv("PATH", t.TempDir())
	if _, err := Toplevel(context.Background(), repo); !errors.Is(err, ErrNoGit) {
		t.Fatalf("err = %v, want ErrNoGit", err)
	}
}

func TestAddWorktree_NewAndExistingBranch(t *testing.T) {
	ctx := context.Background()
	repo := gitrepotest.Repo(t)
	gitrepotest.Git(t, repo, "branch", "existing")
	gitrepotest.Commit(t, repo, "later", "x", "a commit after the branch")
	wts := filepath.Join(filepath.Dir(repo), "wts")

	if err := AddWorktree(ctx, repo, filepath.Join(wts, "agent/one"), "agent/one", "existing"); err != nil {
		t.Fatal(err)
	}
	if err := AddWorktree(ctx, repo, filepath.Join(wts, "existing"), "existing", "main"); err != nil {
		t.Fatal(err)
	}
	list, err := Worktrees(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	tip := func(ref string) string { return gitrepotest.Git(t, repo, "rev-parse", ref) }
	want := []Worktree{
		{Path: repo, Head: tip("main"), Branch: "main"},
		{Path: filepath.Join(wts, "agent/one"), Head: tip("existing"), Branch: "agent/one"},
		{Path: filepath.Join(wts, "existing"), Head: tip("existing"), Branch: "existing"},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("worktrees (-want +got):\n%s", diff)
	}
	if w, ok := FindBranch(list, "agent/one"); !ok || w.Path != filepath.Join(wts, "agent/one") {
		t.Errorf("FindBranch(agent/one) = %+v, %v", w, ok)
	}
	if _, ok := FindBranch(list, "nope"); ok {
		t.Error("FindBranch found a branch no worktree has")
	}
	if err := AddWorktree(ctx, repo, filepath.Join(wts, "again"), "agent/one", ""); err == nil {
		t.Error("a branch checked out twice: want git's refusal")
	}
}

func TestParseWorktrees_DetachedBarePrunableLocked(t *testing.T) {
	out := "worktree /r\nbare\n\nworktree /w1\nHEAD abc\ndetached\nlocked reason\n\nworktree /w2\nHEAD def\nbranch refs/heads/x/y\nprunable gitdir file points to non-existent location\n\n"
	want := []Worktree{{Path: "/r", Bare: true}, {Path: "/w1", Head: "abc", Detached: true, Locked: true},
		{Path: "/w2", Head: "def", Branch: "x/y", Prunable: true}}
	if diff := cmp.Diff(want, parseWorktrees(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Values that git would read as options, or that no path holds, are
// refused before git runs.
func TestOptionLikeValuesAreRefused(t *testing.T) {
	ctx := context.Background()
	repo := gitrepotest.Repo(t)
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"branch", AddWorktree(ctx, repo, filepath.Join(t.TempDir(), "w"), "--orphan", "")},
		{"path", AddWorktree(ctx, repo, "-f", "b", "")},
		{"base", AddWorktree(ctx, repo, filepath.Join(t.TempDir(), "w"), "b", "--detach")},
		{"removed path", RemoveWorktree(ctx, repo, "--force")},
		{"NUL", AddWorktree(ctx, repo, filepath.Join(t.TempDir(), "w"), "b\x00", "")},
		{"directory", func() error { _, err := Toplevel(ctx, "-C"); return err }()},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), "option") && !strings.Contains(tt.err.Error(), "NUL") {
			t.Errorf("%s: err = %v, want a refusal", tt.name, tt.err)
		}
	}
	if list, _ := Worktrees(ctx, repo); len(list) != 1 {
		t.Errorf("a refused call made a worktree: %+v", list)
	}
}

func TestReadStatus(t *testing.T) {
	ctx := context.Background()
	repo := gitrepotest.Repo(t)
	path := filepath.Join(filepath.Dir(repo), "wt")
	if err := AddWorktree(ctx, repo, path, "feature", ""); err != nil {
		t.Fatal(err)
	}
	read := func() Status {
		t.Helper()
		st, err := ReadStatus(ctx, repo, path, "")
		if err != nil {
			t.Fatal(err)
		}
		st.Head = strings.TrimSpace(st.Head)
		return st
	}
	head := func() string { return gitrepotest.Git(t, path, "rev-parse", "HEAD") }
	if diff := cmp.Diff(Status{Head: head(), Branch: "feature", LastCommit: "initial commit"}, read()); diff != "" {
		t.Errorf("fresh worktree (-want +got):\n%s", diff)
	}
	gitrepotest.Commit(t, path, "a.txt", "a", "add a")
	gitrepotest.Commit(t, repo, "m.txt", "m", "main moves on")
	gitrepotest.Write(t, path, "untracked.txt", "u")
	gitrepotest.Git(t, path, "mv", "a.txt", "b.txt") // a rename is one entry
	gitrepotest.Write(t, path, "README", "changed")
	if diff := cmp.Diff(Status{Head: head(), Branch: "feature", Dirty: 3, Ahead: 1, Behind: 1, LastCommit: "add a"}, read()); diff != "" {
		t.Errorf("after work (-want +got):\n%s", diff)
	}
	// Against an explicit base.
	st, err := ReadStatus(ctx, repo, path, head())
	if err != nil || st.Ahead != 0 || st.Behind != 0 {
		t.Errorf("against its own head: %+v, %v", st, err)
	}
	gitrepotest.Git(t, path, "checkout", "--quiet", "--detach")
	if st := read(); st.Branch != "" {
		t.Errorf("detached: branch %q", st.Branch)
	}
}

func TestReadStatus_LongSubjectIsCut(t *testing.T) {
	repo := gitrepotest.Repo(t)
	gitrepotest.Commit(t, repo, "f", "x", strings.Repeat("é", MaxSubject))
	st, err := ReadStatus(context.Background(), repo, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LastCommit) > MaxSubject || !strings.HasPrefix(strings.Repeat("é", MaxSubject), st.LastCommit) || st.LastCommit == "" {
		t.Errorf("subject %d bytes %q, want a prefix of at most %d bytes on a rune boundary", len(st.LastCommit), st.LastCommit, MaxSubject)
	}
}

func TestEntryCounter(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want int
	}{
		{"", 0},
		{" M a\x00", 1},
		{" M a\x00?? b\x00", 2},
		{"R  new\x00old\x00 M c\x00", 2},
		{"C  copy\x00orig\x00", 1},
	} {
		var c entryCounter
		for i := range len(tt.out) { // byte by byte: fields split across writes
			c.Write([]byte{tt.out[i]})
		}
		if c.n != tt.want {
			t.Errorf("%q: %d entries, want %d", tt.out, c.n, tt.want)
		}
	}
}

func TestCheckRemovable(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (repo, path string) {
		repo = gitrepotest.Repo(t)
		path = filepath.Join(filepath.Dir(repo), "wt")
		if err := AddWorktree(ctx, repo, path, "feature", ""); err != nil {
			t.Fatal(err)
		}
		return repo, path
	}
	for _, tt := range []struct {
		name    string
		prepare func(t *testing.T, repo, path string)
		ok      bool
		why     string
	}{
		{"nothing done: merged by definition", func(*testing.T, string, string) {}, true, ""},
		{"uncommitted change", func(t *testing.T, repo, path string) { gitrepotest.Write(t, path, "x", "x") }, false, "1 uncommitted change"},
		{"committed, not merged, no upstream", func(t *testing.T, repo, path string) {
			gitrepotest.Commit(t, path, "x", "x", "work")
		}, false, "branch feature is not merged into the repository's HEAD and it has no upstream"},
		{"committed and merged", func(t *testing.T, repo, path string) {
			gitrepotest.Commit(t, path, "x", "x", "work")
			gitrepotest.Git(t, repo, "merge", "--quiet", "--no-edit", "feature")
		}, true, ""},
		{"committed and pushed", commitAndPush, true, ""},
		{"pushed, then more work", func(t *testing.T, repo, path string) {
			commitAndPush(t, repo, path)
			gitrepotest.Commit(t, path, "y", "y", "more work")
		}, false, "not all of it is pushed to origin/feature"},
		{"moved off its branch", func(t *testing.T, repo, path string) {
			gitrepotest.Commit(t, path, "x", "x", "work")
			gitrepotest.Git(t, path, "checkout", "--quiet", "--detach")
			gitrepotest.Commit(t, path, "y", "y", "detached work")
		}, false, "it is not on branch feature any more"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo, path := setup(t)
			tt.prepare(t, repo, path)
			r, err := CheckRemovable(ctx, repo, path, "feature", "")
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() != tt.ok || !strings.Contains(r.Why("feature", ""), tt.why) || tt.ok && r.Why("feature", "") != "" {
				t.Errorf("CheckRemovable = %+v: OK %v, why %q; want OK %v, why containing %q", r, r.OK(), r.Why("feature", ""), tt.ok, tt.why)
			}
		})
	}
}

// commitAndPush commits in the worktree at path and pushes its branch,
// feature, to a new bare remote of repo, as its upstream.
func commitAndPush(t *testing.T, repo, path string) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitrepotest.Git(t, repo, "init", "--quiet", "--bare", remote)
	gitrepotest.Git(t, repo, "remote", "add", "origin", remote)
	gitrepotest.Commit(t, path, "x", "x", "work")
	gitrepotest.Git(t, path, "push", "--quiet", "-u", "origin", "feature")
}

func TestRemoveWorktree_RefusesChangesKeepsBranch(t *testing.T) {
	ctx := context.Background()
	repo := gitrepotest.Repo(t)
	path := filepath.Join(filepath.Dir(repo), "wt")
	if err := AddWorktree(ctx, repo, path, "feature", ""); err != nil {
		t.Fatal(err)
	}
	gitrepotest.Write(t, path, "x", "uncommitted")
	if err := RemoveWorktree(ctx, repo, path); err == nil {
		t.Fatal("removed a worktree with changes")
	}
	if _, err := os.Stat(filepath.Join(path, "x")); err != nil {
		t.Fatalf("the change is gone: %v", err)
	}
	os.Remove(filepath.Join(path, "x"))
	if err := RemoveWorktree(ctx, repo, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree directory still there: %v", err)
	}
	if ok, err := BranchExists(ctx, repo, "feature"); !ok || err != nil {
		t.Errorf("branch gone with its worktree: %v, %v", ok, err)
	}
	if err := RemoveWorktree(ctx, repo, repo); err == nil {
		t.Error("removed the main working tree")
	}
}

func TestOutputIsBounded(t *testing.T) {
	repo := gitrepotest.Repo(t)
	out := &boundedBuffer{limit: 10}
	err := stream(context.Background(), Timeout, repo, out, "rev-parse", "HEAD") // 41 bytes
	if !errors.Is(err, ErrOutputLimit) {
		t.Fatalf("err = %v, want ErrOutputLimit", err)
	}
	if out.Len() > 10 {
		t.Errorf("kept %d bytes", out.Len())
	}
}

func TestCancelledContextStopsTheCall(t *testing.T) {
	repo := gitrepotest.Repo(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Toplevel(ctx, repo); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
