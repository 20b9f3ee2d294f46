// Package multihost holds the whole-system tests of fleetd on etcd: real
// daemons (on simulated herdrs) whose desired state is a real three-member
// etcd cluster started in the test process (internal/etcdtest), shared by
// the package's tests, each under a prefix of its own.
//
// The tests cover the etcd store behind the REST API and the reconciler,
// TLS, node registration, placement by name, selector and spread, node
// loss and rescheduling (the returning node closes its copy), the quorum
// lost and restored, a stop of a member another node runs (it waits for
// that node's report, and says so when none comes), and at fleet level: one etcd member down — the
// leader — while nodes apply and delete (nothing running recreated), and a
// node killed mid-traffic and restarted on its state (no second pane,
// nothing typed twice, open turns answered into the mailbox). The
// machines of those last tests are a hostFleet: each node next to a
// simulated herdr of its own that outlives it, reaching etcd through one
// proxy per member, which a kill cuts first so that the node's lease
// expires as a dead machine's does. Their messages are same-node until
// messaging crosses nodes; every send goes through one helper, so a
// cross-node case is one more call with another node's primary.
//
// TestFleetChaos plays a seeded schedule against three nodes: nodes
// killed and restarted, nodes partitioned from etcd through their proxies
// (a black hole, a half-open connection, a delay: the herdrs are watched
// every 5 ms for one member's agent on two nodes), single etcd members
// stopped and restarted, the quorum lost (and a member's pane killed
// meanwhile: nothing is recreated until the quorum is back) and restored,
// members applied and deleted, with its invariants checked after every
// step (see its doc). `make test` runs one
// seed of six steps; `make chaos` runs the long form with the flags
// -chaos.seeds, -chaos.first and -chaos.steps (-chaos.seed=N for one).
//
// The benchmarks (BenchmarkFleet*, in `make bench`; docs/performance.md
// has the figures) measure, on the same loopback etcd: the convergence of
// 300 members over three nodes against 100 on one; how soon a lost node
// is noticed against its lease TTL + 1 s; and the etcd requests an idle
// converged fleet makes per node per minute at two fleet sizes, counted at
// each node's etcd client (daemon.EtcdConfig.Client adds the counting
// interceptors); and 3, 10 and 30 simulated nodes of 50 members each
// (FleetScale: wall time, bind throughput, etcd requests per second
// converging and idle, heap per node).
package multihost
