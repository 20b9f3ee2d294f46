package controllers

import (
	"os"

	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/gitrepo"
)

// Worktrees. A member with a worktree ([v1alpha1.Member.WorktreeOf]: its
// spec.worktree, or its profile's) works in a git checkout of its own
// branch, beside the repository at REPO.worktrees/BRANCH. This file is the
// whole of it; the phases call it in two places:
//
//   - create (workspaceFor): on herdr 0.9 the worktree of the branch is
//     looked up (worktree.list) and opened (worktree.open: herdr answers
//     already_open for one a workspace shows) or, when there is none,
//     made (worktree.create, trust_repository only when the profile says
//     so); the member's tab goes in the worktree's workspace and the agent
//     starts in the checkout. herdr 0.8 has no worktree API: fleetd runs
//     `git worktree add` itself (package internal/gitrepo) and places the
//     tab, in spec.workspace, with the checkout as its cwd. An existing
//     worktree of the branch is always taken as it is, never made again.
//     What the member got is kept in its ownership record (Ownership
//     .Worktree), so that a restarted fleetd knows it. A repository that is
//     no repository, or git or herdr refusing, makes the member Failed
//     (WorktreeFailed), tried again with backoff; a branch another member
//     holds makes it wait (Pending, WorktreeConflict) until that changes.
//   - deleted (releaseWorktree): cleanup Never (the default) keeps the
//     worktree, its branch and its workspace, and says so; cleanup
//     OnDelete removes the worktree (worktree.remove on herdr 0.9, git
//     otherwise; never forced) only when gitrepo.CheckRemovable finds
//     nothing to lose — no uncommitted change, and the branch merged into
//     its base or pushed — and otherwise keeps it and says why (an event
//     and a log line). The branch always stays.
//
// Pausing, replacing and restarting a member close its tab, never its
// worktree: the next pane opens the same one.
//
// Status: status.worktree (path, branch, head, dirty files, ahead/behind
// its base, last commit) is read with git by one refresher goroutine, at
// most maxWorktreeReads at once and each bounded by worktreeReadTimeout,
// outside every lock — when the worktree was made or opened, when herdr
// reports a worktree event about it, and when the member's agent goes idle;
// there is no polling. A reconcile copies the last read into the status it
// builds (newReconcile).

// Reasons of worktree events (for describe and the log).
const (
	reasonWorktreeReady   = "WorktreeReady"
	reasonWorktreeKept    = "WorktreeKept"
	reasonWorktreeRemoved = "WorktreeRemoved"
)

// Bounds of the worktree status refresher.
const (
	// maxWorktreeReads is how many worktree status reads run at once.
	maxWorktreeReads = 2
	// worktreeReadTimeout bounds one read (a few git commands).
	worktreeReadTimeout = 10 * time.Second
	// worktreeRetry and maxWorktreeRetry bound the backoff of a member
	// whose worktree could not be made.
	worktreeRetry, maxWorktreeRetry = 5 * time.Second, 5 * time.Minute
	// worktreeCallTimeout bounds herdr's worktree.create and open, which
	// write a checkout: longer than an ordinary call, as long as git has
	// for it when fleetd runs it (gitrepo.CheckoutTimeout).
	worktreeCallTimeout = gitrepo.CheckoutTimeout
)

// OwnedWorktree is the worktree a member's pane runs in, as its ownership
// record keeps it: enough to find it, refresh its status and clean it up
// after a restart, even once the member is gone from the desired state.
type OwnedWorktree struct {
	Repo    string `json:"repo"`
	Branch  string `json:"branch"`
	Base    string `json:"base,omitempty"`
	Cleanup string `json:"cleanup,omitempty"`
	Path    string `json:"path"`
	// WorkspaceID is herdr's workspace showing the worktree (herdr 0.9);
	// "" when fleetd made it with git itself (herdr 0.8).
	WorkspaceID string `json:"workspaceId,omitempty"`
}

func (w OwnedWorktree) claim() v1alpha1.Claim { return v1alpha1.Claim{Repo: w.Repo, Branch: w.Branch} }

// worktreePath is where fleetd puts a member's worktree: beside the
// repository, REPO.worktrees/BRANCH (a branch's slashes are directories;
// git's ref rules leave no "..", no leading "." and no empty component).
func worktreePath(repo, branch string) string {
	return filepath.Join(filepath.Dir(repo), filepath.Base(repo)+".worktrees", filepath.FromSlash(branch))
}

// worktreeLabel is the label of a worktree's herdr workspace: the
// repository's name and the branch. No member's spec.workspace is meant to
// find it by label.
func worktreeLabel(repo, branch string) string { return filepath.Base(repo) + ":" + branch }

// worktrees is the Manager's bookkeeping of its members' worktrees.
type worktrees struct {
	mu sync.Mutex
	// known: the worktree each member runs in (from its ownership record
	// or its last create), kept until the member is forgotten.
	known map[string]OwnedWorktree
	// read: each member's last status read; pending: reads asked for.
	read    map[string]*v1alpha1.WorktreeStatus
	pending map[string]bool
	// failures: worktrees that could not be made in a row, per member.
	failures map[string]int
	wake     chan struct{} // a read was asked for (coalesced)
	// repos: one lock per repository, held while a worktree of it is
	// found and made, or checked and removed — git takes locks of its own
	// in the repository, and two `git worktree add` at once can fail on
	// them (members of one profile start together).
	repos map[string]*sync.Mutex
}

// lockRepo takes repository repo's lock and returns what releases it.
func (w *worktrees) lockRepo(repo string) (unlock func()) {
	w.mu.Lock()
	l, ok := w.repos[repo]
	if !ok {
		l = &sync.Mutex{}
		w.repos[repo] = l
	}
	w.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func newWorktrees(records []Ownership) *worktrees {
	w := &worktrees{known: map[string]OwnedWorktree{}, read: map[string]*v1alpha1.WorktreeStatus{},
		pending: map[string]bool{}, failures: map[string]int{}, wake: make(chan struct{}, 1), repos: map[string]*sync.Mutex{}}
	for _, r := range records {
		if r.Worktree != nil {
			w.known[r.Member] = *r.Worktree
		}
	}
	return w
}

// status returns member name's last worktree read, asking for one when its
// worktree was never read (after a restart); nil for a member without one.
func (w *worktrees) status(name string) *v1alpha1.WorktreeStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.known[name]; !ok {
		return nil
	}
	st, ok := w.read[name]
	if !ok {
		w.requestLocked(name)
	}
	return st.DeepCopy()
}

// request asks for a read of member name's worktree, if it has one. It
// never blocks.
func (w *worktrees) request(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.known[name]; ok {
		w.requestLocked(name)
	}
}

func (w *worktrees) requestLocked(name string) {
	w.pending[name] = true
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// holder returns the member known to run in the worktree of claim c.
func (w *worktrees) holder(c v1alpha1.Claim) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, own := range w.known {
		if own.claim() == c {
			return name, true
		}
	}
	return "", false
}

// byWorkspace returns the member whose worktree herdr shows in workspace
// id, or sits at path.
func (w *worktrees) byWorkspace(id, path string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, own := range w.known {
		if id != "" && own.WorkspaceID == id || path != "" && own.Path == path {
			return name, true
		}
	}
	return "", false
}

// refreshWorktrees reads the worktrees asked for (worktrees.request), at
// most maxWorktreeReads at once, until ctx ends; each read is followed by
// a reconcile of its member, which shows it.
func (m *Manager) refreshWorktrees(ctx context.Context) {
	slots := make(chan struct{}, maxWorktreeReads)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wt.wake:
		}
		m.wt.mu.Lock()
		names := make([]string, 0, len(m.wt.pending))
		for name := range m.wt.pending {
			names = append(names, name)
		}
		clear(m.wt.pending)
		m.wt.mu.Unlock()
		sort.Strings(names)
		for _, name := range names {
			select {
			case <-ctx.Done():
				return
			case slots <- struct{}{}:
			}
			wg.Go(func() {
				defer func() { <-slots }()
				m.readWorktree(ctx, name)
			})
		}
	}
}

// readWorktree reads member name's worktree with git and keeps the result
// for its next reconcile, which it queues when the read changed anything.
// A worktree that cannot be read keeps its last read (logged).
func (m *Manager) readWorktree(ctx context.Context, name string) {
	m.wt.mu.Lock()
	own, ok := m.wt.known[name]
	m.wt.mu.Unlock()
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, worktreeReadTimeout)
	st, err := gitrepo.ReadStatus(rctx, own.Repo, own.Path, own.Base)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.log.Info("could not read a member's worktree; its status shows the last read", "member", name, "path", own.Path, "err", err)
		}
		return
	}
	next := &v1alpha1.WorktreeStatus{Path: own.Path, Branch: st.Branch, Head: st.Head,
		Dirty: int32(st.Dirty), Ahead: int32(st.Ahead), Behind: int32(st.Behind), LastCommit: st.LastCommit}
	m.wt.mu.Lock()
	prev, had := m.wt.read[name]
	changed := m.wt.known[name] == own && (!had || *prev != *next)
	if changed {
		m.wt.read[name] = next
	}
	m.wt.mu.Unlock()
	if changed {
		m.queue.Add(name)
	}
}

// worktreeEvent asks for a read of the worktree a herdr worktree event is
// about.
func (m *Manager) worktreeEvent(ev herdr.Event) {
	switch ev.Kind {
	case herdr.EventWorktreeCreated, herdr.EventWorktreeOpened, herdr.EventWorktreeRemoved:
	default:
		return
	}
	p := ""
	if ev.Worktree != nil {
		p = ev.Worktree.Path
	}
	if name, ok := m.wt.byWorkspace(ev.WorkspaceID, p); ok {
		m.wt.request(name)
	}
}

// worktreeIdle asks for a read of a member's worktree when its agent goes
// idle: a turn ended, and the worktree may have changed.
func (m *Manager) worktreeIdle(name, status string) {
	if status == string(herdr.StatusIdle) || status == string(herdr.StatusDone) {
		m.wt.request(name)
	}
}

// worktreeError is why a member got no worktree: reason is
// ReasonWorktreeFailed (tried again with backoff) or
// ReasonWorktreeConflict (waits for a change).
type worktreeError struct {
	reason string
	err    error
}

func (e *worktreeError) Error() string { return e.err.Error() }
func (e *worktreeError) Unwrap() error { return e.err }

// workspaceFor is where create puts the member's tab: the workspace of its
// worktree and the checkout as cwd, or — for a member without one — its
// spec.workspace with cwd. own is the worktree, nil for none.
func (r *memberReconcile) workspaceFor(cwd string) (ws herdr.WorkspaceInfo, dir string, own *OwnedWorktree, err error) {
	w := r.mem.WorktreeOf(r.profile)
	if w == nil {
		ws, err = r.m.ensureWorkspace(r.ctx, r.name, r.mem.Spec.Workspace, cwd)
		return ws, cwd, nil, err
	}
	if rival := r.worktreeRival(w.Claim()); rival != "" {
		return ws, "", nil, &worktreeError{v1alpha1.ReasonWorktreeConflict,
			fmt.Errorf("%s is member %q's; two members never share a worktree: give this one a branch of its own", w.Claim(), rival)}
	}
	got, ws, err := r.m.ensureWorktree(r.ctx, r.name, w, r.profile.TrustsRepository(), r.mem.Spec.Workspace)
	if err != nil {
		return ws, "", nil, err
	}
	r.m.wt.mu.Lock()
	prev, had := r.m.wt.known[r.name]
	r.m.wt.known[r.name] = got
	if prev != got {
		delete(r.m.wt.read, r.name)
	}
	delete(r.m.wt.failures, r.name)
	r.m.wt.requestLocked(r.name)
	r.m.wt.mu.Unlock()
	if had && prev.claim() != got.claim() {
		r.m.wakeClaimants(prev.claim(), r.name)
	}
	return ws, got.Path, &got, nil
}

// worktreeRival returns the member that keeps the branch claim c when
// this member claims it too: the one whose pane runs in it, else — nobody
// running in it — the first by name; "" when this member may have it.
func (r *memberReconcile) worktreeRival(c v1alpha1.Claim) string {
	if holder, ok := r.m.wt.holder(c); ok {
		// Declared or not: a deleted member holds its worktree until
		// its deletion settled it (releaseWorktree), which may remove it.
		if holder == r.name {
			return ""
		}
		return holder
	}
	var rivals []string
	for name, o := range r.snap.Members {
		if name == r.name {
			continue
		}
		if ow := o.WorktreeOf(r.snap.Profiles[o.Spec.Profile]); ow != nil && ow.Claim() == c {
			rivals = append(rivals, name)
		}
	}
	sort.Strings(rivals)
	if len(rivals) > 0 && rivals[0] < r.name {
		return rivals[0]
	}
	return ""
}

// wakeClaimants queues the members, but except, that claim c: its holder
// let it go.
func (m *Manager) wakeClaimants(c v1alpha1.Claim, except string) {
	snap := m.store.Snapshot()
	for name, o := range snap.Members {
		if name == except {
			continue
		}
		if ow := o.WorktreeOf(snap.Profiles[o.Spec.Profile]); ow != nil && ow.Claim() == c {
			m.queue.Add(name)
		}
	}
}

// ensureWorktree finds or makes member name's worktree of w, and the herdr
// workspace its tab goes in (label: the member's spec.workspace, used on
// herdr 0.8 only).
func (m *Manager) ensureWorktree(ctx context.Context, name string, w *v1alpha1.MemberWorktree, trust bool, label string) (OwnedWorktree, herdr.WorkspaceInfo, error) {
	own := OwnedWorktree{Repo: path.Clean(w.Repo), Branch: w.Branch, Base: w.Base, Cleanup: w.Cleanup}
	own.Path = worktreePath(own.Repo, own.Branch)
	defer m.wt.lockRepo(own.Repo)()
	lctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
	list, err := m.herdr.ListWorktrees(lctx, herdr.WorktreeListParams{CWD: own.Repo, TrustRepository: trust})
	cancel()
	if errors.Is(err, herdr.ErrUnsupported) {
		return m.gitWorktree(ctx, name, own, label)
	}
	if err != nil {
		return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
	}
	cctx, cancel := context.WithTimeout(ctx, worktreeCallTimeout)
	defer cancel()
	var got *herdr.WorktreeWorkspace
	verb := "opened the existing worktree"
	if i := worktreeOfBranch(list.Worktrees, own.Branch); i >= 0 {
		own.Path = list.Worktrees[i].Path
		got, err = m.herdr.OpenWorktree(cctx, herdr.WorktreeOpenParams{CWD: own.Repo, Path: own.Path,
			Label: worktreeLabel(own.Repo, own.Branch), TrustRepository: trust})
	} else {
		if err := pathFree(own); err != nil {
			return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
		}
		verb = "created worktree"
		got, err = m.herdr.CreateWorktree(cctx, herdr.WorktreeCreateParams{CWD: own.Repo, Branch: own.Branch, Base: own.Base,
			Path: own.Path, Label: worktreeLabel(own.Repo, own.Branch), TrustRepository: trust})
	}
	if err != nil {
		return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
	}
	own.WorkspaceID = got.Workspace.WorkspaceID
	if !got.AlreadyOpen {
		m.cache.WorkspaceCreated(herdr.WorkspaceCreated{Workspace: got.Workspace, Tab: got.Tab, RootPane: got.RootPane})
		m.event(name, v1alpha1.EventNormal, reasonWorktreeReady, fmt.Sprintf("%s %s on branch %s of %s (herdr workspace %s)",
			verb, own.Path, own.Branch, own.Repo, own.WorkspaceID))
	}
	return own, got.Workspace, nil
}

// pathFree checks that nothing is at the path of a worktree about to be
// made, which the repository does not list as one of its worktrees (git
// takes an empty directory there, nothing else): a checkout left from a
// repository deleted and made again, a half-made one, a file. fleetd
// removes none of it (it may hold someone's work); the member fails, with
// what to do, and is tried again with backoff.
func pathFree(own OwnedWorktree) error {
	fi, err := os.Lstat(own.Path)
	if err != nil {
		return nil // absent, or git will say why it cannot make it
	}
	if fi.IsDir() {
		if entries, err := os.ReadDir(own.Path); err == nil && len(entries) == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s already exists and %s does not list it as one of its worktrees (left from a repository deleted and made again, or a `git worktree add` cut short?): "+
		"fleetd does not remove it, as it may hold work; move it away or remove it, or `git worktree repair %s` from %s if it is this repository's checkout",
		own.Path, own.Repo, own.Path, own.Repo)
}

// worktreeOfBranch is the index of the worktree that has branch checked
// out, or -1.
func worktreeOfBranch(list []herdr.WorktreeInfo, branch string) int {
	for i, w := range list {
		if w.Branch == branch && !w.IsBare {
			return i
		}
	}
	return -1
}

// gitWorktree is ensureWorktree for a herdr without a worktree API: git
// finds or makes the worktree, and the tab goes in the member's
// spec.workspace with the checkout as its cwd.
func (m *Manager) gitWorktree(ctx context.Context, name string, own OwnedWorktree, label string) (OwnedWorktree, herdr.WorkspaceInfo, error) {
	list, err := gitrepo.Worktrees(ctx, own.Repo)
	if err != nil {
		return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
	}
	if w, ok := gitrepo.FindBranch(list, own.Branch); ok {
		own.Path = w.Path
	} else {
		if err := pathFree(own); err != nil {
			return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
		}
		if err := gitrepo.AddWorktree(ctx, own.Repo, own.Path, own.Branch, own.Base); err != nil {
			return own, herdr.WorkspaceInfo{}, worktreeFailed(own, err)
		}
		m.event(name, v1alpha1.EventNormal, reasonWorktreeReady, fmt.Sprintf("created worktree %s on branch %s of %s with git (this herdr has no worktree API)",
			own.Path, own.Branch, own.Repo))
	}
	ws, err := m.ensureWorkspace(ctx, name, label, own.Path)
	return own, ws, err
}

// worktreeFailed is the error of a worktree that could not be made or
// opened: herdr not there stays what it is (the member waits for herdr);
// anything else — a refusal, git taking longer than worktreeCallTimeout —
// fails the member with WorktreeFailed.
func worktreeFailed(own OwnedWorktree, err error) error {
	err = fmt.Errorf("worktree of branch %s of repository %s: %w", own.Branch, own.Repo, err)
	if errors.Is(err, herdr.ErrUnavailable) {
		return err
	}
	return &worktreeError{v1alpha1.ReasonWorktreeFailed, err}
}

// worktreeFailure shows why a member got no worktree: waiting for another
// member's branch (Pending, no retry: a change of the claims queues it), or
// Failed, tried again with backoff.
func (r *memberReconcile) worktreeFailure(we *worktreeError) (Result, error) {
	msg := we.Error()
	if we.reason == v1alpha1.ReasonWorktreeConflict {
		r.unresolved(we.reason, msg)
		return Result{}, nil
	}
	r.m.wt.mu.Lock()
	n := r.m.wt.failures[r.name]
	r.m.wt.failures[r.name]++
	r.m.wt.mu.Unlock()
	delay := backoff(worktreeRetry, n, maxWorktreeRetry)
	r.event(v1alpha1.EventWarning, we.reason, msg)
	r.b.clearPane()
	r.b.st.LastError = msg
	r.b.set(v1alpha1.PhaseFailed, cFalse(we.reason, msg), cTrue(we.reason, fmt.Sprintf("%s; trying again in %s", msg, delay)), cTrue(we.reason, msg))
	r.write()
	return Result{RequeueAfter: delay}, nil
}

// releaseWorktree settles the worktree of a deleted member: kept (cleanup
// Never, or OnDelete finding something to lose, or removal failing),
// or removed (OnDelete, nothing to lose). Either way it is said in an event
// and a log line, and the members waiting for its branch are queued.
func (m *Manager) releaseWorktree(ctx context.Context, name string) {
	m.wt.mu.Lock()
	own, ok := m.wt.known[name]
	delete(m.wt.known, name)
	delete(m.wt.read, name)
	delete(m.wt.pending, name)
	delete(m.wt.failures, name)
	m.wt.mu.Unlock()
	if !ok {
		return
	}
	defer m.wakeClaimants(own.claim(), name)
	kept := func(typ, why string) {
		m.event(name, typ, reasonWorktreeKept, fmt.Sprintf("member deleted; kept worktree %s and branch %s of %s: %s", own.Path, own.Branch, own.Repo, why))
	}
	if own.Cleanup != v1alpha1.CleanupOnDelete {
		kept(v1alpha1.EventNormal, "cleanup is Never; review and merge the branch, then `git worktree remove "+own.Path+"`")
		return
	}
	defer m.wt.lockRepo(own.Repo)()
	cctx, cancel := context.WithTimeout(ctx, worktreeReadTimeout)
	defer cancel()
	check, err := gitrepo.CheckRemovable(cctx, own.Repo, own.Path, own.Branch, own.Base)
	switch {
	case err != nil:
		kept(v1alpha1.EventWarning, fmt.Sprintf("cleanup is OnDelete, but it could not be checked: %v", err))
		return
	case !check.OK():
		kept(v1alpha1.EventWarning, "cleanup is OnDelete, but removing it would lose work: "+check.Why(own.Branch, own.Base))
		return
	}
	if err := m.removeWorktree(cctx, own); err != nil {
		kept(v1alpha1.EventWarning, fmt.Sprintf("cleanup is OnDelete, but the removal failed: %v", err))
		return
	}
	how := "merged into " + cmp.Or(own.Base, "the repository's HEAD")
	if !check.Merged {
		how = "pushed to " + check.Upstream
	}
	m.event(name, v1alpha1.EventNormal, reasonWorktreeRemoved, fmt.Sprintf("member deleted; removed worktree %s (cleanup OnDelete: nothing uncommitted, branch %s %s); the branch stays",
		own.Path, own.Branch, how))
}

// removeWorktree removes a worktree the delete check cleared: herdr 0.9
// removes it with the workspace that shows it; without that workspace, on
// herdr 0.8, or with herdr away, git does. Neither forces.
func (m *Manager) removeWorktree(ctx context.Context, own OwnedWorktree) error {
	if own.WorkspaceID != "" {
		_, err := m.herdr.RemoveWorktree(ctx, herdr.WorktreeRemoveParams{WorkspaceID: own.WorkspaceID})
		switch {
		case err == nil:
			m.cache.WorkspaceClosed(own.WorkspaceID)
			return nil
		case errors.Is(err, herdr.ErrUnavailable):
			_ = m.callFailed(err) // herdr is away: the cache must not be trusted meanwhile
		case !herdr.IsCode(err, "workspace_not_found") && !errors.Is(err, herdr.ErrUnsupported):
			return err // herdr (git through it) refused
		}
	}
	return gitrepo.RemoveWorktree(ctx, own.Repo, own.Path)
}
