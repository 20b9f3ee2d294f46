// Package bench holds fleetd's cross-package benchmarks: whole-fleet
// figures measured against the in-process fake herdr (package
// herdr/herdrtest) with a configurable latency injected into every herdr
// call, each next to a baseline measured in the same run.
//
// The figures (see docs/performance.md for what each means and the latest
// results):
//
//   - convergence of N members from an empty herdr, against a bare client
//     that makes only the calls a member strictly needs (tab.create,
//     agent.start, agent.get readiness polling) with the same concurrency;
//   - herdr calls per converged member, by method;
//   - herdr calls per resync interval of an idle, converged fleet, at two
//     fleet sizes (the figure must not grow with N);
//   - drift repair (pane killed → replacement tab.create reaches herdr),
//     against a bare client that follows pane.exited and recreates;
//   - rendezvous overhead and held calls on the messaging path.
//
// The benchmarks report their figures with testing.B.ReportMetric; the
// driver in cmd/benchtable turns `go test -bench` output into the table
// `make bench` prints, and adds the whole-process figures (resident memory
// and goroutines of a fleetd serving 1000 members). TestFleetHerdrCalls
// asserts the count-valued figures (calls per member by method, calls per
// idle resync at two sizes), so a regression fails `make test`, not just a
// number in a table.
//
// The package has no non-test code besides this comment: nothing in fleetd
// imports it, and it must never be imported by the product.
package bench
