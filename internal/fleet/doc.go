// Package fleet is a node's part in a fleet of fleetd nodes sharing one
// desired state in etcd (package etcdstore): what the node says about
// itself, what it reads about the others, and the fleet as its gateway
// shows it. Each part has its own state and lock, and reads its own key
// space with an informer (package internal/etcd/informer: from memory, no
// etcd request per read):
//
//   - [Registration]: this node at PREFIX/nodes/NAME (a [NodeInfo]: labels,
//     capacity, gateway, fleetd version, herdr, member count, and the
//     [NodeInstance] that wrote it — the state directory's node id, host,
//     pid) under the node's one lease (package internal/etcd/session),
//     registered again under each new lease and revoked with it on a clean
//     stop; a second fleetd with a live node's name (another instance,
//     under a lease that lives) is refused at start naming the first
//     ([ErrNodeTaken]); a registration deleted, overwritten or tampered
//     with behind the node's back is written again (Run watches it through
//     [Nodes]); [Registration.Follow] rewrites it when the node's herdr
//     (reachable, version, protocol: the controllers' herdr cache) or
//     member count changes, the count at most once a second.
//   - [Fence]: the node's hold on its members while it cannot confirm its
//     lease (fence.go explains the arithmetic): prompts and starts held at
//     its first late renewal, and the panes of the members another node
//     may take over closed before it may (the controllers' Options.Fence;
//     the prompter's hold).
//   - [Nodes]: every registration, and the lost nodes — a node members
//     are bound to whose registration is gone (its lease expired) is kept
//     as a tombstone, dated by this node's clock when it first saw it so —
//     with a Ready condition each (GET /nodes).
//   - [Statuses] and [PublishStatuses]: each node publishes the status of
//     the members it runs ([LocalStatuses]: the controllers' status and the
//     messaging core's state of it) at PREFIX/status/MEMBER, written only
//     when it changes — in bursts of a few and then at most once per
//     interval per member (golang.org/x/time/rate), a bounded number at
//     once, fenced on the key's revision, deleted when the node stops
//     running the member — and reads every node's.
//   - [Sessions]: each member's agent session (herdr's agent_session, the
//     conversation its harness reopens) at PREFIX/sessions/MEMBER with the
//     member's uid, written by the node that runs the member when it
//     changes (in the background, retried while etcd does not answer),
//     under no lease, so that the node a member moves to resumes it (the
//     controllers' SessionKeeper).
//   - [Token]: the fleet's one primary token, whose SHA-256 is at
//     PREFIX/tokens/primary, claimed by the first node with a
//     create-if-absent transaction; every node's registry accepts that
//     token alone ([Token.Adopt]) and follows the hash when it changes
//     ([Token.Follow]).
//   - [State]: the whole fleet — the store's members and bindings, the
//     nodes, the lost ones, the statuses — which the scheduler reads
//     (package scheduler's Source) and [State.BoundStatus] judges a
//     published status by: believed only from the node the member is bound
//     to, under the binding revision and uid this node sees, while that
//     node is Ready and this node can read etcd.
//   - [View]: the members of the whole fleet for the REST API, bridge_list,
//     `?wait=true` and the console — this node's from its controllers,
//     another node's with the status that node publishes, or Ready with a
//     reason of api/v1alpha1 (NodeLost, OnAnotherNode, Unschedulable) —
//     and [View.WaitStopped], which a stop of a member another node runs
//     waits on: that node's report that it no longer runs it.
//
// It never talks to herdr, never reconciles, never writes another node's
// keys (its status publisher yields to a newer binding's publisher; a
// member's session key is the node's that runs the member) and
// never holds a lock over etcd I/O that a request handler needs.
package fleet
