package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "herdr-sim:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("herdr-sim", flag.ContinueOnError)
	socket := fs.String("socket", "", "Unix socket path to listen on (default: a new temporary directory)")
	readyDelay := fs.Duration("ready-delay", 3*time.Second, "time from agent.start to interactive_ready (herdr settles for 3s)")
	enterDelay := fs.Duration("enter-delay", 300*time.Millisecond, "gap between a prompt's text and its Enter (herdr: 300ms)")
	workFor := fs.Duration("work-for", 2*time.Second, "how long a simulated agent works on a prompt before going idle")
	reply := fs.String("reply", "done.", "text a simulated agent prints when it finishes a prompt")
	initial := fs.Bool("initial-workspace", true, "start with one workspace open, as a herdr session usually has")
	protocol := fs.Int("protocol", 22, "herdr socket protocol to speak: 22 (herdr 0.9.3) or 20 (herdr 0.8.2)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *socket != "" {
		if _, err := os.Stat(*socket); err == nil {
			return fmt.Errorf("socket path %s already exists; remove it or choose another", *socket)
		}
	}
	if *protocol != 20 && *protocol != 22 {
		return fmt.Errorf("-protocol %d: want 20 or 22", *protocol)
	}
	srv, err := validated.Start(&herdrsim.Options{
		Protocol:         *protocol,
		SocketPath:       *socket,
		ReadyDelay:       *readyDelay,
		EnterDelay:       *enterDelay,
		Behavior:         herdrsim.Behavior{WorkFor: *workFor, Reply: *reply},
		InitialWorkspace: *initial,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, srv.SocketPath())
	<-ctx.Done()
	return srv.Close()
}
