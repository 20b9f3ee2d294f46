package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/fleetmsg"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/internal/version"
	"github.com/fleetd-dev/fleetd/mcp"
)

// Config is what `fleetd serve` was asked to run.
type Config struct {
	// ManifestsDir is the watched directory of Members, Profiles, Tenants
	// (the directory store, the default).
	ManifestsDir string
	// Etcd, if set, keeps the desired state in etcd instead (the etcd
	// store; ManifestsDir is then not used) and registers this fleetd as
	// the prefix's node.
	Etcd *EtcdConfig
	// MaxManifestBytes is the size limit on one manifest file; 0 means
	// decode.DefaultMaxManifestBytes.
	MaxManifestBytes int64
	// StateDir holds the lock, tokens, ownership records and journals.
	StateDir string
	// Listen is the address of the REST/MCP/metrics listener.
	Listen string
	// HerdrSocket is herdr's socket; "" resolves it the way herdr does.
	HerdrSocket string
	// PrimaryPane is the herdr pane id of the primary's own agent, if it
	// runs in herdr: mail for the primary that no call is waiting for is
	// then also typed into that pane while its agent is idle or done. ""
	// means mailbox only.
	PrimaryPane string
	// Sim runs the embedded simulated herdr instead of connecting to one.
	Sim bool
	// SimReadyDelay is how long simulated agents take to become ready.
	SimReadyDelay time.Duration
	// SimProtocol is the herdr protocol the simulation speaks: 0 is the
	// fake's default, 22 (herdr 0.9.3); 20 is herdr 0.8.2.
	SimProtocol int
	// SimValidator, if set, checks every request the simulated herdr gets
	// (tests pass herdr's schema: herdr/herdrsim/validated.Schema()). fleetd
	// itself leaves it nil and links no schema validator.
	SimValidator herdrsim.Validator
	// ResyncPeriod is the controller's full-resync period; 0 is its default.
	ResyncPeriod time.Duration
	// Messaging tunes the messaging core (timeouts, limits, pickup grace);
	// nil means its defaults. Registerer, Logger and PrimaryName are set
	// by Run.
	Messaging *messaging.Options
	// ToolCallRate and ToolCallBurst bound each bearer token's MCP tool
	// calls (mcp.Options); 0 means mcp's defaults, a negative rate no limit.
	ToolCallRate  float64
	ToolCallBurst int
	// Listener bounds the REST/MCP/metrics listener (connections,
	// timeouts, header size); nil means its defaults.
	Listener *listener.Limits
	// SessionTimeout and MaxSessionsPerToken bound the gateway's MCP
	// sessions (mcp.Options); 0 means mcp's defaults.
	SessionTimeout      time.Duration
	MaxSessionsPerToken int
	// Console tunes the browser console at /ui (login codes, sessions);
	// nil means its defaults.
	Console *ConsoleOptions
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Ready, if set, is called once the listener is accepting, with its
	// address and the resolved herdr socket path.
	Ready func(Info)
}

// Info describes a started daemon.
type Info struct {
	// URL is the base URL of the listener, e.g. http://127.0.0.1:8080.
	URL string
	// MCPURL is the gateway endpoint, URL + "/mcp".
	MCPURL string
	// HerdrSocket is the socket fleetd talks to (the simulated one with Sim).
	HerdrSocket string
	// StateDir is the state directory in use.
	StateDir string
	// DesiredState says where the desired state is kept: the manifests
	// directory, or the etcd prefix, endpoints and node name.
	DesiredState string
	// WaitFor blocks until cond holds for the members (with status) or ctx
	// ends; it wakes on every status change, never polls.
	WaitFor func(ctx context.Context, cond func([]v1alpha1.Member) bool) error
	// Members are the Members declared when the daemon started, by name.
	Members []v1alpha1.Member
	// Sim is the embedded simulated herdr (nil unless Config.Sim), for
	// tests and the simulation to script its agents.
	Sim *herdrsim.Server
}

// Run starts fleetd and blocks until ctx ends or a part of it fails. On a
// clean stop it returns nil and leaves every agent running; otherwise it
// returns the first part's error.
//
// The state directory's lock is taken before anything in the directory is
// opened or created, and released after everything else has stopped: the
// messaging core has closed its journal and every part's goroutine has
// returned.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Etcd != nil {
		if err := cfg.Etcd.Check(); err != nil {
			return err
		}
	} else if cfg.ManifestsDir == "" {
		return errors.New("no manifests directory (--manifests)")
	}
	if cfg.Etcd == nil {
		if err := checkManifestsDir(cfg.ManifestsDir); err != nil {
			return err
		}
	}
	if _, err := cfg.Listener.WithDefaults(); err != nil {
		return err
	}
	state, err := statedir.Abs(cfg.StateDir)
	if err != nil {
		return err
	}
	// Only a directory nobody else can write is trusted, before anything
	// in it is read or created: whoever can write there can plant a
	// primary token.
	if err := state.CheckSafe(); err != nil {
		return err
	}

	// One daemon per state directory, and the lock comes first: before the
	// listener (a second `fleetd serve` with the same flags is told who
	// holds the directory, not that the port is in use) and before anything
	// in the directory is opened or created (Lock creates the directory).
	// It goes only after serve returned: every part stopped, the messaging
	// core's journal closed.
	lock, err := state.Lock()
	if err != nil {
		return err
	}
	defer func() {
		log.Info("fleetd stopped; releasing the state directory", "state_dir", state.Root())
		if uerr := lock.Unlock(); uerr != nil {
			log.Warn("release the state directory", "err", uerr)
		}
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	return serve(ctx, cfg, state, ln, log)
}

// serve builds the parts on the locked state directory and runs them until
// ctx ends or one fails. It returns once every part has stopped and the
// messaging core has closed its journal.
func serve(ctx context.Context, cfg Config, state statedir.Layout, ln net.Listener, log *slog.Logger) error {
	loopback := isLoopback(ln.Addr())
	if !loopback {
		log.Warn("listening on a non-loopback address: the API and gateway are reachable from the network, guarded only by bearer tokens", "addr", ln.Addr().String())
	}
	gateway, err := plan.GatewayForListen(ln.Addr().String())
	if err != nil {
		return err
	}

	socket := cfg.HerdrSocket
	var sim *herdrsim.Server
	if cfg.Sim {
		simulation, err := startSimulation(state, herdrsim.Options{Protocol: cfg.SimProtocol, ReadyDelay: cfg.SimReadyDelay, Validator: cfg.SimValidator}, log)
		if err != nil {
			return err
		}
		defer simulation.Close() // stops the agents, then the simulated herdr
		sim = simulation.Server
		socket = sim.SocketPath()
		log.Info("simulated herdr started", "socket", socket)
	} else if socket == "" {
		home, _ := os.UserHomeDir()
		socket = herdr.ResolveSocketPath(os.Getenv, home)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := controllers.NewMetrics(reg)

	toks, err := tokens.Open(state.Root(), &tokens.Options{FleetPrimary: cfg.Etcd != nil}) // on etcd, the fleet's (adoptFleetToken)
	if err != nil {
		return fmt.Errorf("open token registry: %w", err)
	}
	launcher, err := harness.NewLauncher(harness.LauncherOptions{StateDir: state.Root(), Gateway: gateway, Tokens: toks})
	if err != nil {
		return err
	}
	client := herdr.New(&herdr.Options{SocketPath: socket, Observer: logHerdrCalls(log, metrics.HerdrObserver())})
	var desired store.Store
	var node *etcdstore.Node   // with the etcd store
	var nodes mcp.NodeSource   // GET /nodes; nil with the directory store
	var fleet *etcdstore.Store // the whole fleet, for the scheduler and REST
	var etcdCli *clientv3.Client
	if cfg.Etcd != nil {
		cli, err := dialEtcd(cfg.Etcd, log)
		if err != nil {
			return err
		}
		defer cli.Close() // after every part has stopped
		// The node's snapshot holds only the members bound to it: its
		// controllers reconcile those alone.
		st, err := etcdstore.New(cli, &etcdstore.Options{Prefix: cfg.Etcd.Prefix, RequestTimeout: cfg.Etcd.RequestTimeout, Logger: log, Node: cfg.Etcd.Node})
		if err != nil {
			return err
		}
		// Registered before anything reconciles.
		node, err = etcdstore.RegisterNode(ctx, cli, etcdstore.NodeInfo{Name: cfg.Etcd.Node, Labels: cfg.Etcd.NodeLabels, MaxMembers: cfg.Etcd.MaxMembers, GatewayURL: gateway.URL, Version: version.Version},
			&etcdstore.NodeOptions{Prefix: cfg.Etcd.Prefix, TTL: cfg.Etcd.NodeTTL, RequestTimeout: cfg.Etcd.RequestTimeout, Logger: log})
		if errors.Is(err, etcdstore.ErrUnavailable) {
			if why := explainTLS(cfg.Etcd); why != nil {
				err = fmt.Errorf("%w\n(TLS to etcd fails: %w)", err, why)
			}
		}
		if err != nil {
			return err
		}
		// Read once before serving, as the directory store does, so that
		// the first requests see the fleet rather than an empty one.
		if err := st.Sync(ctx); err != nil {
			return fmt.Errorf("read the desired state from etcd: %w", err)
		}
		if err := adoptFleetToken(ctx, st, toks, state, cfg.Etcd.Node, log); err != nil {
			return err
		}
		desired, nodes, fleet = st, st, st
		etcdCli = cli
	} else {
		desired, err = dirstore.New(cfg.ManifestsDir, &dirstore.Options{StateDir: state.Root(), Logger: log, MaxFileBytes: cfg.MaxManifestBytes})
		if err != nil {
			return err
		}
	}
	roster := Roster(desired)

	// New messages go only to running members of the desired state.
	mopts := messaging.Options{}
	if cfg.Messaging != nil {
		mopts = *cfg.Messaging
	}
	mopts.Registerer, mopts.Logger, mopts.PrimaryName = reg, log, mcp.PrimaryName
	if cfg.PrimaryPane != "" {
		mopts.PrimaryTarget = cfg.PrimaryPane
	}
	mopts.Admit = messaging.AdmitMembers(roster)
	prompter := herdrprompt.New(client)
	defer prompter.Close() // after the core: its completion checks feed the core
	core, err := messaging.New(state.Messages(), prompter, &mopts)
	if errors.Is(err, messaging.ErrJournalCorrupt) {
		return fmt.Errorf("%w\nfleetd will not start on a damaged message journal rather than lose what it holds: "+
			"`fleetd journal check --state-dir %[2]s` lists the damage; `fleetd journal repair --state-dir %[2]s` keeps every intact record and sets the original aside",
			err, state.Root())
	}
	if err != nil {
		return err
	}
	defer core.Close() // on a failed start; the shutdown part closes it first

	// The controllers report agent status and closed panes to the core
	// (and closed panes to the gateway, for bridge_stop's wait). The
	// handler is built after the manager; the hooks only fire once the
	// manager runs, which is after both exist.
	var handler *mcp.Handler
	var prompts *messaging.FirstPrompts
	mgr, err := controllers.New(&controllers.Options{
		OnAgentStatus: prompter.Feed(core.ObserveStatus), // turns end on herdr's completion evidence too
		OnPaneGone: func(member, paneID, reason string) {
			prompts.WorkerGone(member, paneID, reason) // the core's WorkerGone, keeping an untyped first prompt owed
			handler.PaneGone(paneID)
		},
		// A prompt typed into an agent herdr relaunched is lost with it:
		// its turn ends now, not at its deadline.
		OnAgentRelaunched: func(member, paneID string) {
			core.AgentRelaunched(member, fmt.Sprintf("herdr restarted with session restore and relaunched it in pane %s", paneID))
		},
		Store:        desired,
		StateDir:     state.Root(),
		Herdr:        client,
		Launcher:     launcher,
		Metrics:      metrics,
		Logger:       log,
		ResyncPeriod: cfg.ResyncPeriod,
	})
	if err != nil {
		return err
	}
	defer mgr.Close() // on a failed start; after Run it changes nothing
	// No prompt reaches an agent herdr relaunched before the core heard of
	// the relaunch: prompts wait while the controllers' view of herdr is
	// not in sync.
	prompter.HoldWhile(func() bool { return !mgr.HerdrSynced() })
	dropUnownedTokens(toks, mgr.Owned(), log)

	var members mcp.MemberSource = mgr
	var waiter mcp.MemberWaiter = mgr
	var view *fleetView // every member of the fleet, with the status other nodes publish
	var messages messenger = core
	var relay *fleetmsg.Relay // messaging across nodes, with the etcd store
	if fleet != nil {
		view = newFleetView(mgr, fleet, cfg.Etcd.Node)
		members, waiter = view, view
		if relay, err = newRelay(core, etcdCli, fleet, view, cfg.Etcd, mopts, log); err != nil {
			return err
		}
		messages = relay
	}
	limits, err := cfg.Listener.WithDefaults()
	if err != nil {
		return err
	}
	// The calls held open on the listener, the gateway's and the console's.
	holds, err := quota.New(mcp.HeldLimits(limits.HeldCalls()))
	if err != nil {
		return err
	}
	handler, err = mcp.NewHandler(mcp.Options{
		Members:    members,
		Tokens:     toks,
		Metrics:    promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Ready:      mgr.Ready,
		Loopback:   loopback,
		Logger:     log,
		Store:      mgr.Store(),
		Waiter:     waiter,
		Messages:   messages,
		Registerer: reg,
		Version:    version.Version,
		Nodes:      nodes,
		Node:       nodeName(cfg),

		ToolCallRate:        cfg.ToolCallRate,
		ToolCallBurst:       cfg.ToolCallBurst,
		SessionTimeout:      cfg.SessionTimeout,
		MaxSessionsPerToken: cfg.MaxSessionsPerToken,
		Terminals:           tail.New(prompter, mgr, nil),
		Holds:               holds,
	})
	if err != nil {
		return err
	}
	prompts, err = messaging.NewFirstPrompts(state.Prompts(), mgr, roster, core, &messaging.FirstPromptsOptions{From: mcp.PrimaryName, Logger: log})
	if err != nil {
		return err
	}
	ui, err := newConsole(mgr, view, messages, toks, prompter, holds, cfg, log)
	if err != nil {
		return err
	}
	srv, ln := listener.NewServer(withConsole(handler, ui, loopback), ln, limits, log)
	srv.RegisterOnShutdown(ui.EndStreams)      // the console's event streams never go idle
	srv.RegisterOnShutdown(handler.EndStreams) // nor do log follow and watch streams

	// The parts. The first to fail cancels the others; the controllers
	// stopping for any reason stops everything.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	if cfg.PrimaryPane != "" {
		controllers.FollowPrimaryPane(mgr.Cache(), cfg.PrimaryPane, func(status string, seq uint64) {
			core.ObserveStatus(mcp.PrimaryName, status, seq)
		})
	}
	if node != nil {
		g.Go(func() error { return relay.Run(ctx) })
		g.Go(func() error { return node.Run(ctx) })
		g.Go(func() error {
			publishNode(ctx, node, reg, mgr.HerdrSynced, func() int { return len(desired.Snapshot().Members) }, mgr.Changed, clock.Real{}, log)
			return nil
		})
		g.Go(func() error { return runFleet(ctx, view, etcdCli, fleet, mgr, core, cfg.Etcd, toks, log) })
		g.Go(func() error {
			return etcdstore.RunScheduler(ctx, etcdCli, fleet, &etcdstore.SchedulerOptions{Prefix: cfg.Etcd.Prefix, Candidate: cfg.Etcd.Node,
				TTL: cfg.Etcd.NodeTTL, RequestTimeout: cfg.Etcd.RequestTimeout, RescheduleAfter: cfg.Etcd.RescheduleAfter, Logger: log})
		})
	}
	g.Go(func() error { prompts.Run(ctx); return nil })
	g.Go(func() error { messaging.ReportGoneMembers(ctx, roster, core); return nil })
	g.Go(func() error {
		defer cancel()
		return mgr.Run(ctx)
	})
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", ln.Addr(), err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		// Release the calls held on the gateway (they end with
		// unavailable) before the listener waits for its connections to
		// finish.
		if err := core.Close(); err != nil {
			log.Warn("close messaging core", "err", err)
		}
		shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			// MCP clients keep a stream open per session; cut what is left.
			log.Warn("http shutdown", "err", err)
			srv.Close()
		}
		// Sessions whose clients cannot end them (a revoked worker's
		// DELETE is refused) would outlive the listener.
		if err := handler.Close(); err != nil {
			log.Debug("close MCP sessions", "err", err)
		}
		return nil
	})

	base := "http://" + ln.Addr().String()
	source := cfg.ManifestsDir
	if cfg.Etcd != nil {
		source = fmt.Sprintf("etcd %s on %s as node %s", cmp.Or(cfg.Etcd.Prefix, etcdstore.DefaultPrefix), strings.Join(cfg.Etcd.Endpoints, ","), cfg.Etcd.Node)
	}
	log.Info("fleetd serving", "url", base, "desired_state", source, "state_dir", state.Root(), "herdr_socket", socket)
	if cfg.Ready != nil {
		cfg.Ready(Info{URL: base, MCPURL: gateway.URL, HerdrSocket: socket, StateDir: state.Root(), DesiredState: source, WaitFor: mgr.WaitFor, Sim: sim, Members: declared(desired)})
	}
	return g.Wait()
}

// declared returns the Members of st's desired state, sorted by name.
func declared(st store.Store) []v1alpha1.Member {
	snap := st.Snapshot()
	out := make([]v1alpha1.Member, 0, len(snap.Members))
	for _, m := range snap.Members {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Roster is the desired state in st as the messaging core's admit and gone
// policies read it ([messaging.Roster]).
func Roster(st store.Store) messaging.Roster { return roster{st} }

type roster struct{ store.Store }

func (r roster) Synced() bool                        { return r.Snapshot().Synced }
func (r roster) Member(name string) *v1alpha1.Member { return r.Snapshot().Members[name] }

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
