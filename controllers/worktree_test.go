package controllers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/gitrepo/gitrepotest"
)

// Members on git worktrees, on both herdr protocols: herdr 0.9 makes and
// opens them (worktree.create, worktree.open), herdr 0.8 has no worktree
// API and fleetd runs git itself. Every scenario runs on a throwaway
// repository with the system git.

// worktreeProfile is a Profile whose members get worktrees of repo on
// branches agents/NAME, with extra lines under its worktree setting.
func worktreeProfile(repo string, extra ...string) string {
	s := "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: agents}\nspec:\n  harness: codex\n" +
		"  worktree:\n    repo: " + repo + "\n    branchPrefix: agents\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

// worktreeMember is a member with its own spec.worktree of repo.
func worktreeMember(name, repo, branch string, extra ...string) string {
	return memberYAML(name, append([]string{"worktree:", "  repo: " + repo, "  branch: " + branch}, extra...)...)
}

func (e *env) worktreeOf(name string) *v1alpha1.WorktreeStatus {
	e.t.Helper()
	m, ok := e.mgr.Member(name)
	if !ok {
		e.t.Fatalf("no member %s", name)
	}
	return m.Status.Worktree
}

// logTo makes the Manager log to l.
func (e *env) logTo(l *logBuffer) {
	e.tweak = func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(l, nil)) }
}

// Three members of one profile on one repository each get a worktree of
// their own branch, in which the agent starts; a commit in one is shown as
// ahead 1, with its subject, once the agent goes idle; the dirty file
// count follows too.
func TestWorktree_ThreeMembersOnOneRepositoryEachOnItsBranch(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		repo := gitrepotest.Repo(t)
		e.write("profile.yaml", worktreeProfile(repo, "trustRepository: true"))
		for _, n := range []string{"alpha", "beta", "gamma"} {
			e.write(n+".yaml", strings.Replace(memberYAML(n), "codex-fast", "agents", 1))
		}
		e.start()
		ms := e.waitFor("three members Ready on their worktrees", func(ms map[string]v1alpha1.Member) bool {
			for _, n := range []string{"alpha", "beta", "gamma"} {
				if m := ms[n]; m.Status.Phase != v1alpha1.PhaseReady || m.Status.Worktree == nil {
					return false
				}
			}
			return true
		})
		list := gitrepotest.Git(t, repo, "worktree", "list", "--porcelain")
		for _, n := range []string{"alpha", "beta", "gamma"} {
			path := worktreePath(repo, "agents/"+n)
			st := ms[n].Status
			if want := (v1alpha1.WorktreeStatus{Path: path, Branch: "agents/" + n, Head: gitrepotest.Git(t, repo, "rev-parse", "main"),
				LastCommit: "initial commit"}); *st.Worktree != want {
				t.Errorf("%s: status.worktree %+v, want %+v", n, *st.Worktree, want)
			}
			if p, _ := e.fake.Pane(st.PaneID); p.Cwd != path || p.AgentName != n {
				t.Errorf("%s: pane cwd %q agent %q, want the agent in %s", n, p.Cwd, p.AgentName, path)
			}
			if !strings.Contains(list, "worktree "+path+"\n") || !strings.Contains(list, "branch refs/heads/agents/"+n+"\n") {
				t.Errorf("%s: git has no worktree %s on its branch:\n%s", n, path, list)
			}
		}
		calls := e.fake.Calls()
		if e.protocol == herdrsim.DefaultProtocol {
			if calls["worktree.create"] != 3 || !slices.Equal(e.fake.TrustedRepositories(), []string{repo}) {
				t.Errorf("worktree.create %d, trusted %v; want 3 and the repository (the profile trusts it)", calls["worktree.create"], e.fake.TrustedRepositories())
			}
			labels := e.tabLabels()
			if labels[ms["alpha"].Status.TabID] != TabLabelPrefix+"alpha" {
				t.Errorf("alpha's tab is labelled %q", labels[ms["alpha"].Status.TabID])
			}
		} else if calls["worktree.create"] != 0 || len(e.fake.TrustedRepositories()) != 0 {
			t.Errorf("protocol 20: worktree.create %d", calls["worktree.create"])
		}

		// One agent commits, then goes idle: ahead 1; another leaves a file.
		alpha := ms["alpha"].Status
		gitrepotest.Commit(t, alpha.Worktree.Path, "parser.go", "package parser\n", "add the parser")
		gitrepotest.Write(t, alpha.Worktree.Path, "notes.txt", "to do")
		if err := e.fake.SetAgentStatus(alpha.PaneID, "working"); err != nil {
			t.Fatal(err)
		}
		if err := e.fake.SetAgentStatus(alpha.PaneID, "idle"); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha ahead 1", func(ms map[string]v1alpha1.Member) bool {
			w := ms["alpha"].Status.Worktree
			return w != nil && w.Ahead == 1 && w.Dirty == 1 && w.LastCommit == "add the parser"
		})
		if w := e.worktreeOf("beta"); w.Ahead != 0 || w.Dirty != 0 {
			t.Errorf("beta's worktree changed with alpha's: %+v", w)
		}
		if e.protocol != herdrsim.DefaultProtocol {
			return
		}
		// herdr's worktree events are read too: someone opens beta's
		// worktree in herdr after a commit its agent made without a turn.
		beta := ms["beta"].Status.Worktree.Path
		gitrepotest.Commit(t, beta, "b.txt", "b", "a commit between turns")
		if _, err := e.client.OpenWorktree(context.Background(), herdr.WorktreeOpenParams{CWD: repo, Path: beta}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("beta ahead 1 after herdr's worktree_opened", func(ms map[string]v1alpha1.Member) bool {
			w := ms["beta"].Status.Worktree
			return w != nil && w.Ahead == 1 && w.LastCommit == "a commit between turns"
		})
	})
}

// A worktree of the member's branch that exists already is opened as it
// is, its uncommitted work in place, never made again.
func TestWorktree_OpensTheExistingWorktreeOfTheBranch(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		repo := gitrepotest.Repo(t)
		existing := filepath.Join(t.TempDir(), "by-hand")
		gitrepotest.Git(t, repo, "worktree", "add", "--quiet", "-b", "feature", existing)
		gitrepotest.Write(t, existing, "work.txt", "uncommitted work")
		e.write("profile.yaml", testProfile)
		e.write("alpha.yaml", worktreeMember("alpha", repo, "feature"))
		e.start()
		ms := e.waitFor("alpha Ready", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Status.Phase == v1alpha1.PhaseReady && ms["alpha"].Status.Worktree != nil
		})
		if p, _ := e.fake.Pane(ms["alpha"].Status.PaneID); p.Cwd != existing {
			t.Errorf("pane cwd %q, want the existing worktree %s", p.Cwd, existing)
		}
		if w := ms["alpha"].Status.Worktree; w.Path != existing || w.Dirty != 1 {
			t.Errorf("status.worktree %+v, want %s with its one uncommitted file", w, existing)
		}
		if got, _ := os.ReadFile(filepath.Join(existing, "work.txt")); string(got) != "uncommitted work" {
			t.Errorf("the uncommitted file holds %q", got)
		}
		if c := e.fake.Calls(); c["worktree.create"] != 0 || e.protocol == herdrsim.DefaultProtocol && c["worktree.open"] != 1 {
			t.Errorf("worktree.create %d, worktree.open %d; want the existing one opened", c["worktree.create"], c["worktree.open"])
		}
		if n := strings.Count(gitrepotest.Git(t, repo, "worktree", "list", "--porcelain"), "worktree "); n != 2 {
			t.Errorf("%d worktrees, want the repository's and the existing one", n)
		}
	})
}

// A restarted fleetd adopts the member's pane in its worktree: nothing is
// made or opened again, and the worktree's status is read again.
func TestWorktree_AdoptedAfterRestart(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		repo := gitrepotest.Repo(t)
		e.write("profile.yaml", testProfile)
		e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha"))
		e.start()
		before := e.waitFor("alpha Ready", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Status.Phase == v1alpha1.PhaseReady && ms["alpha"].Status.Worktree != nil
		})["alpha"].Status
		e.stop()
		gitrepotest.Commit(t, before.Worktree.Path, "a.txt", "a", "work while fleetd was down")
		calls := e.fake.Calls()
		e.start()
		after := e.waitFor("alpha adopted, its worktree read", func(ms map[string]v1alpha1.Member) bool {
			w := ms["alpha"].Status.Worktree
			return ms["alpha"].Status.Phase == v1alpha1.PhaseReady && w != nil && w.Ahead == 1
		})["alpha"].Status
		if after.PaneID != before.PaneID || after.Worktree.Path != before.Worktree.Path {
			t.Errorf("after the restart: pane %s in %s, was %s in %s", after.PaneID, after.Worktree.Path, before.PaneID, before.Worktree.Path)
		}
		now := e.fake.Calls()
		for _, m := range []string{"worktree.create", "worktree.open", "worktree.list", "tab.create", "agent.start"} {
			if now[m] != calls[m] {
				t.Errorf("%s called %d times after the restart", m, now[m]-calls[m])
			}
		}
	})
}

// Two members on one branch of one repository: the first by name gets it,
// the other waits (WorktreeConflict, naming the first) until the first is
// deleted, then takes the worktree over.
func TestWorktree_ConflictingBranchesWaitForEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		repo := gitrepotest.Repo(t)
		e := newEnv(t, map[string]string{"profile.yaml": testProfile,
			"alpha.yaml": worktreeMember("alpha", repo, "shared"), "beta.yaml": worktreeMember("beta", repo+"/", "shared")})
		e.start()
		ms := e.waitFor("alpha Ready, beta waiting", func(ms map[string]v1alpha1.Member) bool {
			return ms["alpha"].Status.Phase == v1alpha1.PhaseReady &&
				condition(ms["beta"], v1alpha1.ConditionReady).Reason == v1alpha1.ReasonWorktreeConflict
		})
		if b := ms["beta"]; b.Status.Phase != v1alpha1.PhasePending || b.Status.PaneID != "" ||
			!strings.Contains(condition(b, v1alpha1.ConditionReady).Message, `member "alpha"'s`) {
			t.Errorf("beta: phase %s pane %q, Ready %+v", b.Status.Phase, b.Status.PaneID, condition(b, v1alpha1.ConditionReady))
		}
		if c := e.fake.Calls(); c["agent.start"] != 1 {
			t.Errorf("agent.start %d, want alpha's only", c["agent.start"])
		}
		e.remove("alpha.yaml")
		ms = e.waitFor("beta Ready on the branch", func(ms map[string]v1alpha1.Member) bool {
			_, alpha := ms["alpha"]
			return !alpha && ms["beta"].Status.Phase == v1alpha1.PhaseReady && ms["beta"].Status.Worktree != nil
		})
		if w := ms["beta"].Status.Worktree; w.Path != worktreePath(repo, "shared") {
			t.Errorf("beta works in %s", w.Path)
		}
	})
}

// Deleting a member keeps its worktree and branch unless cleanup is
// OnDelete and nothing would be lost: uncommitted work keeps it (and the
// log says why); a clean worktree whose branch is merged goes, the branch
// stays.
func TestWorktree_DeleteKeepsWorkAndRemovesOnlyWhatIsSafe(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cleanup string
		work    func(t *testing.T, repo, path string)
		removed bool
		log     string
	}{
		{"cleanup Never keeps a clean worktree", "Never", func(*testing.T, string, string) {}, false,
			"cleanup is Never; review and merge the branch"},
		{"OnDelete keeps uncommitted work", "OnDelete", func(t *testing.T, _, path string) { gitrepotest.Write(t, path, "wip.txt", "x") }, false,
			"removing it would lose work: 1 uncommitted change"},
		{"OnDelete keeps an unmerged branch", "OnDelete", func(t *testing.T, _, path string) { gitrepotest.Commit(t, path, "f", "x", "work") }, false,
			"branch agents/alpha is not merged into the repository's HEAD and it has no upstream"},
		{"OnDelete removes a clean, merged worktree", "OnDelete", func(t *testing.T, repo, path string) {
			gitrepotest.Commit(t, path, "f", "x", "work")
			gitrepotest.Git(t, repo, "merge", "--quiet", "agents/alpha")
		}, true, "removed worktree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachProtocol(t, nil, func(t *testing.T, e *env) {
				repo := gitrepotest.Repo(t)
				var logs logBuffer
				e.logTo(&logs)
				e.write("profile.yaml", testProfile)
				e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha", "  cleanup: "+tt.cleanup))
				e.start()
				path := e.waitFor("alpha Ready", func(ms map[string]v1alpha1.Member) bool {
					return ms["alpha"].Status.Phase == v1alpha1.PhaseReady && ms["alpha"].Status.Worktree != nil
				})["alpha"].Status.Worktree.Path
				tt.work(t, repo, path)
				e.remove("alpha.yaml")
				e.waitFor("alpha gone", func(ms map[string]v1alpha1.Member) bool { _, ok := ms["alpha"]; return !ok })
				e.waitIdle()
				_, err := os.Stat(path)
				if gone := os.IsNotExist(err); gone != tt.removed {
					t.Errorf("worktree %s removed %v, want %v (stat: %v)", path, gone, tt.removed, err)
				}
				if gitrepotest.Git(t, repo, "branch", "--list", "agents/alpha") == "" {
					t.Error("the branch is gone")
				}
				if logs.count(tt.log) == 0 {
					t.Errorf("the log does not say %q", tt.log)
				}
				want := 0 // herdr 0.8: git removes it
				if tt.removed && e.protocol == herdrsim.DefaultProtocol {
					want = 1 // herdr 0.9 removes it, with its workspace
				}
				if c := e.fake.Calls(); c["worktree.remove"] != want {
					t.Errorf("worktree.remove %d, want %d", c["worktree.remove"], want)
				}
			})
		})
	}
}

// Pausing, resuming and replacing the member close and make its tab, never
// its worktree: uncommitted work stays, and the next pane is in the same
// checkout.
func TestWorktree_PauseAndReplaceKeepTheWorktree(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		repo := gitrepotest.Repo(t)
		e.write("profile.yaml", testProfile)
		e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha", "  cleanup: OnDelete"))
		e.start()
		first := e.waitFor("alpha Ready", allPhase(v1alpha1.PhaseReady, "alpha"))["alpha"].Status
		path := worktreePath(repo, "agents/alpha")
		gitrepotest.Write(t, path, "wip.txt", "uncommitted")
		e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha", "  cleanup: OnDelete")+"  paused: true\n")
		e.waitFor("alpha Paused", allPhase(v1alpha1.PhasePaused, "alpha"))
		e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha", "  cleanup: OnDelete")+"  prompt: go on\n")
		ms := e.waitFor("alpha back, replaced", func(ms map[string]v1alpha1.Member) bool {
			a := ms["alpha"].Status
			return a.Phase == v1alpha1.PhaseReady && a.PaneID != first.PaneID && a.ObservedGeneration == 3
		})
		if p, _ := e.fake.Pane(ms["alpha"].Status.PaneID); p.Cwd != path {
			t.Errorf("the new pane is in %q, want %s", p.Cwd, path)
		}
		if got, err := os.ReadFile(filepath.Join(path, "wip.txt")); err != nil || string(got) != "uncommitted" {
			t.Errorf("uncommitted work after pause and replace: %q, %v", got, err)
		}
		if c := e.fake.Calls(); c["worktree.create"] > 1 || c["worktree.remove"] != 0 {
			t.Errorf("worktree.create %d, worktree.remove %d", c["worktree.create"], c["worktree.remove"])
		}
	})
}

// A repository path that is no repository fails the member, clearly
// (WorktreeFailed, naming the path), before any tab is made; it is tried
// again, and comes up once the repository exists.
func TestWorktree_RepositoryPathThatIsNoRepository(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		dir := filepath.Join(t.TempDir(), "not-yet")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.write("profile.yaml", testProfile)
		e.write("alpha.yaml", worktreeMember("alpha", dir, "agents/alpha"))
		e.start()
		ms := e.waitFor("alpha Failed", allPhase(v1alpha1.PhaseFailed, "alpha"))
		c := condition(ms["alpha"], v1alpha1.ConditionReady)
		if c.Reason != v1alpha1.ReasonWorktreeFailed || !strings.Contains(c.Message, dir) || !strings.Contains(c.Message, "not a git repository") {
			t.Errorf("Ready condition %+v, want WorktreeFailed naming %s as no repository", c, dir)
		}
		if n := e.fake.Calls()["tab.create"]; n != 0 {
			t.Errorf("tab.create %d for a member without its worktree", n)
		}
		gitrepotest.Git(t, dir, "init", "--quiet", "--initial-branch=main")
		gitrepotest.Commit(t, dir, "README", "x", "initial commit")
		e.waitFor("alpha Ready once the repository exists", allPhase(v1alpha1.PhaseReady, "alpha"))
	})
}

// A checkout left at a member's worktree path that its repository does
// not list — the repository was deleted and made again — is never
// removed: the member fails with what to do, and once the path is moved
// away it gets its worktree.
func TestWorktree_AStrangeCheckoutInTheWayIsKeptAndNamed(t *testing.T) {
	eachProtocol(t, nil, func(t *testing.T, e *env) {
		repo := gitrepotest.Repo(t)
		stale := worktreePath(repo, "agents/alpha")
		if err := os.MkdirAll(stale, 0o755); err != nil {
			t.Fatal(err)
		}
		work := filepath.Join(stale, "notes.txt")
		if err := os.WriteFile(work, []byte("someone's work"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.write("profile.yaml", testProfile)
		e.write("alpha.yaml", worktreeMember("alpha", repo, "agents/alpha"))
		e.start()
		ms := e.waitFor("alpha Failed", allPhase(v1alpha1.PhaseFailed, "alpha"))
		c := condition(ms["alpha"], v1alpha1.ConditionReady)
		if c.Reason != v1alpha1.ReasonWorktreeFailed || !strings.Contains(c.Message, stale+" already exists") || !strings.Contains(c.Message, "move it away") {
			t.Errorf("Ready condition %+v, want WorktreeFailed naming %s and what to do", c, stale)
		}
		if b, err := os.ReadFile(work); err != nil || string(b) != "someone's work" {
			t.Errorf("the checkout in the way: %q, %v; want it untouched", b, err)
		}
		if err := os.Rename(stale, stale+".old"); err != nil {
			t.Fatal(err)
		}
		e.waitFor("alpha Ready once the path is free", allPhase(v1alpha1.PhaseReady, "alpha"))
	})
}
