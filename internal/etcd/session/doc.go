// Package session keeps a node's one lease in etcd: a
// go.etcd.io/etcd/client/v3/concurrency.Session, granted when the node
// starts and granted again whenever it is lost, so that everything a node
// holds for as long as it lives — its registration, its candidacy in the
// scheduler election, the waiting keys of the calls it holds — goes with
// one lease and costs one keep-alive stream.
//
// [Session.Start] grants the first lease (an error when etcd does not
// answer in time: a node needs etcd to start). [Session.Run] keeps it: when
// the lease is lost (etcd cut off for longer than its TTL, the lease
// revoked behind the node's back) a new one is granted, retried with a
// jittered exponential backoff (package retry), and [Session.Changed]
// fires, so that each holder puts its keys again under the new one. When
// Run's context ends the lease is revoked, so that every key under it goes
// at once rather than a TTL later.
//
// The session renews the lease itself, every third of its TTL, with one
// keep-alive request each (KeepAliveOnce, in place of the client's own
// keep-alive loop, which does not say when the request it answers was
// sent), and records [Renewal]: which lease, when the last keep-alive
// etcd answered was sent, and whether the last one failed. etcd renews a
// lease when a keep-alive reaches it, never before it was sent, so the
// lease lives at least its TTL from that moment whatever the network did
// with the request or the answer: what a node's fence (internal/fleet)
// counts from. A lease whose renewals fail for its TTL is given up (etcd
// has let it expire by then) and a new one granted. [Since] measures on
// the longer of the monotonic and the wall clock, so a machine that slept
// counts the sleep.
//
// It never writes a key of its own and never blocks a reader on etcd.
package session
