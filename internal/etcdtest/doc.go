// Package etcdtest runs a real etcd cluster inside a test process: n
// members of go.etcd.io/etcd/server/v3/embed on loopback ports chosen free,
// each with its own data directory, so that tests of fleetd's etcd store
// and nodes meet etcd's real revisions, watches, leases, compaction and
// quorum instead of a fake.
//
// A Cluster is cheap enough to start once per test package and share:
// [Main] is that package's TestMain (start, run, close, then a goroutine
// leak check that ignores only etcd's own peer connections). Members start
// together (no member is ready without a quorum) with a 50 ms heartbeat
// and a 500 ms election timeout, so that losing a leader or a quorum, and
// getting it back, takes about a second. Stop and
// Restart take single members down and up on their data and ports;
// RestartAll brings a lost quorum back.
//
// A [Proxy] sits between a client and one member, the one proxy of the
// tests: it injects the network's faults — a black hole, a half-open
// connection, a delay — for the tests of what a node does when its
// connection to etcd fails (its fence: internal/fleet), and takes etcd
// away from a client without stopping it: Cut, as a machine that dies;
// Switch, to another cluster behind the same address, as an etcd restored
// under a running client (the etcd store's lost-store tests).
//
// This package links etcd's server. It is for tests and the demo helper
// command only: the fleetd binary never imports it (internal/archtest
// checks that the binary links nothing of go.etcd.io/etcd/server).
package etcdtest
