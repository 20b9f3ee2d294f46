package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetd-dev/fleetd/internal/listener"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/mcp"
)

// DefaultPruneHold is how long a held prune waits for confirmation when
// Config.PruneHold is 0.
const DefaultPruneHold = store.DefaultPruneHold

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
	// PruneHold is how long one change that removes most of the node's
	// members without deletes through fleetd waits for confirmation
	// (store.Hold, `--prune-hold`); 0 means store.DefaultPruneHold.
	PruneHold time.Duration
	// ManifestsDebounce is the quiet after a burst of file events before
	// the manifests directory is read again (dirstore.Options.Debounce);
	// 0 means dirstore.DefaultDebounce.
	ManifestsDebounce time.Duration
	// StateDir holds the lock, the primary token, the state database (the
	// records fleetd keeps per member: panes, tokens' hashes, memory,
	// first prompts), the message journal and the other state files.
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

	// stateFile, if set, wraps the state database's file: tests inject
	// crashes with it (statedb.Options.Wrap).
	stateFile func(statedb.File) statedb.File
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
	served := false // a start-up error is not a stop: no "stopped" line before it
	defer func() {
		if served {
			log.Info("fleetd stopped; releasing the state directory", "state_dir", state.Root())
		}
		if uerr := lock.Unlock(); uerr != nil {
			log.Warn("release the state directory", "err", uerr)
		}
	}()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	served, err = serve(ctx, cfg, state, ln, log)
	return err
}

// serve builds the parts on the locked state directory and runs them until
// ctx ends or one fails. It returns once every part has stopped and the
// messaging core has closed its journal; served says whether every part
// opened and fleetd served (false: err is a start-up error).
func serve(ctx context.Context, cfg Config, state statedir.Layout, ln net.Listener, log *slog.Logger) (served bool, err error) {
	p := &parts{cfg: cfg, state: state, log: log}
	defer p.close()
	gateway, err := p.listen(ln)
	if err != nil {
		return false, err
	}
	for _, open := range []func() error{
		p.openState,
		p.openHerdr,
		func() error { return p.openBackend(ctx, gateway) },
		p.openMessaging,
		p.openControllers,
		func() error { return p.openGateway(ln) },
	} {
		if err := open(); err != nil {
			return false, err
		}
	}
	return true, p.run(ctx, ln, gateway)
}

// openBackend opens the desired state the configuration names.
func openBackend(ctx context.Context, cfg Config, state statedir.Layout, db *statedb.DB, gateway plan.Gateway, toks *tokens.Registry, log *slog.Logger) (*backend, error) {
	if cfg.Etcd != nil {
		return etcdBackend(ctx, cfg.Etcd, cfg.PruneHold, state, gateway, toks, log)
	}
	return directoryBackend(cfg, state, db, log)
}

// herdrSocket is the herdr fleetd talks to: the embedded simulated herdr
// with Config.Sim (started here; the caller closes it), else the
// configured socket or the one herdr itself would use.
func herdrSocket(cfg Config, state statedir.Layout, db *statedb.DB, log *slog.Logger) (string, *simulation, error) {
	if cfg.Sim {
		sim, err := startSimulation(state, db, herdrsim.Options{Protocol: cfg.SimProtocol, ReadyDelay: cfg.SimReadyDelay, Validator: cfg.SimValidator}, log)
		if err != nil {
			return "", nil, err
		}
		log.Info("simulated herdr started", "socket", sim.SocketPath())
		return sim.SocketPath(), sim, nil
	}
	if cfg.HerdrSocket != "" {
		return cfg.HerdrSocket, nil, nil
	}
	home, _ := os.UserHomeDir()
	return herdr.ResolveSocketPath(os.Getenv, home), nil, nil
}

// messagingOptions are the messaging core's options: the configured ones,
// with the daemon's registry, logger and primary, and new messages only to
// running members of the desired state.
func messagingOptions(cfg Config, reg prometheus.Registerer, roster messaging.Roster, log *slog.Logger) messaging.Options {
	mopts := messaging.Options{}
	if cfg.Messaging != nil {
		mopts = *cfg.Messaging
	}
	mopts.Registerer, mopts.Logger, mopts.PrimaryName = reg, log, mcp.PrimaryName
	if cfg.PrimaryPane != "" {
		mopts.PrimaryTarget = cfg.PrimaryPane
	}
	mopts.Admit = messaging.AdmitMembers(roster)
	return mopts
}

// shutdown waits for ctx to end, then releases the calls held on the
// gateway (they end with unavailable) before the listener waits for its
// connections to finish, and closes the MCP sessions left.
func shutdown(ctx context.Context, core *messaging.Core, srv *http.Server, handler *mcp.Handler, log *slog.Logger) {
	<-ctx.Done()
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
	// Sessions whose clients cannot end them (a revoked worker's DELETE is
	// refused) would outlive the listener.
	if err := handler.Close(); err != nil {
		log.Debug("close MCP sessions", "err", err)
	}
}

// paneGone fans the controllers' closed panes (controllers.Options.
// OnPaneGone) out to each part that listens, in the order they were added.
// The listeners are built after the controllers, which they read; the
// controllers report only once they run, after every listener was added.
type paneGone struct {
	mu        sync.Mutex
	listeners []func(member, paneID, reason string)
}

func (p *paneGone) add(l func(member, paneID, reason string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listeners = append(p.listeners, l)
}

func (p *paneGone) report(member, paneID, reason string) {
	p.mu.Lock()
	listeners := p.listeners
	p.mu.Unlock()
	for _, l := range listeners {
		l(member, paneID, reason)
	}
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

// Roster is the desired state in st, with the panes that still run for
// members it no longer runs (closing, nil: none; the controllers'
// Manager.RunsPane), as the messaging core's admit and gone policies read
// it ([messaging.Roster]).
func Roster(st store.Store, closing func(member string) bool) messaging.Roster {
	return roster{st, closing}
}

type roster struct {
	store.Store
	closing func(string) bool
}

func (r roster) Synced() bool                        { return r.Snapshot().Synced }
func (r roster) Member(name string) *v1alpha1.Member { return r.Snapshot().Members[name] }
func (r roster) Closing(name string) bool            { return r.closing != nil && r.closing(name) }

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
