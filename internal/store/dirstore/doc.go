// Package dirstore is fleetd's default desired-state backend: the
// [store.Store] of one manifests directory (package etcdstore is the other,
// for a fleet of machines).
//
// [Directory] watches the manifests directory
// with fsnotify — the directory, not the files, so an editor's
// write-temp-then-rename save is seen — reads a burst of changes once it
// is over (100 ms without one), and reads every
// *.yaml / *.yml file (not dotfiles or editor backups), one object per YAML
// document. A few promises matter more than anything else here:
//
//   - A file that stops parsing keeps its last good objects. Its errors are
//     reported (store.Snapshot.Errors, a log line) but nothing it defined goes away,
//     so a typo never tears down a running agent — also across a restart:
//     the last good definition of every object, with the file it came from,
//     is recorded in the state directory (objects.json), and a file that
//     does not decode at the first read after a restart keeps those.
//   - A mass removal is held, not pruned at once: the store publishes
//     through store.Hold, so one scan that removes most members without
//     Delete (a directory emptied, a git checkout, a file of most members
//     removed) — or a first read after a restart that misses most of what
//     objects.json recorded — keeps them, on their last definition, until
//     the prune is confirmed ([Directory.PruneHold]) or the hold ends
//     (Options.PruneHold). Delete is explicit and never held; a Delete of a
//     held member prunes it, an Apply defines it again.
//   - Only regular files, within a size limit, are read
//     ([decode.ReadManifest], the very function `fleetd validate` reads
//     with). A named pipe, directory or device named like a manifest, a
//     link to one, or a file over Options.MaxFileBytes is skipped
//     like a file that stops parsing: its error says what it is, and the
//     objects it last defined stay. Nothing is opened in a way that can
//     block, and nothing is read past the limit.
//   - No file-system call runs under the lock readers take. Scans, Apply
//     and Delete are serialized by a lock of their own and do their I/O
//     there; the published snapshot's lock is held only to swap in a
//     finished snapshot, so Snapshot, Get, List and Watch — what every
//     request handler calls — never wait on the disk.
//   - An object defined twice (in two files, or twice in one) is rejected
//     the way package decode and `fleetd validate` reject it: neither
//     definition takes effect, and the error sits on the later one naming
//     the earlier one's file and line. Like a file that stops parsing, the
//     object keeps its last good definition — the one in effect before the
//     copy appeared or, after a restart, the copy whose spec the state
//     directory recorded — so copying a running member's file never tears the
//     member down.
//   - A directory that vanishes or becomes unreadable prunes nothing. The
//     store keeps the last state it read, reports the problem in
//     store.Snapshot.Unreadable, and picks up where it was when the directory returns
//     (it watches the parent and retries periodically).
//
// The store reads files with the decoder's positions (decode.Manifest) and
// judges the Members' Profile and Tenant references with the check `fleetd
// validate` uses (decode.CheckReferences): store.Snapshot.Unresolved holds the
// same located errors validate would print. Those are not manifest errors —
// such a member stays and waits at Ready=False for the object.
//
// The store also owns metadata.uid (stable for the life of an object),
// metadata.generation (bumped only when a spec changes) and
// metadata.creationTimestamp, persisted in the state directory so that a
// restart of fleetd neither renumbers objects nor makes the reconciler
// replace a running agent.
//
// Options.Rescan replaces the fsnotify watch with explicit nudges,
// so that the controllers' scenario tests and most of this package's run a
// real Directory on real files inside a testing/synctest bubble (fsnotify's
// blocking read would keep virtual time from moving); the watch itself is
// covered by this package's fsnotify tests.
//
// Writes (Apply, Delete) are atomic file operations inside the directory —
// temp file, fsync, rename — so tools and humans share one source of truth;
// the watcher picks a write up like any edit. The store never talks to herdr
// and never writes status into an operator's file. Apply edits an object
// already defined in a file in place (package internal/yamledit, with the
// definition package api/encode makes): only what changes is rewritten, the
// file's comments, key order and other documents stay byte for byte, an
// equal definition writes nothing, and a default is never written. Every
// kind is written the same way: a new Member goes to DIR/NAME.yaml, a new
// Profile or Tenant to DIR/profile-NAME.yaml or DIR/tenant-NAME.yaml.
// Delete refuses a Profile or Tenant that a Member of the directory
// references (store.InUse); a person may still delete its file.
package dirstore
