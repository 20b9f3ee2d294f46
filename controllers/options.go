package controllers

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
	"github.com/fleetd-dev/fleetd/controllers/launch"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/rollout"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Defaults for Options. Those the herdr cache also uses are its own
// (package herdrcache), written down once there.
const (
	DefaultWorkers          = 32
	DefaultResyncPeriod     = herdrcache.DefaultResyncPeriod
	DefaultCallTimeout      = herdrcache.DefaultCallTimeout
	DefaultRestartBackoff   = 10 * time.Second
	DefaultMaxRestartDelay  = 5 * time.Minute
	DefaultDegradedAfter    = 3
	DefaultStableAfter      = 10 * time.Minute
	DefaultReconnectBackoff = herdrcache.DefaultReconnectBackoff
	DefaultMaxReconnect     = herdrcache.DefaultMaxReconnect
	DefaultEventHistory     = 20
	DefaultResubscribeDelay = herdrcache.DefaultResubscribeDelay
	// MaxStartCheck caps the interval between the agent.get checks of a
	// starting agent (the safety net under herdr's events).
	MaxStartCheck = 5 * time.Second
	// PaneBusyWindow bounds how long agent.start is retried while herdr
	// answers agent_pane_busy (the new pane's shell is still starting),
	// and MaxPaneBusyTries how many times.
	PaneBusyWindow   = 10 * time.Second
	MaxPaneBusyTries = 20
)

// TabLabelPrefix starts the label of every herdr tab fleetd creates for a
// member ("fleetd/NAME"). A tab with this prefix that matches no member is
// an orphan of fleetd's and is closed; tabs without it are never touched.
const TabLabelPrefix = "fleetd/"

// Herdr is the herdr client the controllers are given; *herdr.Client
// implements it. The shared cache (package controllers/herdrcache) pings,
// lists and subscribes with it; the reconciler only writes.
type Herdr interface {
	herdrcache.Client
	CreateWorkspace(ctx context.Context, p herdr.WorkspaceCreateParams) (*herdr.WorkspaceCreated, error)
	CreateTab(ctx context.Context, p herdr.TabCreateParams) (*herdr.TabCreated, error)
	CloseTab(ctx context.Context, tabID string) error
	CloseWorkspace(ctx context.Context, workspaceID string) error
	LaunchAgent(ctx context.Context, p herdr.AgentStartParams) (*herdr.AgentStarted, error)
	GetAgent(ctx context.Context, target string) (*herdr.AgentInfo, error)
	ReadPane(ctx context.Context, p herdr.PaneReadParams) (*herdr.PaneReadResult, error)
	SendKeys(ctx context.Context, paneID string, keys []string) error
	worktreeAPI
}

// worktreeAPI is herdr 0.9's worktree methods (worktree.go).
type worktreeAPI interface {
	ListWorktrees(ctx context.Context, p herdr.WorktreeListParams) (*herdr.WorktreeList, error)
	OpenWorktree(ctx context.Context, p herdr.WorktreeOpenParams) (*herdr.WorktreeWorkspace, error)
	CreateWorktree(ctx context.Context, p herdr.WorktreeCreateParams) (*herdr.WorktreeWorkspace, error)
	RemoveWorktree(ctx context.Context, p herdr.WorktreeRemoveParams) (*herdr.WorktreeRemoved, error)
}

// herdrWriter is what the reconciler does to herdr. It reads herdr through
// the cache, except for one agent.get to confirm what an event about a
// starting agent said, one bounded read of the screen of an agent that
// waits at a dialog, one tab.list before it closes a workspace, one
// worktree.list before it opens or makes a member's worktree, and the
// fence's interrupt of an agent (FencePause).
type herdrWriter interface {
	CreateWorkspace(ctx context.Context, p herdr.WorkspaceCreateParams) (*herdr.WorkspaceCreated, error)
	CreateTab(ctx context.Context, p herdr.TabCreateParams) (*herdr.TabCreated, error)
	CloseTab(ctx context.Context, tabID string) error
	CloseWorkspace(ctx context.Context, workspaceID string) error
	LaunchAgent(ctx context.Context, p herdr.AgentStartParams) (*herdr.AgentStarted, error)
	GetAgent(ctx context.Context, target string) (*herdr.AgentInfo, error)
	ReadPane(ctx context.Context, p herdr.PaneReadParams) (*herdr.PaneReadResult, error)
	ListTabs(ctx context.Context, workspaceID string) ([]herdr.TabInfo, error)
	SendKeys(ctx context.Context, paneID string, keys []string) error
	worktreeAPI
}

// Options configure a Manager. nil means defaults wherever that makes sense;
// the store and herdr (Herdr or HerdrSocket) are required.
type Options struct {
	// Store is the desired state (a backend of package internal/store,
	// which the caller builds). Manager.Run runs it when it has a
	// Run(context.Context) error method.
	Store store.Store
	// State is the state database (package statedb) the ownership records
	// and the members' memory are kept in, open on a state directory whose
	// lock (statedir.Layout.Lock) the caller holds, and which it closes
	// after Run returned. nil keeps everything in memory (tests only).
	State *statedb.DB
	// Herdr is the herdr client. If nil, one is created for HerdrSocket
	// ("" resolves herdr's default socket) with the metrics observer.
	Herdr       Herdr
	HerdrSocket string
	// Launcher prepares launches (internal/harness's *Launcher in fleetd);
	// nil uses the profile's args and env only.
	Launcher launch.Launcher
	// OnPaneGone, if set, is called (it must not block) when a pane fleetd
	// ran for a member is gone for good: closed because the member was
	// deleted, paused or replaced, or found closed, or its agent exited or
	// failed to start. reason says which, in a few words. It suits
	// messaging.Core.WorkerGone (fail the member's waiters with worker_gone).
	OnPaneGone func(member, paneID, reason string)
	// OnAgentRelaunched, if set, is called (it must not block) when herdr
	// relaunched the agent of a member's pane: a new process in the same
	// pane, as herdr does for every agent when it restarts with session
	// restore (its default), so whatever the old process was given is lost.
	// It comes before any status of the new agent reaches OnAgentStatus. A
	// live handoff (new terminal ids, the agents kept running) is not a
	// relaunch. It suits messaging.Core.AgentRelaunched.
	OnAgentRelaunched func(member, paneID string)
	// OnAgentStatus, if set, is called (it must not block) with an owned
	// agent's status (idle, working, blocked, done, unknown) for every
	// pane.agent_status_changed event, after every listing of herdr and when
	// the agent has started. seq grows with every change of the agent's
	// state (idle and done count as one, as in herdr's state_change_seq),
	// per pane, from 1 for each new pane. It suits
	// messaging.Core.ObserveStatus.
	OnAgentStatus func(member, status string, seq uint64)
	// Activity, if set, tells what the messaging core holds open for a
	// member (a turn, a queued message, a question): a member deleted,
	// stopped or paused keeps its tab, and a spec change waits to replace
	// its agent, while it does (graceful.go). *messaging.Core implements
	// it. Without it only herdr's status of the agent (working, blocked)
	// makes a member wait.
	Activity Activity
	// Sessions, if set, keeps each member's agent session where every
	// node of a fleet reads it (internal/fleet's Sessions, in etcd): a
	// member this node starts that has no session in its own memory — it
	// ran on another node until now — resumes the one kept there, and
	// every session this node remembers is kept there too (resume.go).
	Sessions SessionKeeper
	// Fence, if set, is this node's hold on its members in a fleet on
	// etcd (internal/fleet's Fence): while it cannot confirm a member is
	// still its own nothing is started for it, and past its fence
	// deadline the member's tab closes at once (fence.go), or, with
	// FencePolicy FencePause, its agent is interrupted and its tab kept.
	Fence Fence
	// FencePolicy is what the fence does at its deadline; "" is
	// FenceClose.
	FencePolicy FencePolicy
	// Revisions keeps the profiles' revisions and their rollouts' halts
	// (internal/rollout's Dir on the state directory, or etcdrollout's
	// store in a fleet): a replacement that did not become Ready stops its
	// profile's rollout there, where every node and a restarted fleetd
	// sees it. The caller records the revisions (rollout.Recorder). nil
	// keeps them in memory.
	Revisions rollout.Store
	// Registerer receives the metrics when Metrics is nil.
	Registerer prometheus.Registerer
	// Metrics, if set, is used instead of creating series on Registerer
	// (build the herdr client with Metrics.HerdrObserver()).
	Metrics *Metrics
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Clock drives backoff, resync and condition times; default wall clock.
	Clock clock.Clock
	// Workers is the number of concurrent reconciles; default
	// DefaultWorkers (32): a reconcile waits on herdr and on the state
	// database's group commits far more than it computes.
	Workers int
	// ResyncPeriod is how often herdr is listed in full as a safety net;
	// default 60 s.
	ResyncPeriod time.Duration
	// CallTimeout bounds each herdr call; default 10 s. No call waits for
	// an agent to start: the profile's startup timeout is a timer.
	CallTimeout time.Duration
	// RestartBackoff and MaxRestartDelay bound the exponential delay before
	// a failed member is recreated; defaults 10 s and 5 min.
	RestartBackoff, MaxRestartDelay time.Duration
	// DegradedAfter consecutive failures make a member Degraded; default 3.
	DegradedAfter int
	// StableAfter is how long an agent must run for its failure count and
	// backoff to reset; default 10 min.
	StableAfter time.Duration
	// ReconnectBackoff and MaxReconnect bound the wait between attempts to
	// reach an unavailable herdr; defaults 500 ms and 30 s.
	ReconnectBackoff, MaxReconnect time.Duration
	// ResubscribeDelay is how long after a change of the owned panes the
	// event subscription is renewed to cover them (one renewal per burst);
	// default 250 ms. Lifecycle events are followed without interruption.
	ResubscribeDelay time.Duration
	// PollInterval is how soon after agent.start a starting agent is first
	// checked with agent.get; later checks back off, doubling, up to
	// MaxStartCheck. Readiness normally arrives sooner, as a herdr event
	// (the agent detected, its status changed), which is checked at once.
	// Default herdr.DefaultPollInterval.
	PollInterval time.Duration
	// QueueBaseDelay and QueueMaxDelay tune the work queue's per-item
	// error backoff; defaults those of package workqueue.
	QueueBaseDelay, QueueMaxDelay time.Duration
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.Clock == nil {
		out.Clock = clock.Real{}
	}
	if out.Workers <= 0 {
		out.Workers = DefaultWorkers
	}
	if out.ResyncPeriod <= 0 {
		out.ResyncPeriod = DefaultResyncPeriod
	}
	if out.CallTimeout <= 0 {
		out.CallTimeout = DefaultCallTimeout
	}
	if out.RestartBackoff <= 0 {
		out.RestartBackoff = DefaultRestartBackoff
	}
	if out.MaxRestartDelay <= 0 {
		out.MaxRestartDelay = DefaultMaxRestartDelay
	}
	if out.DegradedAfter <= 0 {
		out.DegradedAfter = DefaultDegradedAfter
	}
	if out.StableAfter <= 0 {
		out.StableAfter = DefaultStableAfter
	}
	if out.ReconnectBackoff <= 0 {
		out.ReconnectBackoff = DefaultReconnectBackoff
	}
	if out.MaxReconnect <= 0 {
		out.MaxReconnect = DefaultMaxReconnect
	}
	if out.ResubscribeDelay <= 0 {
		out.ResubscribeDelay = DefaultResubscribeDelay
	}
	if out.PollInterval <= 0 {
		out.PollInterval = herdr.DefaultPollInterval
	}
	return out
}

// SessionKeeper keeps members' agent sessions for a fleet of nodes
// (internal/fleet's *Sessions). Neither method may block.
type SessionKeeper interface {
	// Session returns the session kept for member name when it is of the
	// member with uid.
	Session(member, uid string) (v1alpha1.AgentSession, bool)
	// Keep asks for the member's kept session to be s (nil: none).
	Keep(member, uid string, s *v1alpha1.AgentSession)
}

// profileLauncher is the default Launcher: the profile's args and env, no
// MCP configuration and no token.
type profileLauncher struct{}

func (profileLauncher) Prepare(_ context.Context, _ *v1alpha1.Member, p *v1alpha1.Profile, _ map[string]*v1alpha1.Tenant) (launch.Spec, error) {
	env := make(map[string]string, len(p.Spec.Env))
	for k, v := range p.Spec.Env {
		env[k] = v
	}
	return launch.Spec{Args: append([]string(nil), p.Spec.Args...), Env: env}, nil
}
func (profileLauncher) Bind(launch.Spec, string, string) error { return nil }
func (profileLauncher) Release(launch.Pane) error              { return nil }
func (profileLauncher) Forget(string) error                    { return nil }
