package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

// serveOptions are `fleetd serve`'s.
type serveOptions struct {
	ioStreams
	storeOptions
	cfg          daemon.Config
	messaging    messaging.Options
	mailboxBytes sizeFlag
	herdrMode    string
	logLevel     string
	level        slog.Level // logLevel, parsed
	pruneHoldEnv string     // $FLEETD_PRUNE_HOLD, parsed by Validate
}

func newServeCmd() *cobra.Command {
	o := &serveOptions{mailboxBytes: sizeFlag(messaging.DefaultMaxMailboxBytes), cfg: daemon.Config{Listener: &listener.Limits{}}}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the fleetd daemon: reconcile members into herdr and serve the REST API and MCP gateway",
		Long: `serve watches the manifests directory and drives herdr until every Member runs
in its own tab, serves the REST API, the MCP gateway (/mcp) and Prometheus
metrics on a loopback listener, and keeps its records in the state directory.

Stopping it (Ctrl-C, SIGTERM) leaves the agents running; the next start adopts
them (with --herdr=sim the simulated herdr stops with fleetd, and the next
start creates its agents again). Only one fleetd may use a state directory
at a time. When --listen's port is taken, pick another: --listen
127.0.0.1:18080 (make run LISTEN=127.0.0.1:18080).`,
		Example: `  fleetd serve --manifests ./manifests
  fleetd serve --herdr=sim --manifests manifests/   # with the embedded simulated herdr`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	cfg := &o.cfg
	f := cmd.Flags()
	o.storeOptions.addFlags(cmd)
	f.StringVar(&cfg.ManifestsDir, "manifests", "manifests", "directory of Member, Profile and Tenant manifests to watch")
	addMaxManifestBytesFlag(cmd, &cfg.MaxManifestBytes)
	f.StringVar(&cfg.StateDir, "state-dir", defaultStateDir(), "directory for the lock, tokens, ownership records and journals")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address of the REST API, MCP gateway and metrics listener (keep it loopback)")
	f.StringVar(&cfg.HerdrSocket, "herdr-socket", "", "herdr's API socket (default: resolved as herdr does, from HERDR_SOCKET_PATH, HERDR_SESSION or the config dir)")
	f.StringVar(&cfg.PrimaryPane, "primary-pane", "", "herdr pane id of the primary's own agent: replies nobody waits for are also typed into it while it is idle or done (default: mailbox only)")
	f.StringVar(&o.herdrMode, "herdr", "socket", "socket: talk to the herdr at --herdr-socket; sim: run the embedded simulated herdr")
	f.IntVar(&o.messaging.MaxMailboxMessages, "mailbox-messages", messaging.DefaultMaxMailboxMessages, "most unacknowledged messages one mailbox holds; a worker's reply over it fails with mailbox_full")
	f.Var(&o.mailboxBytes, "mailbox-bytes", "most content one mailbox holds (bytes, or with KiB, MiB, GiB); a worker's reply over it fails with mailbox_full")
	f.Float64Var(&cfg.ToolCallRate, "tool-rate", mcp.DefaultToolCallRate, "MCP tool calls per second allowed to each token (refill of its bucket); a negative value turns the limit off")
	f.IntVar(&cfg.ToolCallBurst, "tool-burst", mcp.DefaultToolCallBurst, "MCP tool calls one token may make at once before --tool-rate applies")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.IntVar(&cfg.Listener.MaxConns, "max-connections", listener.DefaultMaxConns, "connections the listener keeps open at once; past it a new one closes the one waiting on its client longest (idle, sending its body slowly, or not reading); calls held open take at most three quarters")
	f.IntVar(&cfg.MaxSessionsPerToken, "max-sessions-per-token", mcp.DefaultMaxSessionsPerToken, "MCP sessions one token may hold; a new one evicts its least recently used idle session")
	for _, d := range o.durations() {
		f.DurationVar(d.value, d.name, d.def, d.usage)
	}
	return cmd
}

// durationFlag is one of serve's duration flags.
type durationFlag struct {
	name   string
	value  *time.Duration
	def    time.Duration
	zeroOK bool // 0 means something (else the flag wants a positive value)
	usage  string
}

// durations are serve's duration flags. A zero or negative timeout or
// period is refused: the Go options read 0 as "the default", which a user
// who typed --resync 0 did not ask for; --sim-ready-delay 0 is meaningful
// (ready at once).
func (o *serveOptions) durations() []durationFlag {
	cfg := &o.cfg
	return []durationFlag{
		{name: "resync", value: &cfg.ResyncPeriod, def: 60 * time.Second, usage: "how often herdr is listed in full as a safety net"},
		{name: "read-header-timeout", value: &cfg.Listener.ReadHeaderTimeout, def: listener.DefaultReadHeaderTimeout, usage: "close a connection whose request headers take longer than this"},
		{name: "read-timeout", value: &cfg.Listener.ReadTimeout, def: listener.DefaultReadTimeout, usage: "bound on reading one whole request, body included (held calls are not affected)"},
		{name: "write-timeout", value: &cfg.Listener.WriteTimeout, def: listener.DefaultWriteTimeout, usage: "bound on each write of a response: cuts clients that stop reading, never a held call"},
		{name: "idle-timeout", value: &cfg.Listener.IdleTimeout, def: listener.DefaultIdleTimeout, usage: "close kept-alive connections idle for this long"},
		{name: "session-timeout", value: &cfg.SessionTimeout, def: mcp.DefaultSessionTimeout, usage: "close an MCP session with no request in flight (its event stream counts) for this long"},
		{name: "sim-ready-delay", value: &cfg.SimReadyDelay, def: 2 * time.Second, zeroOK: true, usage: "with --herdr=sim, how long simulated agents take to become ready"},
		{name: "prune-hold", value: &cfg.PruneHold, def: daemon.DefaultPruneHold, usage: "how long one change that removes most of the members (at least 3) without deletes through fleetd is held, the members kept running, before it is pruned unless confirmed sooner (fleetd prune --confirm) (env FLEETD_PRUNE_HOLD)"},
	}
}

func (o *serveOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.storeOptions.complete(cmd)
	if !cmd.Flags().Changed("prune-hold") {
		o.pruneHoldEnv = os.Getenv("FLEETD_PRUNE_HOLD")
	}
	return nil
}

func (o *serveOptions) Validate() error {
	switch o.herdrMode {
	case "socket":
	case "sim":
		o.cfg.Sim = true
	default:
		return fmt.Errorf("unknown --herdr %q; want socket or sim", o.herdrMode)
	}
	if v := o.pruneHoldEnv; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("FLEETD_PRUNE_HOLD=%q: want a positive duration, e.g. 2m", v)
		}
		o.cfg.PruneHold = d
	}
	for _, d := range o.durations() {
		switch v := *d.value; {
		case d.zeroOK && v < 0:
			return fmt.Errorf("--%s %s: want 0 or more", d.name, v)
		case !d.zeroOK && v <= 0:
			return fmt.Errorf("--%s %s: want a positive duration (leave the flag out for its default, %s)", d.name, v, d.def)
		}
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("unknown --log-level %q; want debug, info, warn or error", o.logLevel)
	}
	return o.storeOptions.validate(&o.cfg)
}

func (o *serveOptions) Run(ctx context.Context) error {
	cfg := o.cfg
	o.messaging.MaxMailboxBytes = int64(o.mailboxBytes)
	cfg.Messaging = &o.messaging
	cfg.Logger = slog.New(slog.NewTextHandler(o.errOut, &slog.HandlerOptions{Level: o.level}))
	cfg.Ready = func(info daemon.Info) { printBanner(o.out, cfg.ManifestsDir, info, cfg.Sim) }
	if cfg.Etcd != nil {
		// The fence's watchdog is this executable (fencewatchdog.go).
		etcd := *cfg.Etcd
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find fleetd's own executable for its fence watchdog: %w", err)
		}
		etcd.FenceWatchdog = []string{exe, "fence-watchdog"}
		cfg.Etcd = &etcd
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := daemon.Run(ctx, cfg)
	switch {
	case err == nil && cfg.Sim:
		fmt.Fprintln(o.out, "fleetd stopped, and the simulated herdr with it: its agents are gone; the next start creates them again")
	case err == nil:
		fmt.Fprintln(o.out, "fleetd stopped; agents keep running and will be adopted on the next start")
	case errors.Is(err, syscall.EADDRINUSE):
		return o.fail("serve", "%s is in use by another program (another fleetd?): pick a free address with --listen, e.g. --listen %s (make run LISTEN=%s)",
			cfg.Listen, freeAddress(cfg.Listen), freeAddress(cfg.Listen))
	}
	return err
}

// freeAddress is an address on listen's host with a port free right now,
// to suggest when listen's port is taken; the host with a port of 18080
// and up when none can be found.
func freeAddress(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host = "127.0.0.1"
	}
	if p, err := strconv.Atoi(port); err == nil && p > 0 && p+10000 <= 65535 {
		for try := p + 10000; try < p+10010 && try <= 65535; try++ {
			addr := net.JoinHostPort(host, strconv.Itoa(try))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr
			}
		}
	}
	if ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
		defer ln.Close()
		return ln.Addr().String()
	}
	return net.JoinHostPort(host, "18080")
}

// sizeFlag is a byte count given as a number, optionally with KiB, MiB or
// GiB (64MiB, 1048576).
type sizeFlag int64

func (s *sizeFlag) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(*s) >= u.n && int64(*s)%u.n == 0 {
			return strconv.FormatInt(int64(*s)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(*s), 10)
}

func (s *sizeFlag) Set(v string) error {
	num, mult := v, int64(1)
	for _, u := range []struct {
		name string
		n    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, u.name); ok {
			num, mult = n, u.n
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return fmt.Errorf("want a positive number of bytes, optionally with KiB, MiB or GiB (e.g. 64MiB), got %q", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}

func (s *sizeFlag) Type() string { return "size" }
