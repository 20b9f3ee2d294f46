package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetd-dev/fleetd/internal/listener"
	"github.com/fleetd-dev/fleetd/internal/quota"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/console"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/tail"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/internal/version"
	"github.com/fleetd-dev/fleetd/mcp"
)

// parts are a fleetd's parts, opened in order by serve — herdr's side,
// the desired state, the messaging core, the controllers, the gateway —
// each from what the ones before it opened, then run together.
type parts struct {
	cfg     Config
	state   statedir.Layout
	log     *slog.Logger
	closers []func() // run in reverse order when serve returns

	loopback bool
	// openState
	db *statedb.DB
	// openHerdr
	socket   string
	sim      *simulation
	reg      *prometheus.Registry
	metrics  *controllers.Metrics
	toks     *tokens.Registry
	launcher *harness.Launcher
	client   *herdr.Client
	// openBackend
	backend *backend
	roster  messaging.Roster
	// openMessaging
	mopts    messaging.Options
	prompter *herdrprompt.Prompter
	core     *messaging.Core
	// openControllers
	gone paneGone
	mgr  *controllers.Manager
	// openGateway
	node    *nodeParts
	handler *mcp.Handler
	prompts *messaging.FirstPrompts
	ui      *console.Console
	srv     *http.Server
	ln      net.Listener
}

// onClose runs f when serve returns, before what was opened earlier.
func (p *parts) onClose(f func()) { p.closers = append(p.closers, f) }

func (p *parts) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// listen checks the listener's address: the gateway's URL, and a warning
// when it is reachable from the network.
func (p *parts) listen(ln net.Listener) (plan.Gateway, error) {
	p.loopback = isLoopback(ln.Addr())
	if !p.loopback {
		p.log.Warn("listening on a non-loopback address: the API and gateway are reachable from the network, guarded only by bearer tokens", "addr", ln.Addr().String())
	}
	return plan.GatewayForListen(ln.Addr().String())
}

// openState opens the state database, once, migrating what an older
// fleetd kept one file per record. It is closed last, once every part that
// writes it has stopped.
func (p *parts) openState() error {
	db, err := statedb.OpenDir(p.state, &statedb.Options{Logger: p.log, Wrap: p.cfg.stateFile})
	if errors.Is(err, statedb.ErrCorrupt) {
		return fmt.Errorf("%w; fleetd will not start on a damaged state database rather than forget the panes it runs: "+
			"`fleetd journal check --state-dir %[2]s` lists the damage; `fleetd journal repair --state-dir %[2]s` keeps every intact record and sets the original aside",
			err, p.state.Root())
	}
	if err != nil {
		return err
	}
	p.db = db
	p.onClose(func() {
		if err := db.Close(); err != nil {
			p.log.Warn("close the state database", "err", err)
		}
	})
	return nil
}

// openHerdr opens herdr's side: the herdr fleetd talks to (or the
// simulation), the metrics, the token registry, the harness launcher and
// the herdr client.
func (p *parts) openHerdr() error {
	socket, sim, err := herdrSocket(p.cfg, p.state, p.db, p.log)
	if err != nil {
		return err
	}
	p.socket, p.sim = socket, sim
	if sim != nil {
		p.onClose(func() { sim.Close() }) // stops the agents, then the simulated herdr
	}
	p.reg = prometheus.NewRegistry()
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.metrics = controllers.NewMetrics(p.reg)
	// On etcd the registry accepts the fleet's primary token (fleet.Token.Adopt).
	if p.toks, err = tokens.Open(p.state.Root(), p.db, &tokens.Options{FleetPrimary: p.cfg.Etcd != nil}); err != nil {
		return fmt.Errorf("open token registry: %w", err)
	}
	p.client = herdr.New(&herdr.Options{SocketPath: socket, Observer: logHerdrCalls(p.log, p.metrics.HerdrObserver())})
	return nil
}

// openBackend opens the desired state (backend.go), and the harness
// launcher, which needs the gateway's URL.
func (p *parts) openBackend(ctx context.Context, gateway plan.Gateway) error {
	launcher, err := harness.NewLauncher(harness.LauncherOptions{StateDir: p.state.Root(), Gateway: gateway, Tokens: p.toks})
	if err != nil {
		return err
	}
	p.launcher = launcher
	if p.backend, err = openBackend(ctx, p.cfg, p.state, p.db, gateway, p.toks, p.log); err != nil {
		return err
	}
	p.onClose(p.backend.close) // after every part has stopped
	// The controllers, opened later and before anything reads the
	// roster, say which panes still run for members it no longer runs.
	p.roster = Roster(p.backend.store, func(member string) bool { return p.mgr != nil && p.mgr.RunsPane(member) })
	return nil
}

// openMessaging opens the messaging core on its journal, and the prompter
// that types into herdr for it.
func (p *parts) openMessaging() error {
	p.mopts = messagingOptions(p.cfg, p.reg, p.roster, p.log)
	p.prompter = herdrprompt.New(p.client)
	p.onClose(func() { p.prompter.Close() }) // after the core: its completion checks feed the core
	core, err := messaging.New(p.state.Messages(), p.prompter, &p.mopts)
	if errors.Is(err, messaging.ErrJournalCorrupt) {
		return fmt.Errorf("%w\\nfleetd will not start on a damaged message journal rather than lose what it holds: "+
			"`fleetd journal check --state-dir %[2]s` lists the damage; `fleetd journal repair --state-dir %[2]s` keeps every intact record and sets the original aside",
			err, p.state.Root())
	}
	if err != nil {
		return err
	}
	p.core = core
	p.onClose(func() { core.Close() }) // on a failed start; the shutdown part closes it first
	return nil
}

// openControllers opens the member controller. It reports agent status to
// the core, and closed panes to whoever listens (the first prompts, the
// gateway: built after the controllers, which report only once they run).
func (p *parts) openControllers() error {
	core := p.core
	mgr, err := controllers.New(&controllers.Options{
		OnAgentStatus: p.prompter.Feed(core.ObserveStatus), // turns end on herdr's completion evidence too
		OnPaneGone:    p.gone.report,
		// A member to close or replace waits for what the core holds
		// open for it.
		Activity:    core,
		Sessions:    p.backend.sessions, // nil for the directory
		Fence:       p.fence(),
		FencePolicy: p.fencePolicy(),
		Revisions:   p.backend.revisions,
		// A prompt typed into an agent herdr relaunched is lost with it:
		// its turn ends now, not at its deadline.
		OnAgentRelaunched: func(member, paneID string) {
			core.AgentRelaunched(member, fmt.Sprintf("herdr restarted with session restore and relaunched it in pane %s", paneID))
		},
		Store: p.backend.store, State: p.db, Herdr: p.client, Launcher: p.launcher, Metrics: p.metrics,
		Logger: p.log, ResyncPeriod: p.cfg.ResyncPeriod,
	})
	if err != nil {
		return err
	}
	p.mgr = mgr
	p.onClose(func() { mgr.Close() }) // on a failed start; after Run it changes nothing
	// No prompt reaches an agent herdr relaunched before the core heard of
	// the relaunch: prompts wait while the controllers' view of herdr is
	// not in sync.
	// Nor any prompt while a node of a fleet cannot confirm its lease
	// (fleet.Fence): another node may run the member by now.
	p.prompter.HoldWhile(func() bool { return !mgr.HerdrSynced() || (p.backend.fence != nil && p.backend.fence.Hold() != nil) })
	dropUnownedTokens(p.toks, mgr.Owned(), p.log)
	if p.cfg.PrimaryPane != "" {
		controllers.FollowPrimaryPane(mgr.Cache(), p.cfg.PrimaryPane, func(status string, seq uint64) {
			core.ObserveStatus(mcp.PrimaryName, status, seq)
		})
	}
	return nil
}

// fence is the backend's fence as the controllers take it: none for the
// directory.
func (p *parts) fence() controllers.Fence {
	if p.backend.fence == nil {
		return nil
	}
	return p.backend.fence
}

// fencePolicy is what the fence does at its deadline (--fence-policy).
func (p *parts) fencePolicy() controllers.FencePolicy {
	if p.cfg.Etcd == nil {
		return ""
	}
	return p.cfg.Etcd.FencePolicy
}

// openGateway opens what the backend adds on this node, the gateway, the
// first prompts, the console and the bounded server on ln.
func (p *parts) openGateway(ln net.Listener) (err error) {
	if p.node, err = p.backend.onNode(p.mgr, p.core, p.mopts); err != nil {
		return err
	}
	// The simulated herdr's agents run in this process: they stop with it.
	if w := p.backend.fenceWatch; w != nil && p.sim == nil {
		p.node.run = append(p.node.run, func(ctx context.Context) error { return w.Run(ctx, p.socket) })
	}
	limits, err := p.cfg.Listener.WithDefaults()
	if err != nil {
		return err
	}
	// The calls held open on the listener, the gateway's and the console's.
	holds, err := quota.New(mcp.HeldLimits(limits.HeldCalls()))
	if err != nil {
		return err
	}
	var manifestsDir string // absolute: what `fleetd validate` takes from any directory
	if p.cfg.Etcd == nil {
		if manifestsDir, err = filepath.Abs(p.cfg.ManifestsDir); err != nil {
			return fmt.Errorf("manifests directory: %w", err)
		}
	}
	p.handler, err = mcp.NewHandler(mcp.Options{
		Members: p.node.members, Waiter: p.node.waiter, Messages: p.node.messages, Nodes: p.node.nodes, Node: p.backend.node,
		ManifestErrors: p.mgr.ManifestErrors, ManifestsDir: manifestsDir, Expediter: p.mgr, Prune: p.backend.prune,
		Tokens: p.toks, Metrics: promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg}), Ready: p.mgr.Ready,
		Loopback: p.loopback, Logger: p.log, Store: p.node.desired, Registerer: p.reg, Version: version.Version,
		ToolCallRate: p.cfg.ToolCallRate, ToolCallBurst: p.cfg.ToolCallBurst, SessionTimeout: p.cfg.SessionTimeout,
		MaxSessionsPerToken: p.cfg.MaxSessionsPerToken, Terminals: tail.New(p.prompter, p.mgr, nil), Holds: holds, Rollouts: p.mgr,
	})
	if err != nil {
		return err
	}
	if p.prompts, err = messaging.NewFirstPrompts(p.db, p.mgr, p.roster, p.core, &messaging.FirstPromptsOptions{From: mcp.PrimaryName, Logger: p.log}); err != nil {
		return err
	}
	// The core's WorkerGone through the first prompts (keeping an untyped
	// first prompt owed), then the gateway (bridge_stop's wait).
	p.gone.add(p.prompts.WorkerGone)
	p.gone.add(func(_, paneID, _ string) { p.handler.PaneGone(paneID) })
	if p.ui, err = newConsole(p.mgr, p.node.members, p.node.desired, p.node.messages, p.toks, p.prompter, holds, p.cfg, p.backend.node, p.log); err != nil {
		return err
	}
	p.srv, p.ln = listener.NewServer(withConsole(p.handler, p.ui, p.loopback), ln, limits, p.log)
	p.srv.RegisterOnShutdown(p.ui.EndStreams)      // the console's event streams never go idle
	p.srv.RegisterOnShutdown(p.handler.EndStreams) // nor do log follow and watch streams
	return nil
}

// run runs the parts until ctx ends or one fails: the first to fail
// cancels the others; the controllers stopping for any reason stops
// everything.
func (p *parts) run(ctx context.Context, ln net.Listener, gateway plan.Gateway) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for _, run := range p.node.run {
		g.Go(func() error { return run(ctx) })
	}
	g.Go(func() error { p.prompts.Run(ctx); return nil })
	// The controllers start before the revisions are recorded: they read
	// only a profile's halt there, which counts for its own target only,
	// so a halt the recorder is about to clear changes nothing. Recording a
	// thousand members' first revisions takes tens of milliseconds that
	// the fleet's panes need not wait for.
	g.Go(func() error {
		defer cancel()
		return p.mgr.Run(ctx)
	})
	// The revisions as they are now before the first request (history
	// lists them), then each change.
	recorder := rollout.NewRecorder(p.backend.store, p.backend.revisions, &rollout.RecorderOptions{Declared: p.backend.declared, Logger: p.log})
	recorder.Sync()
	g.Go(func() error { return recorder.Run(ctx) })
	g.Go(func() error { messaging.ReportGoneMembers(ctx, p.roster, p.core); return nil })
	g.Go(func() error {
		if err := p.srv.Serve(p.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve %s: %w", ln.Addr(), err)
		}
		return nil
	})
	g.Go(func() error { shutdown(ctx, p.core, p.srv, p.handler, p.log); return nil })

	base := "http://" + ln.Addr().String()
	p.log.Info("fleetd serving", "url", base, "desired_state", p.backend.source, "state_dir", p.state.Root(), "herdr_socket", p.socket)
	if p.cfg.Ready != nil {
		var sim *herdrsim.Server
		if p.sim != nil {
			sim = p.sim.Server
		}
		p.cfg.Ready(Info{URL: base, MCPURL: gateway.URL, HerdrSocket: p.socket, StateDir: p.state.Root(), DesiredState: p.backend.source,
			WaitFor: p.mgr.WaitFor, Sim: sim, Members: declared(p.backend.store)})
	}
	return g.Wait()
}
