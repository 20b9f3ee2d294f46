package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/internal/etcdtest"
)

const waitLimit = 20 * time.Second

var keys atomic.Int64

func newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func quiet(o Options) *Options {
	o.Logger = slog.New(slog.DiscardHandler)
	return &o
}

// run runs s until the returned stop is called (or the test ends).
func run(t *testing.T, s *Session) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func exists(t *testing.T, cli *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := cli.Get(context.Background(), key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count == 1
}

// A key under the session's lease outlives the lease's TTL while Run keeps
// it alive, and goes at once when Run ends (the lease is revoked, not left
// to expire).
func TestSession_KeepsTheLeaseAliveAndRevokesItAtTheEnd(t *testing.T) {
	cli := newClient(t)
	s := New(cli, quiet(Options{TTL: 2 * time.Second}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("/session-test/%d", keys.Add(1))
	if _, err := cli.Put(context.Background(), key, "x", clientv3.WithLease(s.Current().Lease())); err != nil {
		t.Fatal(err)
	}
	stop := run(t, s)
	time.Sleep(4 * time.Second) // twice the TTL, in real time: etcd's clock
	if !exists(t, cli, key) {
		t.Fatal("the key went while the session kept its lease alive")
	}
	start := time.Now()
	stop()
	if exists(t, cli, key) {
		t.Error("the key outlived Run")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("stopping took %s", d)
	}
	if s.Current() != nil {
		t.Error("a session is current after Run ended")
	}
}

// A lease lost behind the session's back (revoked here; expired after a
// partition in life) is replaced by a new one, and Changed says so.
func TestSession_GrantsANewLeaseWhenItIsLost(t *testing.T) {
	cli := newClient(t)
	s := New(cli, quiet(Options{TTL: 5 * time.Second, RetryInterval: 50 * time.Millisecond}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, s)
	first := s.Current().Lease()
	changed := s.Changed()
	if _, err := cli.Revoke(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no new lease after the first was revoked")
		}
		changed = s.Changed()
		if cur := s.Current(); cur != nil && cur.Lease() != first {
			break
		}
	}
	sess, err := s.Wait(ctx)
	if err != nil || sess.Lease() == first {
		t.Fatalf("Wait = %v, %v; want the new lease", sess, err)
	}
}

// Without a lease (never granted here), Wait gives up after the request
// timeout with ErrNoSession; a cancelled caller gets its context's error.
func TestSession_WaitWithoutALease(t *testing.T) {
	s := New(newClient(t), quiet(Options{RequestTimeout: 100 * time.Millisecond}))
	if _, err := s.Wait(context.Background()); !errors.Is(err, ErrNoSession) {
		t.Errorf("Wait = %v; want ErrNoSession", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait, cancelled = %v; want context.Canceled", err)
	}
}

// Each renewal etcd answers is recorded with when it was sent; a black
// hole between the node and etcd makes the renewals fail at once (the
// lease's last renewal stays where it was), and once the TTL since that
// renewal has passed the session gives the lease up and, etcd back, takes
// a new one.
func TestSession_RecordsWhenItsRenewalsWereSentAndWhenTheyFail(t *testing.T) {
	p, err := etcdtest.StartProxy(cluster.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cut)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.URL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	const requestTimeout = time.Second
	s := New(cli, quiet(Options{TTL: 3 * time.Second, RequestTimeout: requestTimeout, RetryInterval: 100 * time.Millisecond}))
	before := time.Now()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, s)
	first := s.Renewal()
	if first.Lease != s.Current().Lease() || first.Sent.Before(before) || first.Failing != nil {
		t.Fatalf("Renewal after the grant = %+v; want lease %x, sent after %s, not failing", first, s.Current().Lease(), before)
	}
	until := func(what string, cond func(Renewal) bool) Renewal {
		t.Helper()
		deadline := time.Now().Add(waitLimit)
		for {
			ch := s.RenewalChanged()
			r := s.Renewal()
			if cond(r) {
				return r
			}
			select {
			case <-ch:
			case <-time.After(50 * time.Millisecond): // Sent moves without a signal
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within %s: %+v", what, waitLimit, r)
			}
		}
	}
	renewed := until("renewal", func(r Renewal) bool { return r.Sent.After(first.Sent) })
	if renewed.Lease != first.Lease || renewed.Sent.Sub(first.Sent) > 2*time.Second {
		t.Errorf("renewed = %+v after %+v; want the same lease renewed about every second", renewed, first)
	}

	cut := time.Now()
	p.BlackHole()
	failing := until("failing renewal", func(r Renewal) bool { return r.Failing != nil })
	if failing.Sent.After(cut) || failing.Lease != first.Lease {
		t.Errorf("failing renewal = %+v; want the last renewal before the black hole (%s) of the same lease", failing, cut)
	}
	// A renewal period (TTL/3) and the request's timeout, plus slack for
	// until's 50 ms poll and a loaded machine (a clean-clone CI run next
	// to another run of the suite saw 2.004 s).
	if took, bound := time.Since(cut), s.TTL()/3+requestTimeout+500*time.Millisecond; took > bound {
		t.Errorf("the failing renewal showed %s after the black hole; want within a renewal period and its timeout (%s)", took, bound)
	}
	until("lease given up", func(r Renewal) bool { return r.Lease == 0 })
	if since := time.Since(failing.Sent); since < s.TTL() {
		t.Errorf("the lease was given up %s after its last renewal; want not before its TTL %s", since, s.TTL())
	}
	p.Pass()
	next := until("new lease", func(r Renewal) bool { return r.Lease != 0 && r.Failing == nil })
	if next.Lease == first.Lease {
		t.Errorf("lease after the black hole = %x; want a new one", next.Lease)
	}
}
