package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	o   Options
	ttl int // seconds

	mu      sync.Mutex
	cur     *concurrency.Session
	stop    context.CancelFunc // ends cur's keep-alive
	changed notify.Signal
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
	return &Session{cli: cli, o: o, ttl: int(max((o.TTL+time.Second-1)/time.Second, 1))}
}

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
	lease, err := s.cli.Grant(rctx, int64(s.ttl))
	cancel()
	if err != nil {
		return fmt.Errorf("grant a lease in etcd: %w", err)
	}
	// The keep-alive runs on a context of the session's own, ended by
	// Run's end or the lease's loss, never by a request's.
	kctx, stop := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(s.ttl), concurrency.WithContext(kctx))
	if err != nil {
		stop()
		s.revoke(lease.ID)
		return fmt.Errorf("keep a lease alive in etcd: %w", err)
	}
	s.mu.Lock()
	s.cur, s.stop = sess, stop
	s.mu.Unlock()
	s.changed.Notify()
	return nil
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
