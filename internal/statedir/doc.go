// Package statedir owns fleetd's state directory: the name and mode of
// everything kept in it, the creation of its root, and the exclusive lock
// that makes it one daemon's alone.
//
// The layout, relative to the root (`--state-dir`, by default
// $XDG_STATE_HOME/fleetd):
//
//	fleetd.lock              0600  the lock; holds the pid of the fleetd holding it
//	primary.token            0600  the primary's bearer token (package tokens)
//	state.journal            0600  the state database (internal/statedb): per member, the pane fleetd
//	                               runs (controllers), what it keeps across panes — its agent's session,
//	                               a graceful close or replacement under way (controllers) —, worker
//	                               token hashes and their panes (package tokens), the delivered first
//	                               prompt (internal/messaging)
//	objects.json             0600  uids, generations, creation times and last good definitions of objects (internal/store/dirstore)
//	etcd-store.json          0600  the fleet on etcd as this node last saw it: identity, highest revision, last good objects (internal/store/etcdstore)
//	harness/NAME/            0700  member NAME's harness config files, each 0600 (internal/harness)
//	messages/                0700  the messaging journal's directory (internal/messaging);
//	messages/messaging.journal 0600  the journal itself, named by package messaging
//	node-id                  0600  the directory's identity as a node of a fleet on etcd (internal/fleet)
//	revisions/KIND.NAME.json 0600  the last revisions of Profile or Member NAME (KIND profile or member)
//	                               and a Profile's stopped rollout (internal/rollout), in a 0700 directory
//	sim/herdr.sock           0600  the simulated herdr's socket, `--herdr=sim` only (internal/daemon)
//
// Before the state database, fleetd kept its per-member records one file
// each: tokens.json, owned/NAME.json (and owned/.spare-ID), members/NAME.json
// and prompts-delivered.json. The state database's one-shot migration
// reads them at the first start after an upgrade, and removes them once
// their records are in the database ([Layout.LegacyTokens] and the
// others); nothing else reads them.
//
// Every directory is created with [DirMode] and every file with [FileMode]:
// nothing in the state directory is readable by group or others. A
// [Layout] names these paths for one root; a consumer asks it for its path
// and never joins a name to the root itself, so that this list is the whole
// truth (docs/security.md repeats it for operators).
//
// [Layout.Lock] takes an exclusive, non-blocking flock on fleetd.lock
// (creating the root first) and writes the holder's pid into it; a second
// fleetd on the same directory is refused with [ErrLocked], naming that
// pid and what to do. The daemon takes the lock before anything under the
// directory is opened or created and releases it last, after the messaging
// core has closed its journal and every goroutine has stopped: two
// processes writing one journal or one state database would corrupt it.
//
// [Layout.CheckSafe] decides whether the directory may be trusted at all:
// the root must be the current user's and not writable by group or
// others, and the files with token hashes (primary.token, state.journal,
// a legacy tokens.json) must be the user's own regular files, closed to
// group and others. The daemon calls
// it before it takes the lock and refuses to start otherwise, with an
// error naming the path, its mode or owner, and the fix.
//
// [Open] and [ReadFile] are the one way fleetd opens a file it keeps here,
// for every package that keeps one (the lock, primary.token, the state
// database and its legacy files, objects.json, etcd-store.json, the
// revision histories, the message journal): only a regular file is
// opened — a symbolic link is refused
// (O_NOFOLLOW), a FIFO too, without waiting for a writer (O_NONBLOCK, then
// fstat), a device, a socket or a directory as well — and at most a bound
// per kind of file is read ([MaxRecordBytes] and the others). A refusal is
// a start-up error naming the path and what to do: a FIFO planted at a
// record does not hang start-up, a symbolic link to /dev/zero does not
// read without end.
//
// This package knows file names, modes, how they are opened and the lock,
// nothing else: what a file holds is the business of the package that
// writes it. It imports only the standard library.
package statedir
