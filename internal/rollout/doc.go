// Package rollout is what a Profile's rollout to its members is made of,
// apart from the controller that drives it: the revisions of each Profile
// and Member, where they are kept, and the rollout's status as a pure
// function of the profile, its members and its history.
//
//   - [History] and [Revision]: the last [MaxRevisions] definitions of an
//     object, numbered as a Deployment's revisions are (a definition that
//     comes back — `fleetd rollout undo` — becomes the newest revision
//     again, keeping its change cause), each with its change cause (the
//     object's fleetd.dev/change-cause annotation, else the spec fields
//     that changed), and a Profile's [Halt]: its rollout stopped by a
//     replacement that did not become Ready. [Definition] says what a
//     revision keeps — a Profile's spec without spec.rollout, a Member's
//     without spec.paused — and [Restore] writes a revision's spec back
//     into an object.
//   - [Store]: where histories are kept. [Dir] keeps one record per
//     object in the state database (table statedb.Revisions, key
//     KIND/NAME), its writes sharing the database's group commits;
//     package etcdrollout keeps one key per revision and one per halt
//     under a fleet's prefix, read by every node. Both show a change to
//     Get once Update returns.
//   - [Recorder]: follows the desired state and records each change of a
//     Profile or Member as a revision, deleting the history of an object
//     no longer declared — never from a snapshot the store cannot vouch
//     for. It updates the histories of a change concurrently, so that a
//     first start's thousand records share a few commits.
//   - [Target], [MemberState], [Status]: what a rollout takes a profile's
//     members to (a digest of what their launches take from the
//     profile), how each member counts (updated, Ready, being replaced),
//     and the profile's status — its current revision, its member counts
//     and its Progressing condition — computed the same way on every node.
//
// The controllers decide which member is replaced when (controllers'
// rollout.go); the gateway serves the histories and status and writes
// undo, pause and resume through the desired state. This package never
// talks to herdr, never decides a replacement, and never writes an
// operator's manifest.
package rollout
