package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/console"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/fleet"
	"github.com/fleetd-dev/fleetd/internal/fleetmsg"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/plan"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/rollout/etcdrollout"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/tokens"
	"github.com/fleetd-dev/fleetd/internal/version"
	"github.com/fleetd-dev/fleetd/mcp"
)

// A backend is where the desired state is kept — the manifests directory,
// or etcd for a fleet of nodes — and what a node runs with it. serve wires
// what it gets and never asks which one it is.
type backend struct {
	// store is the desired state; the controllers run it (its Run, if it
	// has one).
	store store.Store
	// source says where the desired state is, for the log and Info.
	source string
	// node is this node's name in a fleet; "" for the directory.
	node string
	// sessions keeps members' agent sessions where every node of a
	// fleet reads them; nil for the directory (the state directory keeps
	// them).
	sessions controllers.SessionKeeper
	// fence is the node's hold on its members in a fleet (its lease
	// unconfirmed: hold every prompt and start; past its deadline: close
	// the panes another node may take over); nil for the directory.
	fence *fleet.Fence
	// fenceWatch keeps the fence's watchdog armed, on herdr's socket;
	// nil runs none (EtcdConfig.FenceWatchdog).
	fenceWatch *fenceWatch
	// revisions keeps the profiles' and members' revisions: the state
	// directory's, or the fleet's in etcd; declared says whether the
	// whole desired state still declares an object that left the node's
	// snapshot (nil: the snapshot is the whole desired state).
	revisions rollout.Store
	declared  func(kind, name string) bool
	// prune is the store's prune hold, which GET /prune and POST
	// /prune/confirm read and confirm.
	prune *store.Hold
	// close releases what the backend holds once every part stopped.
	close func()
	// onNode adds what the backend runs on this node once its controllers
	// and messaging core exist.
	onNode func(mgr *controllers.Manager, core *messaging.Core, mopts messaging.Options) (*nodeParts, error)
}

// nodeParts are what a backend adds on a node.
type nodeParts struct {
	// members are the members the gateway and the console show, waiter
	// wakes on their changes: the controllers', or the whole fleet's.
	members interface {
		mcp.MemberSource
		console.Members
	}
	waiter mcp.MemberWaiter
	// desired is the desired state the gateway and the console read and
	// write: the controllers' store, or the whole fleet's (every node's
	// members, etcdstore.Fleet).
	desired interface {
		mcp.DesiredState
		console.DesiredState
	}
	// messages is the messaging the gateway and the console use: the
	// core, or the relay across nodes over it.
	messages messenger
	// nodes serves GET /nodes; nil for the directory.
	nodes mcp.NodeSource
	// run are the backend's parts, each until its context ends.
	run []func(ctx context.Context) error
}

// messenger is the messaging the gateway and the console use.
type messenger interface {
	mcp.Messenger
	console.Messenger
}

// directoryBackend is the manifests directory (the default).
func directoryBackend(cfg Config, state statedir.Layout, db *statedb.DB, log *slog.Logger) (*backend, error) {
	d, err := dirstore.New(cfg.ManifestsDir, &dirstore.Options{StateDir: state.Root(), Logger: log, MaxFileBytes: cfg.MaxManifestBytes, PruneHold: cfg.PruneHold,
		Debounce: cfg.ManifestsDebounce})
	if err != nil {
		return nil, err
	}
	revs, err := rollout.OpenDir(db, log)
	if err != nil {
		return nil, err
	}
	return &backend{store: d, source: cfg.ManifestsDir, revisions: revs, prune: d.PruneHold(), close: func() {},
		onNode: func(mgr *controllers.Manager, core *messaging.Core, _ messaging.Options) (*nodeParts, error) {
			return &nodeParts{members: mgr, waiter: mgr, desired: d, messages: core}, nil
		}}, nil
}

// etcdBackend is a fleet of nodes on etcd: the node's one lease, its
// registration, the store of the members bound to it, the nodes, the
// published statuses and the fleet's primary token, read once before the
// node serves (etcdFleet.onNode adds the rest). The node is registered
// before anything reconciles, and toks accepts the fleet's primary token
// before the gateway serves.
func etcdBackend(ctx context.Context, cfg *EtcdConfig, pruneHold time.Duration, state statedir.Layout, gateway plan.Gateway, toks *tokens.Registry, log *slog.Logger) (_ *backend, err error) {
	cli, err := dialEtcd(cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cli.Close()
		}
	}()
	f := &etcdFleet{cfg: cfg, cli: cli, toks: toks, log: log, prefix: cmp.Or(cfg.Prefix, etcdstore.DefaultPrefix)}
	fo := &fleet.Options{Prefix: f.prefix, RequestTimeout: cfg.RequestTimeout, Logger: log}
	f.sessions = session.New(cli, &session.Options{TTL: cfg.NodeTTL, RequestTimeout: cfg.RequestTimeout, Logger: log})
	if err := untilAnswered(ctx, cfg, f.sessions.Start, log); err != nil {
		return nil, fmt.Errorf("register node %s: %w: %w", cfg.Node, etcdstore.ErrUnavailable, err)
	}
	instance, err := fleet.LoadInstance(state)
	if err != nil {
		return nil, err
	}
	info := fleet.NodeInfo{Name: cfg.Node, Labels: cfg.NodeLabels, MaxMembers: cfg.MaxMembers, GatewayURL: gateway.URL, Version: version.Version, Instance: instance,
		RescheduleAfter: v1alpha1.Duration{Duration: cmp.Or(cfg.RescheduleAfter, scheduler.DefaultRescheduleAfter)}}
	if err := untilAnswered(ctx, cfg, func(ctx context.Context) (err error) {
		f.reg, err = fleet.Register(ctx, cli, f.sessions, info, fo)
		return err
	}, log); err != nil {
		return nil, err
	}
	// The node's snapshot holds only the members bound to it: its
	// controllers reconcile those alone. The node remembers its fleet in
	// its state directory (an etcd that is not the fleet's any more is
	// lost to it).
	if f.store, err = etcdstore.New(cli, &etcdstore.Options{Prefix: cfg.Prefix, RequestTimeout: cfg.RequestTimeout, Logger: log, Node: cfg.Node,
		StateDir: state.Root(), PruneHold: pruneHold, CheckInterval: cfg.CheckInterval}); err != nil {
		return nil, err
	}
	f.nodes, f.statuses, f.token = fleet.NewNodes(cli, f.store, fo), fleet.NewStatuses(cli, fo), fleet.NewToken(cli, fo)
	f.agentSessions = fleet.NewSessions(cli, fo)
	f.fence = fleet.NewFence(f.sessions, f.reg, f.store.BindingsRevision, &fleet.FenceOptions{Options: *fo, Client: cli, Node: cfg.Node,
		RescheduleAfter: cmp.Or(cfg.RescheduleAfter, scheduler.DefaultRescheduleAfter)})
	f.revisions = etcdrollout.New(cli, &etcdrollout.Options{Prefix: f.prefix, RequestTimeout: cfg.RequestTimeout, Logger: log})
	// Read once before serving, as the directory store does, so that the
	// first requests see the fleet rather than an empty one (and a member
	// moved here resumes its agent's session from the start).
	for _, sync := range []func(context.Context) error{f.store.Sync, f.nodes.Sync, f.statuses.Sync, f.token.Sync, f.agentSessions.Sync, f.revisions.Sync} {
		if err := untilAnswered(ctx, cfg, sync, log); err != nil {
			return nil, fmt.Errorf("read the desired state from etcd: %w", err)
		}
	}
	if err := f.token.Adopt(ctx, toks, state, cfg.Node); err != nil {
		return nil, err
	}
	fleetDesired := f.store.Fleet()
	var watch *fenceWatch
	if len(cfg.FenceWatchdog) > 0 {
		watch = &fenceWatch{argv: cfg.FenceWatchdog, stderr: os.Stderr, fence: f.fence, renewed: f.sessions.RenewalChanged,
			members: f.store.Snapshot, changed: f.store.Changed, node: cfg.Node, policy: cfg.FencePolicy, log: log}
	}
	return &backend{store: f.store, node: cfg.Node, sessions: f.agentSessions, fence: f.fence, fenceWatch: watch, revisions: f.revisions, prune: f.store.PruneHold(), close: func() { cli.Close() }, onNode: f.onNode,
		declared: func(kind, name string) bool { _, ok := fleetDesired.Get(kind, name); return ok },
		source:   fmt.Sprintf("etcd %s on %s as node %s", f.prefix, strings.Join(cfg.Endpoints, ","), cfg.Node)}, nil
}

// etcdFleet is what etcdBackend opened.
type etcdFleet struct {
	cfg      *EtcdConfig
	prefix   string
	cli      *clientv3.Client
	toks     *tokens.Registry
	log      *slog.Logger
	sessions *session.Session
	reg      *fleet.Registration
	store    *etcdstore.Store
	nodes    *fleet.Nodes
	statuses *fleet.Statuses
	token    *fleet.Token
	// agentSessions are the members' agent sessions kept for the fleet.
	agentSessions *fleet.Sessions
	fence         *fleet.Fence
	// revisions are the fleet's revision histories.
	revisions *etcdrollout.Store
}

// onNode adds on the node the fleet view (what the gateway and the console
// show), the relay across nodes (what they message through), GET /nodes,
// and the parts that run: the lease, the registration and what it says of
// the node's herdr and members, the nodes, statuses and token, the status
// publisher, the scheduler and the relay.
func (f *etcdFleet) onNode(mgr *controllers.Manager, core *messaging.Core, mopts messaging.Options) (*nodeParts, error) {
	state := fleet.NewState(f.store, f.nodes, f.statuses)
	view := fleet.NewView(mgr, state, f.cfg.Node)
	mgr.FollowPeers(view) // a profile's rollout counts every node's members
	local := fleet.NewLocalStatuses(mgr, core)
	relay, err := newRelay(core, f.cli, f.sessions, f.store, f.nodes, view, f.cfg, mopts, f.log)
	if err != nil {
		return nil, err
	}
	publisher := &fleet.StatusPublisherOptions{Options: fleet.Options{Prefix: f.prefix, RequestTimeout: f.cfg.RequestTimeout, Logger: f.log}, Node: f.cfg.Node}
	sched := &scheduler.Options{Prefix: f.prefix, Candidate: f.cfg.Node, RequestTimeout: f.cfg.RequestTimeout, RescheduleAfter: f.cfg.RescheduleAfter, Logger: f.log}
	return &nodeParts{members: view, waiter: view, desired: f.store.Fleet(), messages: relay, nodes: f.nodes, run: []func(context.Context) error{
		f.sessions.Run, f.nodes.Run,
		func(ctx context.Context) error { return f.reg.Run(ctx, f.nodes) },
		func(ctx context.Context) error { return f.fence.Run(ctx, f.store.BindingsChanged) }, f.statuses.Run, f.token.Run, f.agentSessions.Run, f.revisions.Run, relay.Run,
		func(ctx context.Context) error { f.reg.Follow(ctx, herdrSide{mgr}); return nil },
		func(ctx context.Context) error { f.token.Follow(ctx, f.toks); return nil },
		func(ctx context.Context) error { view.Run(ctx); return nil },
		func(ctx context.Context) error { local.Run(ctx); return nil },
		func(ctx context.Context) error {
			return fleet.PublishStatuses(ctx, f.cli.KV, f.store, f.statuses, local, publisher)
		},
		func(ctx context.Context) error { return scheduler.Run(ctx, f.cli, f.sessions, state, sched) },
	}}, nil
}

// herdrSide is what a node publishes about itself from its controllers:
// herdr reachable (their view of it in sync), its version and protocol
// (their herdr cache's last ping), and how many members it reconciles.
type herdrSide struct{ mgr *controllers.Manager }

func (h herdrSide) Herdr() v1alpha1.NodeHerdr {
	version, protocol := h.mgr.Cache().Herdr()
	return v1alpha1.NodeHerdr{Reachable: h.mgr.HerdrSynced(), Version: version, Protocol: protocol}
}

func (h herdrSide) Members() int { return len(h.mgr.Store().Snapshot().Members) }

func (h herdrSide) Changed() <-chan struct{} { return h.mgr.Changed() }

// newRelay is the gateway's messaging on a fleet in etcd: the node's core
// for its own members, etcd for the others' (package fleetmsg), the calls
// it holds under the node's lease. A member's node is its binding as the
// store last read it, lost when nodes say so; its messaging state is what
// that node publishes (fleet.View.RemoteWorker).
func newRelay(core *messaging.Core, cli *clientv3.Client, sessions *session.Session, st *etcdstore.Store, nodes *fleet.Nodes, view *fleet.View, cfg *EtcdConfig, mopts messaging.Options, log *slog.Logger) (*fleetmsg.Relay, error) {
	return fleetmsg.New(core, &fleetmsg.Options{
		Client: cli, Session: sessions, Prefix: cmp.Or(cfg.Prefix, etcdstore.DefaultPrefix), Node: cfg.Node,
		Locate: func(member string) (string, bool) {
			b, ok := st.Bound(member)
			return b.Node, ok
		},
		NodeLost: func(node string) (time.Time, bool) {
			since, lost := nodes.Lost()[node]
			return since, lost
		},
		RemoteStatus: func(member, _ string) (messaging.WorkerStatus, bool) { return view.RemoteWorker(member) },
		PrimaryName:  mcp.PrimaryName, Logger: log, RequestTimeout: cfg.RequestTimeout,
		DefaultTimeout: mopts.DefaultTimeout, MaxContentBytes: mopts.MaxContentBytes, MaxPollBytes: mopts.MaxPollBytes,
		MaxMailboxMessages: mopts.MaxMailboxMessages, // the fleet mailbox's bytes stay fleetmsg's (etcd holds them)
	})
}

// untilAnswered runs one of a starting node's first requests to etcd (its
// lease, its registration, its first reads of the fleet), again while etcd
// does not answer within the request timeout (no member reachable, a
// leader being elected, a machine too busy), until ctx ends: a node
// started beside its etcd, or while it recovers, waits for it and says so
// instead of exiting. An answer that is an error (the fleet is not this
// node's, another fleetd holds the node's name), and a TLS connection
// that fails (explainTLS: no retry mends a certificate), are returned at
// once.
func untilAnswered(ctx context.Context, cfg *EtcdConfig, request func(context.Context) error, log *slog.Logger) error {
	b := retry.New(startRetry, nil)
	for {
		err := request(ctx)
		if err == nil || (ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		if ctx.Err() == nil {
			if why := explainTLS(cfg); why != nil {
				return fmt.Errorf("%w\n(TLS to etcd fails: %w)", err, why)
			}
			log.Warn("etcd did not answer this starting node in time; trying again", "endpoints", strings.Join(cfg.Endpoints, ","), "err", err)
			if b.Wait(ctx) {
				continue
			}
		}
		return fmt.Errorf("stopped while waiting for etcd to answer: %w", err)
	}
}

// startRetry is the first wait between a starting node's requests to etcd
// (growing to four times it).
const startRetry = time.Second
