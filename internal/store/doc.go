// Package store is the contract of fleetd's desired state: the Members,
// Profiles and Tenants the reconciler works towards, behind the small
// [Store] interface that each backend implements — the manifests directory
// (package dirstore, the default) and etcd (package etcdstore, for a fleet
// of machines).
//
// It holds only what every backend shares: the interface, the [Snapshot]
// the controllers and the gateway read, the [Published] snapshot and change
// signal a backend serves its reads from, and the errors a consumer matches
// with errors.Is whatever the backend ([ErrNotFound], [ErrConflict],
// [ErrUnavailable], [ErrLost]). Where the source is and why it cannot be
// read are the backend's words: [Snapshot.Unreadable] carries them, and a
// consumer tells a source that did not answer (etcd) from one that is
// broken (a missing directory) by [ErrUnavailable] alone, and a source that
// is not the one this node knew (etcd restored empty or from an older
// backup, another fleet's) by [ErrLost].
//
// It also holds the one rule of what a backend may prune: the prune hold
// ([Hold], hold.go). A backend publishes through it; one observed change
// that removes most of the node's members without explicit deletes is held
// back — the members stay, on their last definition, listed in
// [Snapshot.PruneHeld] — until it is confirmed or has lasted its time, so
// that a directory emptied or an etcd prefix deleted by hand closes no
// agent at once.
//
// It never reads a file or talks to etcd, never knows a backend, and never
// holds a lock while a reader waits on I/O.
package store
