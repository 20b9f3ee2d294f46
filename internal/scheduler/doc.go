// Package scheduler is the fleet's scheduler: it binds each Member of a
// fleet on etcd to one node, as kube-scheduler binds pods, around the pure
// [Place] — the Ready nodes (registered, herdr reachable) that match the
// member's spec.nodeName and every pair of its spec.nodeSelector and have
// room (maxMembers), the one running the fewest members, by name on a tie;
// with none, why, in kube-scheduler's words ("0/3 nodes are available: 1
// not Ready, 2 do not match nodeSelector gpu=a100.").
//
// [Run] campaigns in an etcd election at PREFIX/scheduler under the node's
// session (package internal/etcd/session: the node's one lease); one node
// at a time is the scheduler. While it leads, each pass reads the fleet
// from its [Source] (the node's watches of the store, the nodes and the
// published statuses: package fleet; never a request of its own) and:
//
//   - binds every unbound Member, or one whose binding names an older uid,
//     writing PREFIX/bindings/MEMBER = {node, memberUID} (the store's
//     format, package etcdstore) fenced so that it holds only if the
//     member's key is still at the revision it placed, the binding is still
//     as the scheduler last read it, and its election key is still there: a
//     scheduler that lost the election, or placed a member that changed
//     meanwhile, writes nothing (for that member). Many bindings go in one
//     transaction (up to 63, within etcd's default --max-txn-ops of 128); a
//     batch whose fences fail is split in halves and tried again, down to
//     single bindings, so one member changed meanwhile holds back only
//     itself;
//   - rebinds the members of a node lost for Options.RescheduleAfter (its
//     lease expired; Source.Fleet().Lost) to another node, fenced on the old
//     binding's revision and on the lost node's registration being absent
//     (a node registered again keeps its members), except those whose
//     spec.nodeName pins them there;
//   - removes the bindings of deleted members, fenced on the member's key
//     being absent;
//   - deletes the published statuses nobody else will ([Orphan]: of a
//     member that is gone, published by a node that is not registered).
//
// Capacity and spread are counted from the fleet's bindings as the source
// read them, up to a revision (Source.BindingsRevision): while any node
// has a capacity (maxMembers), every transaction of a pass also holds only
// if no binding changed after that revision (or after the pass's own last
// committed write), and the batches go one after another. A write etcd
// took but answered with an error, or a binding written by anyone else,
// therefore stops the pass's next writes until the source has read it, so
// that --max-members holds after an ambiguous commit. With no capacity
// anywhere the count guards nothing but the spread, and a pass's batches
// go at once (up to 4 in flight), each fenced on the leadership and its
// members' own comparisons. A pass also waits until the source has read
// the scheduler's own last bindings before it counts. Members no node can
// take stay unbound.
//
// It never reads etcd except through its Source, never locks another
// package's state, and writes nothing while it does not lead.
package scheduler
