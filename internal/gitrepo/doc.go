// Package gitrepo is fleetd's git plumbing: the few git commands its
// worktrees need, run on the system git with fixed argument lists.
//
// What it runs. [Toplevel] checks that a directory is in a repository;
// [Worktrees] lists a repository's worktrees (`git worktree list
// --porcelain`); [AddWorktree] makes one (`git worktree add`, with -b from
// a base when the branch does not exist yet) — fleetd's own fallback when
// herdr has no worktree API (protocol 20), and the fake herdr's engine;
// [RemoveWorktree] removes one, never with --force; [ReadStatus] is what a
// member's status shows (head, dirty file count, ahead/behind against the
// base, the last commit's subject); [CheckRemovable] is the delete check of
// `cleanup: OnDelete` — no uncommitted change, the worktree still on its
// branch, and the branch merged into the base or pushed to its upstream.
//
// How it runs git. Every call is exec.CommandContext on "git" with an
// argument list written here, never a shell; the values fleetd passes
// (paths, branch and ref names, validated by api/v1alpha1) follow "--" or
// an option that takes them, and a value that could be read as an option
// (a leading "-") or holds a NUL is refused before git runs. Every call is
// bounded: by its context and at most [Timeout] ([CheckoutTimeout] for
// one that writes or deletes a checkout), and its output by
// [MaxOutput] (a dirty count is counted as git streams it, so a checkout
// with many changes costs no memory). git runs with the caller's
// environment minus the variables that would point it at another
// repository (GIT_DIR, GIT_WORK_TREE, …), with prompts off
// (GIT_TERMINAL_PROMPT=0), optional locks off (GIT_OPTIONAL_LOCKS=0, so a
// status read never takes the index lock from an agent at work) and
// messages in English (LC_ALL=C). Errors say which command failed where,
// with git's own message, bounded; [ErrNotRepository] and [ErrNoGit] are
// matched with errors.Is.
//
// [Run] is the exec itself, for a command these functions do not cover
// (the fake herdr's forced removal, which herdr does and fleetd never
// asks for).
//
// What it never does: run git under a lock of its caller's (it takes none
// and is called outside them), delete a branch, force a removal, write a
// file itself, or decide policy — which path a worktree gets and when it may
// be removed are its callers' (controllers/worktree.go).
package gitrepo
