// Command benchtable prints fleetd's benchmark figures as one table.
//
// It reads `go test -bench` output (the benchmarks of package bench) on
// standard input and shows every figure a benchmark reported with
// testing.B.ReportMetric next to its baseline — the metric of the same unit
// prefixed "base-" — and their ratio. With -fleetd it also measures the
// whole-process figures: it starts a fake herdr in this process and runs
// the given fleetd binary (`fleetd serve`) against it twice, with no
// members and with -members members, and reports fleetd's resident memory
// and goroutines once the fleet is Ready, the empty run as the baseline.
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/ | tee bench.txt
//	go run ./test/bench/cmd/benchtable -fleetd bin/fleetd -members 1000 < bench.txt
//
// It never changes anything outside the temporary directories it creates.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	fleetd := flag.String("fleetd", "", "fleetd binary for the whole-process figures (skipped when empty)")
	members := flag.Int("members", 1000, "members of the whole-process run")
	latency := flag.Duration("latency", time.Millisecond, "latency of every fake herdr call in the whole-process run")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound of each whole-process run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := parseBench(bufio.NewReader(os.Stdin))
	if err != nil {
		fatal(err)
	}
	if *fleetd != "" {
		proc, err := measureProcess(ctx, processConfig{
			binary: *fleetd, members: *members, latency: *latency, timeout: *timeout,
		})
		if err != nil {
			fatal(fmt.Errorf("whole-process figures: %w", err))
		}
		rows = append(rows, proc...)
	}
	if len(rows) == 0 {
		fatal(fmt.Errorf("no benchmark figures on standard input"))
	}
	writeTable(os.Stdout, rows)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(1)
}
