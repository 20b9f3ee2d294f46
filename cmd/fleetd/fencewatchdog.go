package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/fencewatch"
)

// fenceWatchdogOptions are `fleetd fence-watchdog`'s: the process `fleetd
// serve --store etcd` starts beside itself and arms on its standard input
// (package fencewatch), not a command for people to run.
type fenceWatchdogOptions struct {
	ioStreams
	socket string
}

func newFenceWatchdogCmd() *cobra.Command {
	o := &fenceWatchdogOptions{}
	cmd := &cobra.Command{
		Use:    "fence-watchdog --herdr-socket PATH",
		Short:  "Keep a fleet node's fence deadline while its fleetd does not run (started by fleetd serve --store etcd)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   runVerb(o),
	}
	cmd.Flags().StringVar(&o.socket, "herdr-socket", "", "herdr's socket")
	return cmd
}

func (o *fenceWatchdogOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *fenceWatchdogOptions) Validate() error {
	if o.socket == "" {
		return errors.New("--herdr-socket is required")
	}
	return nil
}

// Run serves plans from standard input until it ends (fleetd exited) or a
// SIGTERM or SIGINT comes; it logs to standard error.
func (o *fenceWatchdogOptions) Run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(o.errOut, nil)).With("pid", os.Getpid())
	return fencewatch.Serve(ctx, o.in, fencewatch.Dial(o.socket), &fencewatch.Options{Logger: log})
}
