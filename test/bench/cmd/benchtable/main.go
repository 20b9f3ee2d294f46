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
