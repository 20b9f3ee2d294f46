// Package etcdstore is fleetd's desired state kept in etcd: the
// [store.Store] the controllers read and the gateway writes, for a fleet
// whose machines each run a fleetd next to their own herdr and share one
// desired state. The directory store (package dirstore) stays the default;
// `fleetd serve --store etcd` selects this one.
//
// Layout. Every object is one key under a prefix (default /fleetd):
// PREFIX/members/NAME, PREFIX/profiles/NAME, PREFIX/tenants/NAME, each
// holding the object as JSON, with the metadata the store owns (uid,
// generation, creationTimestamp) and without status, which each node keeps
// for itself and publishes apart. Other keys under the prefix (the fleet's
// identity, nodes, bindings, the scheduler election, published statuses,
// the primary token's hash, messages, deleted members' tombstones) are not
// objects.
//
// Versions. An object's metadata.resourceVersion is its key's mod
// revision, as in Kubernetes. Apply is a compare-and-swap on that
// revision: with a resourceVersion, only over it (a stale one is an error
// matching store.ErrConflict, which the REST API answers with 409); without
// one, over the revision it has just read, reading again when another
// writer came in between (a bounded number of times). uid and
// creationTimestamp are kept from the stored object, and the generation is
// bumped only when the spec changes — what the directory store does with
// its state directory, here in the value itself. A write that would change
// nothing writes nothing.
//
// Reads never wait on etcd. Each key space of the store — the members,
// the profiles, the tenants, the bindings — is mirrored by an informer
// (package internal/etcd/informer: a list at one revision in pages, a watch
// from the next, a full list again after a compaction or a failure), and
// Snapshot, Get, List and Watch serve that mirror from memory, so a stuck
// or unreachable etcd never blocks a request handler. From the end of a
// watch to the next successful list the snapshot is Stale: it may be behind
// etcd, where another node may have taken over a member since, so the
// controllers keep every agent running and create no pane from it (no
// restart, no replacement, no first start). While etcd cannot be listed
// the snapshot also keeps every object as last seen and says why in
// Unreadable (matching store.ErrUnavailable), which /readyz reports, until
// a list succeeds again.
//
// Writes are bounded and read their own result. Every request has a
// timeout (Options.RequestTimeout); a write etcd does not answer fails
// with an error matching ErrUnavailable (and store.ErrUnavailable) and
// nothing is known to be written. On a successful return the store's own
// snapshot already reflects the write (Apply and Delete wait for the
// watch to reach the write's revision, within the caller's context), so
// Run must be running.
//
// The fence (fence.go). The first node of a fleet writes its identity,
// PREFIX/identity, once (create-if-absent); every node remembers it, with
// the highest etcd revision it has seen, in its state directory
// (Options.StateDir, etcd-store.json). An etcd that lacks the identity or
// holds another one, or whose revision is behind the one remembered, is not
// the fleet's any more — restored empty, restored from an older backup,
// another fleet's — and the store is lost (store.ErrLost): checked before
// the first list (Sync), whenever a list comes back below the highest
// revision seen, every Options.CheckInterval and before every write, and
// the identity is watched. A lost store serves the snapshot it had (after
// a restart, the one remembered), Stale and Unreadable with the reason and
// the recovery (fleetd stopped, `fleetd store accept`: [Accept]), and
// refuses every write; nothing is pruned or created from it. Every write is
// also a transaction on the identity's value, so it never lands in another
// etcd.
//
// Prunes. The node's snapshot is published through store.Hold: one change
// that removes most of its members without deletes through the store —
// member keys deleted by hand, say — is held until confirmed
// ([Store.PruneHold]) or until Options.PruneHold passes. A member deleted
// through the store leaves a tombstone, PREFIX/members/.deleted/NAME (kept
// TombstoneTTL), in the delete's own transaction, so that the node that
// runs it lets that delete through whichever node made it; a member bound
// to another node left on purpose too.
//
// Input is held to the rules of manifest files. A written object is decoded
// strictly, defaulted and validated by api/decode before anything is sent;
// a value read from etcd (which anyone with access can write) is decoded
// the same way, and one that does not decode, names another object than
// its key, or exceeds Options.MaxObjectBytes is reported in
// Snapshot.Errors at its key while the object keeps its last good
// definition, as a manifest file that stops parsing does — after a
// restart, the definition the node remembers.
//
// Every kind is written the same way — `fleetd apply -f` and the REST API
// write Members, Profiles and Tenants through Apply and Delete. A value may
// also be put by hand, as YAML or JSON — the document of a manifest file
// (etcdctl put PREFIX/profiles/claude "$(cat claude.yaml)"); it has
// generation 1 and a uid derived from the key's create revision, which the
// store keeps when it first writes the object. CheckApply makes Apply's
// checks against what etcd holds and writes nothing (a dry run).
//
// References. Delete refuses a Profile or Tenant that a Member of the
// fleet references (store.InUse), whichever node the Member is bound to:
// the check reads the members as the informer last read them, and the
// delete is a transaction that holds only if no member's key changed since
// that revision — a member written meanwhile makes the delete check again.
//
// Placement. A Member's node is its binding, PREFIX/bindings/MEMBER =
// {node, memberUID}, written by the fleet's scheduler (package scheduler).
// A Store with Options.Node shows in its snapshot only the members bound to
// that node with the bound uid; [Store.Assignments] shows every member and
// binding, for the scheduler and the fleet view (package fleet), and
// [Store.Fleet] is the store with every member, for the writes of the
// gateway and the console (a member another node runs is configured or
// unchanged by an apply, not created). The node's snapshot is published
// again only when what it shows changed (store.Hold), so that a write of
// another node's member or binding does not wake this node's controllers
// and status publisher; [Store.FleetChanged] wakes the readers of the
// whole fleet (the scheduler, the fleet view) at every change. Both are
// built from the last ones and the keys that changed (build.go): a node's
// work for a write is the written object's and its own members', plus a
// copy of the fleet's maps.
//
// [Store.Sync] lists once before Run, so that a daemon serves the fleet
// from its first request rather than an empty one.
//
// Nothing secret is written to etcd: a Profile whose spec.env has a key
// that reads as a credential (v1alpha1.ClassifyKey) is refused; such a
// value belongs in the environment of each node's fleetd.
//
// The store is only the store: the nodes' registrations, the statuses
// they publish and the fleet's primary token are package fleet's, the
// scheduler is package scheduler's, messages across nodes are package
// fleetmsg's — each reads its own key space with its own informer.
package etcdstore
