package fleetmsg

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Core is the node's own messaging core as the relay uses it
// (*messaging.Core).
type Core interface {
	Send(ctx context.Context, req messaging.SendRequest) (messaging.SendResult, error)
	Reply(ctx context.Context, worker, content string, final bool) (messaging.ReplyResult, error)
	Ask(ctx context.Context, worker, content string, timeout time.Duration) (messaging.AskResult, error)
	PollPage(ctx context.Context, recipient string, req messaging.PollRequest) (messaging.PollPage, error)
	Ack(recipient string, ids []string) (int, error)
	Pending(recipient string) int
	Status(name string) messaging.WorkerStatus
	TurnWorker(id string) (string, bool)
	Busy() []string
	Changed() <-chan struct{}
}

// Defaults of [Options].
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultTombstoneTTL   = time.Hour
	DefaultTurnGrace      = time.Hour
	DefaultRetryInterval  = time.Second
	DefaultMaxRequests    = 1000
	// DefaultMaxMailboxBytes is the fleet mailbox's default byte bound:
	// smaller than the core's, since every node mirrors the fleet mailbox
	// and etcd keeps it.
	DefaultMaxMailboxBytes int64 = 16 << 20
)

// Options configure a Relay. Client, Session, Node and Locate are
// required; the rest has defaults.
type Options struct {
	// Client is the etcd the fleet shares.
	Client *clientv3.Client
	// Session is the node's lease (package internal/etcd/session): the
	// waiting keys of the calls this node holds go with it.
	Session *session.Session
	// Prefix is the fleet's key prefix (etcdstore's, e.g. /fleetd); the
	// relay's keys are under PREFIX/msg/.
	Prefix string
	// Node is this node's name.
	Node string
	// Locate answers which node a member is bound to; ok is false for a
	// member the fleet does not know or has not bound.
	Locate func(member string) (node string, ok bool)
	// NodeLost, if set, says whether a node is lost (its registration
	// gone, members still bound to it) and since when: a send to a member
	// of a lost node fails at once with worker_gone naming the node,
	// rather than waiting in etcd for a node that may not come back.
	NodeLost func(node string) (since time.Time, lost bool)
	// RemoteStatus, if set, reports a member another node runs
	// (bridge_status); unset, such a member's status is "unknown".
	RemoteStatus func(member, node string) (messaging.WorkerStatus, bool)
	// PrimaryName is the primary's name in the cores (mcp.PrimaryName).
	// Default messaging.DefaultPrimaryName.
	PrimaryName string
	// Clock drives deadlines and retries; default the wall clock.
	Clock clock.Clock
	// Logger defaults to a discarding logger. Content is never logged.
	Logger *slog.Logger
	// RequestTimeout bounds every etcd request; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// DefaultTimeout applies to a held call without a timeout; default
	// 10 min, the core's.
	DefaultTimeout time.Duration
	// MaxContentBytes bounds every content argument, on the origin as the
	// core does on the worker's node; default v1alpha1.MaxContentBytes.
	MaxContentBytes int
	// MaxMailboxMessages and MaxMailboxBytes bound the fleet mailbox;
	// default messaging.DefaultMaxMailboxMessages and
	// DefaultMaxMailboxBytes. MaxPollBytes bounds one page; default
	// messaging.DefaultMaxPollBytes.
	MaxMailboxMessages int
	MaxMailboxBytes    int64
	MaxPollBytes       int
	// MaxRequests bounds the requests waiting in etcd for one node;
	// default DefaultMaxRequests.
	MaxRequests int
	// MaxWaiters bounds the calls held on this node for turns on other
	// nodes and the waiting polls of the fleet mailbox; default 1024.
	MaxWaiters int
	// TombstoneTTL is how long an acknowledged fleet message is
	// remembered, so that a forward made again after a crash is not
	// delivered twice; default DefaultTombstoneTTL.
	TombstoneTTL time.Duration
	// TurnGrace is how long a turn's location outlives its deadline (a
	// late answer to a question still finds the turn); default
	// DefaultTurnGrace.
	TurnGrace time.Duration
	// RetryInterval is the base of the backoff after etcd or the core
	// failed a background step; default DefaultRetryInterval.
	RetryInterval time.Duration
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Client == nil {
		return r, errors.New("fleetmsg: no etcd client")
	}
	if r.Session == nil {
		return r, errors.New("fleetmsg: no session (the node's lease)")
	}
	if r.Node == "" || strings.ContainsAny(r.Node, "/") {
		return r, fmt.Errorf("fleetmsg: node name %q: want one key segment", r.Node)
	}
	if r.Locate == nil {
		return r, errors.New("fleetmsg: no Locate")
	}
	if r.Prefix == "" {
		r.Prefix = "/fleetd"
	}
	r.PrimaryName = cmp.Or(r.PrimaryName, messaging.DefaultPrimaryName)
	r.Clock = cmp.Or[clock.Clock](r.Clock, clock.Real{})
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	r.RequestTimeout = cmp.Or(r.RequestTimeout, DefaultRequestTimeout)
	r.DefaultTimeout = cmp.Or(r.DefaultTimeout, 10*time.Minute)
	r.MaxContentBytes = cmp.Or(r.MaxContentBytes, v1alpha1.MaxContentBytes)
	r.MaxMailboxMessages = cmp.Or(r.MaxMailboxMessages, messaging.DefaultMaxMailboxMessages)
	r.MaxMailboxBytes = cmp.Or(r.MaxMailboxBytes, DefaultMaxMailboxBytes)
	r.MaxPollBytes = cmp.Or(r.MaxPollBytes, messaging.DefaultMaxPollBytes)
	r.MaxRequests = cmp.Or(r.MaxRequests, DefaultMaxRequests)
	r.MaxWaiters = cmp.Or(r.MaxWaiters, 1024)
	r.TombstoneTTL = cmp.Or(r.TombstoneTTL, DefaultTombstoneTTL)
	r.TurnGrace = cmp.Or(r.TurnGrace, DefaultTurnGrace)
	r.RetryInterval = cmp.Or(r.RetryInterval, DefaultRetryInterval)
	return r, nil
}

// Relay is a node's messaging across the fleet: it satisfies the gateway's
// Messenger (mcp.Messenger) over the node's own core. See the package
// documentation.
type Relay struct {
	o    Options
	core Core
	cli  *clientv3.Client
	keys keys

	// The fleet mailbox, the waiting keys and this node's requests, each
	// mirrored by an informer (package internal/etcd/informer).
	mailbox  *informer.Informer[*fleetMail]
	waiting  *informer.Informer[struct{}]
	requests *informer.Informer[*mvccpb.KeyValue]

	// mu guards what the mirrors' OnChange builds (mail, bytes, waited)
	// and the waiters count and request counts. Nothing holds it over
	// etcd I/O.
	mu      sync.Mutex
	mail    map[string]*fleetMail // the fleet mailbox by message id
	bytes   int64                 // content size of mail
	waited  map[string]bool       // turns some node holds a call on (the waiting keys)
	holding map[string]int        // calls of this node on each turn, from before their waiting key is written
	waiters int
	counts  map[string]requestCount // by node: see roomAt
	// unsettled are takes held calls left uncertain (settle); settling
	// fires when one is added.
	unsettled []unsettled
	settling  notify.Signal
	// changed fires at every change of the fleet mailbox or the waiting
	// keys; watch (Changed) at those and every change of the core.
	changed notify.Signal
	watch   notify.Signal

	leases leaseCache
	// listed, if set, is called between a list and the watch from its
	// revision, with the prefix (tests: write and compact etcd there).
	listed func(prefix string, rev int64)
	// batch is how many messages the forwarder reads from the core at once
	// (forwardBatch; tests make it small).
	batch int
}

// New returns a Relay over core. It reads nothing yet: Run mirrors the
// fleet mailbox, takes this node's requests and forwards its mail.
func New(core Core, opts *Options) (*Relay, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{o: o, core: core, cli: o.Client, keys: keys{base: o.Prefix + "/msg/"},
		mail: map[string]*fleetMail{}, waited: map[string]bool{}, holding: map[string]int{}, counts: map[string]requestCount{}, batch: forwardBatch}
	r.leases = leaseCache{cli: o.Client, clock: o.Clock, timeout: o.RequestTimeout, leases: map[time.Time]clientv3.LeaseID{}}
	r.mailbox = newInformer(r, r.keys.mailbox(), "the fleet mailbox", r.decodeMail, r.mirrorMailbox)
	r.waiting = newInformer(r, r.keys.waitingDir(), "the fleet's waiting calls",
		func(*mvccpb.KeyValue, struct{}, bool) (struct{}, bool) { return struct{}{}, true }, r.mirrorWaiting)
	r.requests = newInformer(r, r.keys.requests(o.Node), "this node's requests",
		func(kv *mvccpb.KeyValue, _ *mvccpb.KeyValue, _ bool) (*mvccpb.KeyValue, bool) { return kv, true }, nil)
	r.changed.Follow(r.mailbox.Signal(), r.waiting.Signal())
	r.watch.Follow(&r.changed)
	return r, nil
}

// listPage is how many keys one request of a list reads (values carry
// content: up to MaxContentBytes each).
const listPage = 32

// newInformer is an informer of the relay's keys under prefix.
func newInformer[E any](r *Relay, prefix, name string, decode func(*mvccpb.KeyValue, E, bool) (E, bool), changed func()) *informer.Informer[E] {
	return informer.New(informer.Options[E]{
		Client: r.o.Client, Prefix: prefix, Name: name, Decode: decode, OnChange: changed, PageSize: listPage,
		RequestTimeout: r.o.RequestTimeout, RetryInterval: r.o.RetryInterval, Clock: r.o.Clock, Logger: r.o.Logger,
		AfterList: func(rev int64) {
			if r.listed != nil {
				r.listed(prefix, rev)
			}
		},
	})
}

// Reply is the local core's: a worker always talks to its own node.
func (r *Relay) Reply(ctx context.Context, worker, content string, final bool) (messaging.ReplyResult, error) {
	return r.core.Reply(ctx, worker, content, final)
}

// Ask is the local core's: a worker always talks to its own node.
func (r *Relay) Ask(ctx context.Context, worker, content string, timeout time.Duration) (messaging.AskResult, error) {
	return r.core.Ask(ctx, worker, content, timeout)
}

// Busy is the local core's: the workers of this node something waits on.
func (r *Relay) Busy() []string { return r.core.Busy() }

// Changed returns a channel closed at the next change of the local core's
// state or of the fleet mailbox, for a watcher that shows them (the
// browser console). It needs Run, which follows the core for every
// watcher.
func (r *Relay) Changed() <-chan struct{} { return r.watch.Changed() }

// Status reports a worker: this node's from its core, another node's from
// Options.RemoteStatus, else as unknown.
func (r *Relay) Status(name string) messaging.WorkerStatus {
	node, ok := r.o.Locate(name)
	if !ok || node == r.o.Node {
		return r.core.Status(name)
	}
	if r.o.RemoteStatus != nil {
		if s, ok := r.o.RemoteStatus(name, node); ok {
			return s
		}
	}
	return messaging.WorkerStatus{Worker: name, AgentStatus: messaging.StatusUnknown}
}

// Send routes a request: to the local core when its worker (or, with
// TurnID, its turn) is on this node, else through etcd to the worker's
// node.
func (r *Relay) Send(ctx context.Context, req messaging.SendRequest) (messaging.SendResult, error) {
	if req.From != r.o.PrimaryName || req.ID != "" {
		return r.core.Send(ctx, req)
	}
	if req.TurnID != "" {
		if _, ok := r.core.TurnWorker(req.TurnID); ok {
			return r.core.Send(ctx, req)
		}
		loc, found, err := r.turnLocation(ctx, req.TurnID)
		if err != nil {
			return messaging.SendResult{}, err
		}
		if !found || loc.Node == r.o.Node || (req.To != "" && req.To != loc.Worker) {
			return r.core.Send(ctx, req) // the core says not_found
		}
		return r.remote(ctx, req, loc.Node, loc.Worker)
	}
	node, ok := r.o.Locate(req.To)
	if !ok || node == r.o.Node {
		return r.core.Send(ctx, req) // the core admits, or refuses, as it does alone
	}
	return r.remote(ctx, req, node, req.To)
}

func (r *Relay) checkContent(s string) error {
	if s == "" {
		return &messaging.Error{Code: messaging.CodeInvalid, Msg: "content is empty"}
	}
	if len(s) > r.o.MaxContentBytes {
		return &messaging.Error{Code: messaging.CodeTooLarge, Msg: fmt.Sprintf("content is %d bytes; the limit is %d", len(s), r.o.MaxContentBytes)}
	}
	return nil
}

func (r *Relay) acquire() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiters >= r.o.MaxWaiters {
		return &messaging.Error{Code: messaging.CodeTooManyWaiters, Msg: fmt.Sprintf("this node already holds %d waiting calls on the fleet", r.o.MaxWaiters)}
	}
	r.waiters++
	return nil
}

func (r *Relay) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiters--
}

// unavailable is the error of an etcd request that failed.
func unavailable(what string, err error) error {
	return &messaging.Error{Code: messaging.CodeUnavailable, Msg: what + " (etcd)", Err: err}
}

func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Run mirrors the fleet mailbox and the waiting keys, hands this node's
// requests to its core and forwards the mail its core holds for the
// primary to the fleet mailbox, until ctx ends. It returns nil then; etcd
// failing is retried, never fatal.
func (r *Relay) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, inf := range []interface{ Run(context.Context) error }{r.mailbox, r.waiting, r.requests} {
		wg.Go(func() { _ = inf.Run(ctx) }) // returns nil when ctx ends
	}
	for _, f := range []func(context.Context){r.takeRequests, r.forward, r.settle} {
		wg.Go(func() { f(ctx) })
	}
	wg.Go(func() { r.watch.Forward(ctx, r.core) })
	wg.Wait()
	return nil
}

// waitSession returns the lease of the node's waiting keys, waiting for
// one while ctx lasts (at most the session's request timeout).
func (r *Relay) waitSession(ctx context.Context) (clientv3.LeaseID, error) {
	sess, err := r.o.Session.Wait(ctx)
	switch {
	case err == nil:
		return sess.Lease(), nil
	case errors.Is(err, context.Canceled):
		return 0, err
	}
	return 0, &messaging.Error{Code: messaging.CodeUnavailable, Msg: "this node holds no lease in etcd (etcd unreachable?); nothing was sent", Err: err}
}

// waitSynced waits, at most Options.RequestTimeout and not past done's
// closing (a waiting poll's timeout), for the first list of the fleet
// mailbox, so that a poll right after a start does not show an empty
// mailbox that is not.
func (r *Relay) waitSynced(ctx context.Context, done <-chan struct{}) {
	if r.mailbox.Synced() {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := r.o.Clock.AfterFunc(r.o.RequestTimeout, cancel)
	defer t.Stop()
	go func() { // ends when waitSynced returns, at the latest
		select {
		case <-done:
			cancel()
		case <-wctx.Done():
		}
	}()
	_ = notify.Wait(wctx, r.mailbox, r.mailbox.Synced)
}
