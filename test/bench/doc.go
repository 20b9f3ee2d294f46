// Package bench holds fleetd's cross-package benchmarks: whole-fleet
// figures measured against the in-process fake herdr (package
// herdr/herdrsim) with a configurable latency injected into every herdr
// call, each next to a baseline measured in the same run.
//
// The figures (see docs/performance.md for what each means and the latest
// results):
//
//   - convergence of N members from an empty herdr, against a bare client
//     that makes only the calls a member strictly needs (tab.create,
//     agent.start, agent.get readiness polling) with the same concurrency;
//   - convergence with a realistic agent start (the fake's agents ready 3 s
//     after agent.start, on the real clock: the figure is real time),
//     against a bare client that starts every member at once;
//   - herdr calls per converged member, by method;
//   - herdr calls per resync interval of an idle, converged fleet, at two
//     fleet sizes (the figure must not grow with N);
//   - drift repair (pane killed → replacement tab.create reaches herdr),
//     against a bare client that follows pane.exited and recreates, once
//     killing at once and once after fleetd's pause before each kill;
//   - mass repair (every pane killed at once → every replacement tab asked
//     of herdr, and → every member Ready again on a new pane), against a
//     bare client that recreates every member's tab and agent at once;
//   - rendezvous overhead and held calls on the messaging path.
//
// The benchmarks report their figures with testing.B.ReportMetric; the
// driver in cmd/benchtable turns `go test -bench` output into the table
// `make bench` prints, and adds the whole-process figures (`fleetd serve`
// converging 1000 members against a bare client converging the same
// members; its resident memory and goroutines against an empty fleetd).
// Flags (go test -args, BENCHARGS in make) set the sizes. The benchmarks
// run only with -bench, so `go test ./test/bench/` (in `make test`) runs
// the tests alone, in seconds. TestFleetHerdrCalls asserts the
// count-valued figures (calls per member by method, calls per idle resync
// at two sizes), so a regression fails `make test`, not just a number in a
// table; the baselines' own tests check that each does what its figure
// claims (every member started at once, every member recreated), since a
// baseline doing less would flatter every ratio.
//
// The package has no non-test code besides this comment: nothing in fleetd
// imports it, and it must never be imported by the product.
package bench
