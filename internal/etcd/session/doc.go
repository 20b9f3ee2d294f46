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
// It never writes a key of its own and never blocks a reader on etcd.
package session
