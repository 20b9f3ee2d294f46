package v1alpha1

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// A member may work in a git worktree of its own: a checkout of one branch
// of a repository, beside the repository, so that agents on one repository
// never edit the same files. The member says which (spec.worktree), or its
// profile gives every member of the profile one (spec.worktree of a
// Profile: branch PREFIX/MEMBER of one repository). Only paths and git
// names: the closed shape of a Member's spec holds.

// MemberWorktree is a member's own worktree: branch Branch of the
// repository at Repo.
type MemberWorktree struct {
	// Repo is the absolute path of the repository (its main checkout).
	Repo string `json:"repo"`
	// Branch is the branch the worktree has checked out; created from
	// Base when it does not exist.
	Branch string `json:"branch"`
	// Base is the ref a new branch starts from, and what ahead/behind
	// count against and the delete check looks for the branch in; empty
	// means the repository's HEAD (its checked-out branch).
	Base string `json:"base,omitempty"`
	// Cleanup is Never (the default: deleting the member keeps the
	// worktree and its branch) or OnDelete (deleting the member removes
	// the worktree when that loses nothing).
	Cleanup string `json:"cleanup,omitempty"`
}

// ProfileWorktree is a Profile's worktree setting. With Repo set, every
// member of the profile that sets neither spec.cwd nor spec.worktree works
// in a worktree of Repo on its own branch BranchPrefix/NAME, from Base,
// with Cleanup. TrustRepository applies to every worktree a member of the
// profile gets, its own or the profile's.
type ProfileWorktree struct {
	// Repo is the absolute path of the repository members get worktrees
	// of; empty gives none (TrustRepository alone).
	Repo string `json:"repo,omitempty"`
	// BranchPrefix names the members' branches: PREFIX/MEMBER; default
	// "fleetd".
	BranchPrefix string `json:"branchPrefix,omitempty"`
	// Base and Cleanup are as in a member's spec.worktree.
	Base    string `json:"base,omitempty"`
	Cleanup string `json:"cleanup,omitempty"`
	// TrustRepository lets herdr trust the repository for the agents
	// started in its worktrees (herdr's trust_repository): the operator's
	// choice, never a default.
	TrustRepository bool `json:"trustRepository,omitempty"`
}

// WorktreeStatus is what a member's worktree looks like: where it is, the
// branch and commit checked out, how many files have uncommitted changes,
// how far it is ahead of and behind its base, and its last commit's
// subject.
type WorktreeStatus struct {
	Path       string `json:"path"`
	Branch     string `json:"branch,omitempty"`
	Head       string `json:"head,omitempty"`
	Dirty      int32  `json:"dirty"`
	Ahead      int32  `json:"ahead"`
	Behind     int32  `json:"behind"`
	LastCommit string `json:"lastCommit,omitempty"`
}

// Cleanup policies of a worktree.
const (
	CleanupNever    = "Never"
	CleanupOnDelete = "OnDelete"
)

// DefaultBranchPrefix prefixes the branches a Profile's worktree setting
// gives its members when it names no prefix.
const DefaultBranchPrefix = "fleetd"

// MaxRefLength bounds a branch or base ref name (bytes): a branch is a
// file name under .git/refs, and a worktree directory's path.
const MaxRefLength = 200

// MaxPathLength bounds a repository path (bytes).
const MaxPathLength = 1024

// WorktreeOf returns the worktree member m works in under its profile p
// (nil: m's own setting only): its spec.worktree; else, when m sets no
// spec.cwd and p's spec.worktree names a repository, branch
// PREFIX/NAME of it; else nil. The result is m's own or a new value; it is
// defaulted (a Cleanup) when m and p are.
func (m *Member) WorktreeOf(p *Profile) *MemberWorktree {
	if w := m.Spec.Worktree; w != nil {
		return w
	}
	if m.Spec.Cwd != "" || p == nil || p.Spec.Worktree == nil || p.Spec.Worktree.Repo == "" {
		return nil
	}
	pw := p.Spec.Worktree
	prefix := pw.BranchPrefix
	if prefix == "" {
		prefix = DefaultBranchPrefix
	}
	return &MemberWorktree{Repo: pw.Repo, Branch: prefix + "/" + m.Name, Base: pw.Base, Cleanup: pw.Cleanup}
}

// TrustsRepository reports whether the profile lets herdr trust the
// repositories of its members' worktrees.
func (p *Profile) TrustsRepository() bool {
	return p != nil && p.Spec.Worktree != nil && p.Spec.Worktree.TrustRepository
}

// Claim is what no two members may share: one branch of one repository.
type Claim struct{ Repo, Branch string }

// Claim returns the branch w claims, its repository path cleaned, so that
// "/srv/api/" and "/srv/api" are one repository.
func (w *MemberWorktree) Claim() Claim {
	return Claim{Repo: path.Clean(w.Repo), Branch: w.Branch}
}

func (c Claim) String() string { return fmt.Sprintf("branch %q of repository %s", c.Branch, c.Repo) }

// WorktreeField is the field path where m's worktree comes from:
// spec.worktree.branch for its own, spec.profile for its profile's.
func (m *Member) WorktreeField() string {
	if m.Spec.Worktree != nil {
		return "spec.worktree.branch"
	}
	return "spec.profile"
}

// validateWorktree checks a member's spec.worktree.
func validateWorktree(errs *FieldErrors, s *MemberSpec) {
	w := s.Worktree
	if w == nil {
		return
	}
	if s.Cwd != "" {
		errs.add("spec.worktree", "spec.worktree and spec.cwd exclude each other: the member works in its worktree; remove one")
	}
	validateRepo(errs, "spec.worktree.repo", w.Repo, true)
	switch why := refProblem(w.Branch, true); {
	case w.Branch == "":
		errs.add("spec.worktree.branch", "required; name the branch the member works on, such as agents/reviewer")
	case why != "":
		errs.add("spec.worktree.branch", "invalid branch name %q: %s", w.Branch, why)
	}
	validateBase(errs, "spec.worktree.base", w.Base)
	validateCleanup(errs, "spec.worktree.cleanup", w.Cleanup)
}

// validateProfileWorktree checks a Profile's spec.worktree.
func validateProfileWorktree(errs *FieldErrors, w *ProfileWorktree) {
	if w == nil {
		return
	}
	if w.Repo == "" {
		for field, v := range map[string]string{"branchPrefix": w.BranchPrefix, "base": w.Base, "cleanup": w.Cleanup} {
			if v != "" {
				errs.add("spec.worktree."+field, "needs spec.worktree.repo: without a repository the profile gives no worktree")
			}
		}
		return
	}
	validateRepo(errs, "spec.worktree.repo", w.Repo, true)
	if why := refProblem(w.BranchPrefix+"/x", true); why != "" {
		errs.add("spec.worktree.branchPrefix", "invalid branch prefix %q: %s/MEMBER would be no branch name: %s", w.BranchPrefix, w.BranchPrefix, why)
	}
	validateBase(errs, "spec.worktree.base", w.Base)
	validateCleanup(errs, "spec.worktree.cleanup", w.Cleanup)
}

func validateRepo(errs *FieldErrors, field, repo string, required bool) {
	switch {
	case repo == "":
		if required {
			errs.add(field, "required; the absolute path of the repository")
		}
	case !path.IsAbs(repo) || path.Clean(repo) == "/":
		errs.add(field, "want the absolute path of a repository, got %q", repo)
	case len(repo) > MaxPathLength:
		errs.add(field, "%d bytes; want at most %d", len(repo), MaxPathLength)
	case !utf8.ValidString(repo) || strings.ContainsFunc(repo, isControl):
		errs.add(field, "%q holds a control character or invalid UTF-8", repo)
	}
}

func validateBase(errs *FieldErrors, field, base string) {
	if base == "" {
		return
	}
	if why := refProblem(base, false); why != "" {
		errs.add(field, "invalid ref %q: %s", base, why)
	}
}

func validateCleanup(errs *FieldErrors, field, v string) {
	switch v {
	case CleanupNever, CleanupOnDelete:
	default:
		errs.add(field, "unknown value %q; want Never or OnDelete", v)
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// IsBranchName reports whether git accepts s as a branch name (`git
// check-ref-format --branch`).
func IsBranchName(s string) bool { return refProblem(s, true) == "" }

// refProblem says why s is no valid ref name — with branch, no valid
// branch name — in git's rules (git check-ref-format; --branch for a
// branch), or "" when it is one. Beyond git: at most MaxRefLength bytes,
// and never a leading "-" (an option to git).
func refProblem(s string, branch bool) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxRefLength:
		return fmt.Sprintf("%d bytes; want at most %d", len(s), MaxRefLength)
	case strings.HasPrefix(s, "-"):
		return `starts with "-"`
	case s == "@":
		return `"@" alone is no ref name`
	case branch && s == "HEAD":
		return `"HEAD" is no branch name`
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//"):
		return `starts or ends with "/", or holds "//"`
	case strings.HasSuffix(s, "."):
		return `ends with "."`
	case strings.Contains(s, ".."):
		return `holds ".."`
	case strings.Contains(s, "@{"):
		return `holds "@{"`
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return isControl(r) || strings.ContainsRune(" ~^:?*[\\", r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Sprintf("holds %q, which git forbids in ref names", r)
	}
	for _, c := range strings.Split(s, "/") {
		switch {
		case strings.HasPrefix(c, "."):
			return fmt.Sprintf("component %q starts with \".\"", c)
		case strings.HasSuffix(c, ".lock"):
			return fmt.Sprintf("component %q ends with \".lock\"", c)
		}
	}
	return ""
}

// WorktreeRival returns the first of others, other than m itself (by
// name), that claims the branch m's worktree is on; nil when none does or
// m has no worktree. profile returns the Profile of a name, nil when there
// is none.
func (m *Member) WorktreeRival(others []*Member, profile func(name string) *Profile) *Member {
	w := m.WorktreeOf(profile(m.Spec.Profile))
	if w == nil {
		return nil
	}
	for _, o := range others {
		if o.Name == m.Name {
			continue
		}
		if ow := o.WorktreeOf(profile(o.Spec.Profile)); ow != nil && ow.Claim() == w.Claim() {
			return o
		}
	}
	return nil
}
