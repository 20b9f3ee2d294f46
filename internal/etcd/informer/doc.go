// Package informer is fleetd's one reader of an etcd key space: an
// [Informer] mirrors every key under one prefix in memory, as
// client-go's informers mirror a Kubernetes resource, so that readers never
// wait on etcd and a change reaches them without a poll. Every key space of
// a fleet is read through one — the store's objects and bindings, the
// nodes' registrations, their published statuses, the fleet's primary
// token, the fleet messaging's requests, mailbox and waiting calls.
//
// [Informer.Run] lists the prefix at one revision, in pages, then watches it
// from the next revision, with clientv3.WithRequireLeader so that an etcd
// member that lost its leader ends the watch rather than leaving it quiet.
// A watch that fails because etcd compacted past it (ErrCompacted) is
// followed at once by a full list, which sees what was created, changed
// and deleted meanwhile; any other end of the watch — including the
// client's connection staying out of Ready for three retry intervals, which
// is how no reachable member shows (the client's own watch would wait
// quietly for one; the connection's state is followed, which costs no
// request) — lists again after a jittered exponential backoff (package
// retry). From the end of a watch to the next good list the mirror is
// Stale; while lists fail it is also Unavailable, and keeps every item as
// last read.
//
// Each key is decoded by the caller's function, with what it decoded at
// that key before (a value that stops decoding may keep its last good
// form); a key whose mod revision did not change is not decoded again. The
// watch responses that arrived while the last ones were applied are applied
// together (up to 256): a consumer that rebuilds from every item costs once
// per batch, not once per write, while writes come faster than it builds.
// After every change — a list, watch responses that changed an item, the
// mirror becoming Stale or Unavailable — the caller's OnChange runs, then the
// revision it reflects is published and [Informer.Changed] fires, so that
// what a consumer builds from the items is in place when
// [Informer.WaitRevision] returns: a writer waits for its write's revision
// to read its own write.
//
// It never writes to etcd, never holds its lock while it calls etcd or the
// caller's functions, and never decides what a key means.
package informer
