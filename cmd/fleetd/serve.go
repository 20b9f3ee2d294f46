package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/daemon"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/mcp"
)

func newServeCmd() *cobra.Command {
	cfg := daemon.Config{}
	mopts := messaging.Options{}
	mailboxBytes := sizeFlag(messaging.DefaultMaxMailboxBytes)
	var herdrMode, logLevel string
	var stores *storeFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the fleetd daemon: reconcile members into herdr and serve the REST API and MCP gateway",
		Long: `serve watches the manifests directory and drives herdr until every Member runs
in its own tab, serves the REST API, the MCP gateway (/mcp) and Prometheus
metrics on a loopback listener, and keeps its records in the state directory.

Stopping it (Ctrl-C, SIGTERM) leaves the agents running; the next start adopts
them. Only one fleetd may use a state directory at a time.`,
		Example: `  fleetd serve --manifests ./manifests
  fleetd serve --herdr=sim --manifests manifests/   # with the embedded simulated herdr`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch herdrMode {
			case "socket":
			case "sim":
				cfg.Sim = true
			default:
				return usageErrorf(cmd, "unknown --herdr %q; want socket or sim", herdrMode)
			}
			if err := checkDurationFlags(cmd); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf(cmd, "unknown --log-level %q; want debug, info, warn or error", logLevel)
			}
			if err := stores.apply(cmd, &cfg); err != nil {
				return err
			}
			mopts.MaxMailboxBytes = int64(mailboxBytes)
			cfg.Messaging = &mopts
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			out := cmd.OutOrStdout()
			cfg.Ready = func(info daemon.Info) { printBanner(out, cfg.ManifestsDir, info, cfg.Sim) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := daemon.Run(ctx, cfg)
			if err == nil {
				fmt.Fprintln(out, "fleetd stopped; agents keep running and will be adopted on the next start")
			}
			return err
		},
	}
	f := cmd.Flags()
	stores = addStoreFlags(cmd)
	f.StringVar(&cfg.ManifestsDir, "manifests", "manifests", "directory of Member, Profile and Tenant manifests to watch")
	addMaxManifestBytesFlag(cmd, &cfg.MaxManifestBytes)
	f.StringVar(&cfg.StateDir, "state-dir", fleetdStateDir(), "directory for the lock, tokens, ownership records and journals")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "address of the REST API, MCP gateway and metrics listener (keep it loopback)")
	f.StringVar(&cfg.HerdrSocket, "herdr-socket", "", "herdr's API socket (default: resolved as herdr does, from HERDR_SOCKET_PATH, HERDR_SESSION or the config dir)")
	f.StringVar(&cfg.PrimaryPane, "primary-pane", "", "herdr pane id of the primary's own agent: replies nobody waits for are also typed into it while it is idle or done (default: mailbox only)")
	f.StringVar(&herdrMode, "herdr", "socket", "socket: talk to the herdr at --herdr-socket; sim: run the embedded simulated herdr")
	f.DurationVar(&cfg.SimReadyDelay, "sim-ready-delay", 2*time.Second, "with --herdr=sim, how long simulated agents take to become ready")
	f.DurationVar(&cfg.ResyncPeriod, "resync", 60*time.Second, "how often herdr is listed in full as a safety net")
	f.IntVar(&mopts.MaxMailboxMessages, "mailbox-messages", messaging.DefaultMaxMailboxMessages, "most unacknowledged messages one mailbox holds; a worker's reply over it fails with mailbox_full")
	f.Var(&mailboxBytes, "mailbox-bytes", "most content one mailbox holds (bytes, or with KiB, MiB, GiB); a worker's reply over it fails with mailbox_full")
	f.Float64Var(&cfg.ToolCallRate, "tool-rate", mcp.DefaultToolCallRate, "MCP tool calls per second allowed to each token (refill of its bucket); a negative value turns the limit off")
	f.IntVar(&cfg.ToolCallBurst, "tool-burst", mcp.DefaultToolCallBurst, "MCP tool calls one token may make at once before --tool-rate applies")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cfg.Listener = &daemon.ListenerLimits{}
	f.IntVar(&cfg.Listener.MaxConns, "max-connections", daemon.DefaultMaxConns, "connections the listener keeps open at once; past it a new one closes the one idle longest")
	f.DurationVar(&cfg.Listener.ReadHeaderTimeout, "read-header-timeout", daemon.DefaultReadHeaderTimeout, "close a connection whose request headers take longer than this")
	f.DurationVar(&cfg.Listener.ReadTimeout, "read-timeout", daemon.DefaultReadTimeout, "bound on reading one whole request, body included (held calls are not affected)")
	f.DurationVar(&cfg.Listener.WriteTimeout, "write-timeout", daemon.DefaultWriteTimeout, "bound on each write of a response: cuts clients that stop reading, never a held call")
	f.DurationVar(&cfg.Listener.IdleTimeout, "idle-timeout", daemon.DefaultIdleTimeout, "close kept-alive connections idle for this long")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", mcp.DefaultSessionTimeout, "close an MCP session with no request in flight (its event stream counts) for this long")
	f.IntVar(&cfg.MaxSessionsPerToken, "max-sessions-per-token", mcp.DefaultMaxSessionsPerToken, "MCP sessions one token may hold; a new one evicts its least recently used idle session")
	return cmd
}

// checkDurationFlags refuses a duration flag given a value that would not
// mean what it says: zero or negative timeouts and periods (the Go options
// read 0 as "the default", which a user who typed --resync 0 did not ask
// for), and a negative --sim-ready-delay (0 there is meaningful: ready at
// once).
func checkDurationFlags(cmd *cobra.Command) error {
	for _, name := range []string{"resync", "read-header-timeout", "read-timeout", "write-timeout", "idle-timeout", "session-timeout", "sim-ready-delay"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		d, _ := time.ParseDuration(f.Value.String())
		switch {
		case name == "sim-ready-delay" && d < 0:
			return usageErrorf(cmd, "--%s %s: want 0 or more", name, d)
		case name != "sim-ready-delay" && d <= 0:
			return usageErrorf(cmd, "--%s %s: want a positive duration (leave the flag out for its default, %s)", name, d, f.DefValue)
		}
	}
	return nil
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
