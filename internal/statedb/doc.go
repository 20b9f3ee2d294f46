// Package statedb is fleetd's state database: the records it must not lose
// about each member, kept as named tables of keyed JSON values in one
// journal file in the state directory (statedir's Layout.StateDB), with
// group commit.
//
// The tables and their owners:
//
//	owned      member name → the pane fleetd runs for it (controllers)
//	members    member name → what fleetd keeps of it across its panes:
//	           its agent's session, a graceful close or replacement
//	           under way (controllers)
//	tokens     hex SHA-256 of a worker token → its member and pane
//	           (package tokens)
//	prompts    member uid → the first prompt queued for it
//	           (internal/messaging)
//	revisions  KIND/NAME → a Profile's or Member's revision history
//	           (internal/rollout, with the directory store)
//
// # Reading
//
// [Open] reads the file once, whole, and replays it into memory; each owner
// reads its table from there ([DB.Each]) when it starts, and keeps it,
// decoded. That hands the table over: the database keeps no copy of a
// table its owner has read (only the length of each live record, for the
// compaction), so a record is in memory once, in its owner's form. Start-up
// is one read of one file, whatever the size of the fleet; the file is read
// again only to compact it, and by a second Each of the same table.
//
// # Writing: group commit
//
// A change is a [Put] or a [Delete] of one key. [DB.Stage] queues changes
// and returns their [Commit] at once; [Commit.Wait] has them written and
// returns once they are in the file and fsynced (or failed). One
// goroutine, the committer, writes: woken by a waiter, it takes everything
// staged since its last write and appends it as one batch of the journal —
// one write, one fsync — however many goroutines staged it. Changes reach
// the file in the order they were staged, so an owner that stages under
// its own lock gets the file in the order of its memory. [DB.Write] is
// Stage and Wait.
//
// The durability contract is the journal's (internal/journal): when Wait
// returns nil the changes survive a crash; a batch a crash cut short is
// dropped whole at the next Open, never half applied; a batch whose write
// or fsync failed is cut back and reported to every waiter of the batch,
// and its changes are not applied. An owner whose action depends on a
// record — agent.start on the ownership record, a pane's environment on
// its token's hash — stages it and waits before acting. A change nobody
// waits for (a dropped record, say) is written with the next batch
// someone waits for, at [DB.Sync] or at Close: it costs no fsync of its
// own, and none runs while its owner goes on (an fsync holds one of the
// process's Ps until the scheduler takes it back, on two cores a
// noticeable stall).
//
// # Compaction
//
// The file only grows while fleetd runs. Once it holds more than twice its
// live records (and at least a mebibyte more), the committer snapshots the
// file (it reads it again, between two batches, for the live records) and
// rewrites it with one record per live key, while later batches go on
// being appended (the journal's Rewrite): at every instant the file holds
// every committed change.
//
// # Migration
//
// [OpenDir] opens the database of a state directory and, the first time,
// moves into it what fleetd kept one file per record before it existed —
// tokens.json, owned/NAME.json, members/NAME.json, prompts-delivered.json,
// revisions/KIND.NAME.json — in one batch, then removes those files. A
// crash in between migrates them again at the next start, to the same
// records.
//
// [Check] and [Repair] (`fleetd journal check|repair`) list and repair
// damage as the message journal's do.
//
// This package never interprets a value (its owner does), never reads a
// file of the state directory but its own and the legacy ones it migrates,
// and never writes anywhere but its journal; every read goes through
// statedir.Open's bounds.
package statedb
