// Package multihost holds the whole-system tests of fleetd on etcd: real
// daemons (on the simulated herdr) whose desired state is a real etcd
// cluster started in the test process (internal/etcdtest). Today they cover
// one node per prefix — the etcd store behind the REST API and the
// reconciler, and the refusal of a second node — which is what is built of
// issue 14; nodes, placement and cross-node messaging come with their
// tests here.
package multihost
