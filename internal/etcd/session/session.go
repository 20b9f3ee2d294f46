package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
)

// Defaults of [Options].
const (
	DefaultTTL            = 10 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultRetryInterval  = time.Second
)

// ErrNoSession is wrapped by [Session.Wait] when no lease came in time.
var ErrNoSession = errors.New("this node holds no lease in etcd (etcd unreachable?)")

// Options configure a [Session]. nil means defaults.
type Options struct {
	// TTL is the lease's time to live: keys under it go this long after
	// the node stops renewing it. etcd's minimum lease is a few seconds;
	// shorter values are raised by etcd. Default DefaultTTL.
	TTL time.Duration
	// RequestTimeout bounds the grant and the revoke; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryInterval is the base of the backoff between grants that failed;
	// default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock drives the backoff; default the wall clock.
	Clock clock.Clock
	// Logger receives a line when the lease is lost and when a new one is
	// granted; default slog.Default().
	Logger *slog.Logger
}

// Session is a node's lease. See the package documentation.
type Session struct {
	cli *clientv3.Client
	// keeper is cli with the session's own keep-alive (keepAlive) in place
	// of the client's: what concurrency.NewSession is given.
	keeper *clientv3.Client
	o      Options
	ttl    int // seconds

	mu      sync.Mutex
	cur     *concurrency.Session
	stop    context.CancelFunc // ends cur's keep-alive
	renewal Renewal
	changed notify.Signal
	renewed notify.Signal // the renewal's lease or failure changed
}

// Renewal is what the node knows of its lease's life: which lease, when
// the last keep-alive etcd took was sent, and whether the keep-alives
// since fail. etcd renews a lease when a keep-alive reaches it, never
// before it was sent, and a new etcd leader only extends leases: the
// lease lives at etcd at least TTL from Sent, whatever the network did
// to the request or its answer.
type Renewal struct {
	// Lease is the lease renewed; 0 while the node holds none.
	Lease clientv3.LeaseID
	// Sent is when the last keep-alive etcd answered was sent (the
	// grant's request, before the first).
	Sent time.Time
	// Failing is why the last keep-alive failed; nil when it was
	// answered.
	Failing error
}

// New returns a Session on cli; nothing is granted until Start or Run.
func New(cli *clientv3.Client, opts *Options) *Session {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.TTL = cmp.Or(o.TTL, DefaultTTL)
	o.RequestTimeout = cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	o.RetryInterval = cmp.Or(o.RetryInterval, DefaultRetryInterval)
	o.Clock = cmp.Or[clock.Clock](o.Clock, clock.Real{})
	o.Logger = cmp.Or(o.Logger, slog.Default())
	s := &Session{cli: cli, o: o, ttl: int(max((o.TTL+time.Second-1)/time.Second, 1))}
	// The election and the session's own calls go to cli; only the
	// keep-alive is the session's.
	s.keeper = clientv3.NewCtxClient(cli.Ctx())
	s.keeper.Cluster, s.keeper.KV, s.keeper.Watcher, s.keeper.Auth, s.keeper.Maintenance = cli.Cluster, cli.KV, cli.Watcher, cli.Auth, cli.Maintenance
	s.keeper.Lease = keeper{Lease: cli.Lease, s: s}
	return s
}

// TTL is the lease's time to live, as granted (whole seconds).
func (s *Session) TTL() time.Duration { return time.Duration(s.ttl) * time.Second }

// RenewEvery is how often the lease is renewed: a third of its TTL, as
// etcd's client does.
func (s *Session) RenewEvery() time.Duration { return s.TTL() / 3 }

// Start grants the first lease, unless the session has one; it fails when
// etcd does not answer within the request timeout.
func (s *Session) Start(ctx context.Context) error {
	if s.Current() != nil {
		return nil
	}
	return s.grant(ctx)
}

// grant grants a lease and makes it the current session.
func (s *Session) grant(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	sent := s.o.Clock.Now()
	lease, err := s.cli.Grant(rctx, int64(s.ttl))
	cancel()
	if err != nil {
		return fmt.Errorf("grant a lease in etcd: %w", err)
	}
	s.setRenewal(Renewal{Lease: lease.ID, Sent: sent})
	// The keep-alive runs on a context of the session's own, ended by
	// Run's end, the lease's loss or the client's close, never by a
	// request's.
	kctx, stop := context.WithCancel(s.cli.Ctx())
	sess, err := concurrency.NewSession(s.keeper, concurrency.WithLease(lease.ID), concurrency.WithTTL(s.ttl), concurrency.WithContext(kctx))
	if err != nil {
		stop()
		s.revoke(lease.ID)
		s.setRenewal(Renewal{})
		return fmt.Errorf("keep a lease alive in etcd: %w", err)
	}
	s.mu.Lock()
	s.cur, s.stop = sess, stop
	s.mu.Unlock()
	s.changed.Notify()
	return nil
}

// keeper is the etcd client's Lease with the session's keep-alive.
type keeper struct {
	clientv3.Lease
	s *Session
}

// KeepAlive renews lease id every RenewEvery with a request of its own
// (KeepAliveOnce), so that the session knows when each renewal it got
// an answer to was sent (Renewal). The channel closes when the lease is
// gone — etcd says so, or no renewal was answered within the TTL of the
// last one's sending — or ctx ends.
func (k keeper) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ch := make(chan *clientv3.LeaseKeepAliveResponse, 1)
	go func() {
		defer close(ch)
		k.s.keepAlive(ctx, id, ch)
	}()
	return ch, nil
}

func (s *Session) keepAlive(ctx context.Context, id clientv3.LeaseID, ch chan<- *clientv3.LeaseKeepAliveResponse) {
	every := s.RenewEvery()
	next := s.o.Clock.Now().Add(every)
	for {
		if !clock.Sleep(ctx, s.o.Clock, next.Sub(s.o.Clock.Now())) {
			return
		}
		sent := s.o.Clock.Now()
		next = sent.Add(every)
		rctx, cancel := context.WithTimeout(ctx, min(every, s.o.RequestTimeout))
		resp, err := s.cli.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			s.setRenewal(Renewal{Lease: id, Sent: sent})
			select {
			case ch <- resp:
			default: // concurrency.Session only drains it
			}
			continue
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return
		}
		r := s.Renewal()
		if r.Lease != id {
			return
		}
		r.Failing = fmt.Errorf("renew lease %x in etcd: %w", id, err)
		s.setRenewal(r)
		if Since(s.o.Clock, r.Sent) >= s.TTL() {
			return // expired at etcd by now, whatever the network does
		}
	}
}

// setRenewal records r, telling RenewalChanged when its lease or
// failure changed.
func (s *Session) setRenewal(r Renewal) {
	s.mu.Lock()
	old := s.renewal
	if r.Lease != 0 && r.Lease == old.Lease && r.Sent.Before(old.Sent) {
		r.Sent = old.Sent
	}
	s.renewal = r
	s.mu.Unlock()
	if old.Lease != r.Lease || (old.Failing == nil) != (r.Failing == nil) {
		s.renewed.Notify()
	}
}

// Renewal returns the lease's life as last renewed.
func (s *Session) Renewal() Renewal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewal
}

// RenewalChanged returns a channel closed at the next change of the
// renewed lease or of its failing (not at every renewal).
func (s *Session) RenewalChanged() <-chan struct{} { return s.renewed.Changed() }

// Since is how long ago t was on clk, the longer of the monotonic and the
// wall clock's readings: a machine that slept (its monotonic clock
// stopped) counts the sleep, and a wall clock set back does not shorten
// it.
func Since(clk clock.Clock, t time.Time) time.Duration {
	now := clk.Now()
	return max(now.Sub(t), now.Round(0).Sub(t.Round(0)))
}

// Run keeps a lease until ctx ends, granting a new one whenever it is
// lost, then revokes it. It returns nil.
func (s *Session) Run(ctx context.Context) error {
	b := retry.New(s.o.RetryInterval, s.o.Clock)
	defer s.close()
	for {
		sess := s.Current()
		if sess == nil {
			if err := s.grant(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.o.Logger.Warn("no lease in etcd; granting one again", "err", err)
				if !b.Wait(ctx) {
					return nil
				}
				continue
			}
			b.Reset()
			s.o.Logger.Info("lease in etcd granted again", "lease", fmt.Sprintf("%x", s.Current().Lease()))
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
		}
		s.o.Logger.Warn("lease in etcd lost; granting a new one", "lease", fmt.Sprintf("%x", sess.Lease()))
		s.drop(sess)
	}
}

// drop forgets sess (lost) if it is the current session.
func (s *Session) drop(sess *concurrency.Session) {
	s.mu.Lock()
	if s.cur != sess {
		s.mu.Unlock()
		return
	}
	stop := s.stop
	s.cur, s.stop = nil, nil
	s.mu.Unlock()
	stop()
	s.setRenewal(Renewal{Sent: s.Renewal().Sent})
	s.changed.Notify()
}

// close revokes the current lease, so that its keys go at once.
func (s *Session) close() {
	s.mu.Lock()
	sess, stop := s.cur, s.stop
	s.cur, s.stop = nil, nil
	s.mu.Unlock()
	if sess == nil {
		return
	}
	stop()
	sess.Orphan()
	s.revoke(sess.Lease())
	s.setRenewal(Renewal{})
	s.changed.Notify()
}

// revoke revokes a lease; one etcd does not revoke expires on its own.
func (s *Session) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.RequestTimeout)
	defer cancel()
	_, _ = s.cli.Revoke(ctx, id)
}

// Current returns the session in force; nil while there is none.
func (s *Session) Current() *concurrency.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Changed returns a channel closed at the next change of the session in
// force (granted, lost, revoked).
func (s *Session) Changed() <-chan struct{} { return s.changed.Changed() }

// Wait returns the session in force, waiting for one at most the request
// timeout; the error wraps ErrNoSession when none came, or is ctx's.
func (s *Session) Wait(ctx context.Context) (*concurrency.Session, error) {
	var sess *concurrency.Session
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := s.o.Clock.AfterFunc(s.o.RequestTimeout, cancel)
	defer t.Stop()
	err := notify.Wait(wctx, &s.changed, func() bool { sess = s.Current(); return sess != nil })
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrNoSession
	}
	return sess, nil
}
