// Command benchtable prints fleetd's benchmark figures as one table.
//
// It reads `go test -bench` output (the benchmarks of package test/bench) on
// standard input and shows every figure a benchmark reported with
// testing.B.ReportMetric next to its baseline — the metric of the same unit
// prefixed "base-" — and their ratio. With -fleetd it also measures the
// whole-process figures: it starts a fake herdr in this process and runs
// the given fleetd binary (`fleetd serve`) against it twice, with no
// members and with -members members, and then converges the same members
// on a fresh fake with a bare herdr client that starts every member at
// once (tab.create, agent.start, agent.get every 100 ms as herdr's CLI
// polls). It reports the time fleetd took until every member was Ready
// against the bare client's, and fleetd's resident memory and goroutines
// once the fleet is Ready against the empty run's.
//
//	go test -run '^$' -bench . -benchtime 1x ./test/bench/ | tee bench.txt
//	go run ./test/bench/cmd/benchtable -fleetd bin/fleetd -members 1000 < bench.txt
//
// It never changes anything outside the temporary directories it creates.
package main
