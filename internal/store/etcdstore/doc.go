// Package etcdstore is fleetd's desired state kept in etcd: the
// [store.Store] the controllers read and the gateway writes, for a fleet
// whose machines each run a fleetd next to their own herdr and share one
// desired state. The directory store (internal/store) stays the default;
// `fleetd serve --store etcd` selects this one.
//
// Layout. Every object is one key under a prefix (default /fleetd):
// PREFIX/members/NAME, PREFIX/profiles/NAME, PREFIX/tenants/NAME, each
// holding the object as JSON, with the metadata the store owns (uid,
// generation, creationTimestamp) and without status, which each node keeps
// for itself and publishes apart. Other keys under the prefix (nodes,
// bindings, the scheduler election, published statuses, the primary
// token's hash) are not objects.
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
// Reads never wait on etcd. Run lists the prefix at one revision (in
// pages), then watches it from the next revision; Snapshot, Get, List and
// Watch serve that watched state from memory, so a stuck or unreachable
// etcd never blocks a request handler. A watch that fails because etcd
// compacted past it (ErrCompacted) is followed by a full list, which sees
// what was created, changed and deleted meanwhile; any other failure
// (including the member losing its leader: the watch requires one) also
// lists again; so does a client connection that finds no member for
// three RetryIntervals (the client's own watch would wait quietly for one; the
// store follows the connection's state, which costs no request). From the
// end of such a watch to the next successful list the snapshot is Stale:
// it may be behind etcd, where another node may have taken over a member
// since, so the controllers keep every agent running and create no pane
// from it (no restart, no replacement, no first start). While etcd cannot be listed the snapshot also keeps every object
// as last seen and says why in Unreadable, which /readyz reports, until a list
// succeeds again.
//
// Writes are bounded and read their own result. Every request has a
// timeout (Options.RequestTimeout); a write etcd does not answer fails
// with an error matching ErrUnavailable and nothing is known to be written.
// On a successful return the store's own snapshot already reflects the
// write (Apply and Delete wait for the watch to reach the write's
// revision, within the caller's context), so Run must be running.
//
// Input is held to the rules of manifest files. A written object is decoded
// strictly, defaulted and validated by api/decode before anything is sent;
// a value read from etcd (which anyone with access can write) is decoded
// the same way, and one that does not decode, names another object than
// its key, or exceeds Options.MaxObjectBytes is reported in
// Snapshot.Errors at its key while the object keeps its last good
// definition, as a manifest file that stops parsing does.
//
// A value may also be put by hand, as YAML or JSON — the document of a
// manifest file (etcdctl put PREFIX/profiles/claude "$(cat claude.yaml)");
// it has generation 1 and a uid derived from the key's create revision,
// which the store keeps when it first writes the object.
//
// Nodes. [RegisterNode] puts PREFIX/nodes/NAME (a [NodeInfo]: labels,
// capacity, gateway, herdr, member count) under a lease (DefaultNodeTTL),
// which [Node.Run] keeps alive and revokes on a clean stop; [Node.Update]
// rewrites the registration under the lease when what it says changed. The
// Store reads every registration from its list and watch of the prefix and
// serves them from memory ([Store.Nodes], with a Ready condition).
//
// Placement. [RunScheduler] campaigns in an etcd election; the leader
// binds each unbound Member to the node [Place] picks, writing
// PREFIX/bindings/MEMBER = {node, memberUID} fenced on the member's
// revision, the binding's and the leader's key. Many bindings go in one
// transaction (up to 63, within etcd's default --max-txn-ops of 128); a
// batch whose fences fail is split in halves and tried again, down to
// single bindings, so one member changed meanwhile holds back only itself.
// No fence covers a node's capacity (maxMembers), counted from the fleet:
// a pass waits until the store has seen the scheduler's own last bindings
// before it counts. A Store with
// Options.Node shows in its snapshot only the members bound to that node
// with the bound uid; [Store.Fleet] shows every member, binding and node.
//
// Node loss. A node members are bound to whose registration is gone (its
// lease expired) is lost: the Store keeps a tombstone of it, dated by its
// clock when it first saw it so, in [Fleet.Lost] and in [Store.Nodes]
// (NotReady, NodeLost, as last registered). The scheduler rebinds the
// members of a node lost for SchedulerOptions.RescheduleAfter to another
// node, fenced on the old binding's revision, except those whose
// spec.nodeName pins them there; the lost node, back, no longer finds them
// in its snapshot and closes their panes.

// Status across nodes. [PublishStatuses] keeps PREFIX/status/MEMBER (a
// [PublishedStatus]: the node, the member's uid, the binding revision it
// saw, the member's status and its messaging state) current for every
// member a node runs: written only when it changes, in bursts of a few and
// then at most once per interval per member, a bounded number at once,
// fenced on the key's revision, deleted when the node stops running the
// member (and by the scheduler when the member is gone and its node is not
// registered). Every Store reads the statuses in its list and watch
// ([Store.Status],
// [Store.StatusChanged]); [Store.BoundStatus] says whether to believe one.
//
// The primary token. PREFIX/tokens/primary holds the SHA-256 of the
// fleet's one primary token and the node that minted it ([FleetToken]),
// claimed by the first node with a create-if-absent transaction
// ([Store.ClaimPrimaryToken]) and read by every Store's watch
// ([Store.PrimaryToken]); a deleted or malformed value leaves the last good
// one in effect. The token itself is never written to etcd.
//
// [Store.Sync] lists once before Run, so that a daemon serves the fleet
// from its first request rather than an empty one.
//
// Nothing secret is written to etcd: a Profile whose spec.env has a key
// that reads as a credential (v1alpha1.ClassifyKey) is refused; such a
// value belongs in the environment of each node's fleetd.
package etcdstore
