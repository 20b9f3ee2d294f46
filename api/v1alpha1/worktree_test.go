package v1alpha1

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefNames: branch and ref names follow git's own rules; each case is
// also checked against `git check-ref-format`, so that the two never
// disagree. Beyond git, a leading "-" and names over MaxRefLength are
// refused.
func TestRefNames(t *testing.T) {
	for _, tt := range []struct {
		name         string
		branch, base bool // valid as a branch, as a base ref
	}{
		{"main", true, true},
		{"agents/reviewer", true, true},
		{"fleetd/reviewer-2_x", true, true},
		{"v1.0", true, true},
		{"origin/main", true, true},
		{"0123456789abcdef0123456789abcdef01234567", true, true},
		{"ünïcode", true, true},
		{"HEAD", false, true},
		{"-rf", false, false},
		{"--orphan", false, false},
		{"a b", false, false},
		{"a..b", false, false},
		{"a~1", false, false},
		{"a^", false, false},
		{"a:b", false, false},
		{"a?", false, false},
		{"a*", false, false},
		{"a[b", false, false},
		{`a\b`, false, false},
		{"a@{1}", false, false},
		{"@", false, false},
		{"/a", false, false},
		{"a/", false, false},
		{"a//b", false, false},
		{"a.", false, false},
		{".a", false, false},
		{"a/.b", false, false},
		{"a.lock", false, false},
		{"a/b.lock/c", false, false},
		{"a\tb", false, false},
		{"a\x7fb", false, false},
		{"", false, false},
		{strings.Repeat("a", MaxRefLength), true, true},
		{strings.Repeat("a", MaxRefLength+1), false, false},
	} {
		if got := refProblem(tt.name, true) == ""; got != tt.branch {
			t.Errorf("%q as a branch: valid %v, want %v (%s)", tt.name, got, tt.branch, refProblem(tt.name, true))
		}
		if got := refProblem(tt.name, false) == ""; got != tt.base {
			t.Errorf("%q as a base: valid %v, want %v (%s)", tt.name, got, tt.base, refProblem(tt.name, false))
		}
		if IsBranchName(tt.name) != tt.branch {
			t.Errorf("IsBranchName(%q) = %v", tt.name, !tt.branch)
		}
		if tt.name == "" || tt.name == "@" || strings.HasPrefix(tt.name, "-") || len(tt.name) > MaxRefLength {
			continue // git has no say on these (it reads "@" as HEAD and answers with the branch checked out)
		}
		gitSays := exec.Command("git", "check-ref-format", "--branch", tt.name).Run() == nil
		if gitSays != tt.branch {
			t.Errorf("%q: git check-ref-format --branch says %v, the table %v", tt.name, gitSays, tt.branch)
		}
	}
}

func worktreeMember(w *MemberWorktree) *Member {
	m := validMember()
	m.Spec.Worktree = w
	m.SetDefaults()
	return m
}

func TestMember_ValidateWorktree(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Member)
		want   []string
	}{
		{"valid", func(*Member) {}, nil},
		{"valid with base and cleanup", func(m *Member) {
			m.Spec.Worktree.Base, m.Spec.Worktree.Cleanup = "origin/main", CleanupOnDelete
		}, nil},
		{"cwd too", func(m *Member) { m.Spec.Cwd = "/srv" },
			[]string{"spec.worktree: spec.worktree and spec.cwd exclude each other: the member works in its worktree; remove one"}},
		{"no repo", func(m *Member) { m.Spec.Worktree.Repo = "" }, []string{"spec.worktree.repo: required; the absolute path of the repository"}},
		{"relative repo", func(m *Member) { m.Spec.Worktree.Repo = "srv/api" }, []string{`spec.worktree.repo: want the absolute path of a repository, got "srv/api"`}},
		{"root as repo", func(m *Member) { m.Spec.Worktree.Repo = "/" }, []string{`spec.worktree.repo: want the absolute path of a repository, got "/"`}},
		{"repo with a newline", func(m *Member) { m.Spec.Worktree.Repo = "/srv/a\nb" }, []string{`spec.worktree.repo: "/srv/a\nb" holds a control character or invalid UTF-8`}},
		{"no branch", func(m *Member) { m.Spec.Worktree.Branch = "" }, []string{"spec.worktree.branch: required; name the branch the member works on, such as agents/reviewer"}},
		{"option-like branch", func(m *Member) { m.Spec.Worktree.Branch = "-D" }, []string{`spec.worktree.branch: invalid branch name "-D": starts with "-"`}},
		{"branch with ..", func(m *Member) { m.Spec.Worktree.Branch = "a..b" }, []string{`spec.worktree.branch: invalid branch name "a..b": holds ".."`}},
		{"option-like base", func(m *Member) { m.Spec.Worktree.Base = "--detach" }, []string{`spec.worktree.base: invalid ref "--detach": starts with "-"`}},
		{"base with ~", func(m *Member) { m.Spec.Worktree.Base = "HEAD~2" }, []string{`spec.worktree.base: invalid ref "HEAD~2": holds '~', which git forbids in ref names`}},
		{"bad cleanup", func(m *Member) { m.Spec.Worktree.Cleanup = "Always" }, []string{`spec.worktree.cleanup: unknown value "Always"; want Never or OnDelete`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := worktreeMember(&MemberWorktree{Repo: "/srv/api", Branch: "agents/reviewer"})
			tt.mutate(m)
			if diff := cmp.Diff(tt.want, fieldErrs(m.Validate())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfile_ValidateWorktree(t *testing.T) {
	for _, tt := range []struct {
		name string
		w    ProfileWorktree
		want []string
	}{
		{"repo only", ProfileWorktree{Repo: "/srv/api"}, nil},
		{"everything", ProfileWorktree{Repo: "/srv/api", BranchPrefix: "agents/api", Base: "main", Cleanup: CleanupOnDelete, TrustRepository: true}, nil},
		{"trust alone", ProfileWorktree{TrustRepository: true}, nil},
		{"prefix without a repo", ProfileWorktree{BranchPrefix: "x"}, []string{"spec.worktree.branchPrefix: needs spec.worktree.repo: without a repository the profile gives no worktree"}},
		{"relative repo", ProfileWorktree{Repo: "api"}, []string{`spec.worktree.repo: want the absolute path of a repository, got "api"`}},
		{"bad prefix", ProfileWorktree{Repo: "/srv/api", BranchPrefix: "a/"}, []string{`spec.worktree.branchPrefix: invalid branch prefix "a/": a//MEMBER would be no branch name: starts or ends with "/", or holds "//"`}},
		{"bad base", ProfileWorktree{Repo: "/srv/api", Base: "a b"}, []string{`spec.worktree.base: invalid ref "a b": holds ' ', which git forbids in ref names`}},
		{"bad cleanup", ProfileWorktree{Repo: "/srv/api", Cleanup: "never"}, []string{`spec.worktree.cleanup: unknown value "never"; want Never or OnDelete`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Profile{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: KindProfile}, ObjectMeta: ObjectMeta{Name: "codex"},
				Spec: ProfileSpec{Harness: "codex", Worktree: &tt.w}}
			p.SetDefaults()
			if diff := cmp.Diff(tt.want, fieldErrs(p.Validate())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaults_Worktree(t *testing.T) {
	m := worktreeMember(&MemberWorktree{Repo: "/srv/api", Branch: "b"})
	if m.Spec.Worktree.Cleanup != CleanupNever {
		t.Errorf("member cleanup defaulted to %q", m.Spec.Worktree.Cleanup)
	}
	p := &Profile{Spec: ProfileSpec{Worktree: &ProfileWorktree{Repo: "/srv/api"}}}
	p.SetDefaults()
	if w := p.Spec.Worktree; w.BranchPrefix != DefaultBranchPrefix || w.Cleanup != CleanupNever {
		t.Errorf("profile worktree defaulted to %+v", w)
	}
	trust := &Profile{Spec: ProfileSpec{Worktree: &ProfileWorktree{TrustRepository: true}}}
	trust.SetDefaults()
	if w := trust.Spec.Worktree; w.BranchPrefix != "" || w.Cleanup != "" {
		t.Errorf("a profile without a repository got worktree defaults: %+v", w)
	}
}

// A member works in its own worktree, else in the one its profile gives it
// unless it names its own directory.
func TestMember_WorktreeOf(t *testing.T) {
	own := &MemberWorktree{Repo: "/srv/own", Branch: "mine", Cleanup: CleanupNever}
	profile := &Profile{Spec: ProfileSpec{Worktree: &ProfileWorktree{Repo: "/srv/api", BranchPrefix: "agents", Base: "main", Cleanup: CleanupOnDelete}}}
	noRepo := &Profile{Spec: ProfileSpec{Worktree: &ProfileWorktree{TrustRepository: true}}}
	for _, tt := range []struct {
		name string
		spec MemberSpec
		p    *Profile
		want *MemberWorktree
	}{
		{"own", MemberSpec{Worktree: own}, profile, own},
		{"own, no profile", MemberSpec{Worktree: own}, nil, own},
		{"the profile's", MemberSpec{}, profile, &MemberWorktree{Repo: "/srv/api", Branch: "agents/reviewer", Base: "main", Cleanup: CleanupOnDelete}},
		{"cwd opts out", MemberSpec{Cwd: "/srv"}, profile, nil},
		{"no profile", MemberSpec{}, nil, nil},
		{"a profile without a repository", MemberSpec{}, noRepo, nil},
		{"a profile without a worktree", MemberSpec{}, &Profile{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &Member{ObjectMeta: ObjectMeta{Name: "reviewer"}, Spec: tt.spec}
			if diff := cmp.Diff(tt.want, m.WorktreeOf(tt.p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if (&Member{Spec: MemberSpec{Worktree: &MemberWorktree{Repo: "/srv/api/", Branch: "b"}}}).WorktreeOf(nil).Claim() !=
		(Claim{Repo: "/srv/api", Branch: "b"}) {
		t.Error("a repository path with a trailing slash claims another repository")
	}
	if !noRepo.TrustsRepository() || profile.TrustsRepository() || (*Profile)(nil).TrustsRepository() {
		t.Error("TrustsRepository")
	}
}
