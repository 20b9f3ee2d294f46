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
