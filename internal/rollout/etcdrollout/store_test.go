package etcdrollout

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcdtest"
	"github.com/fleetd-dev/fleetd/internal/rollout"
)

var (
	cluster  *etcdtest.Cluster
	prefixes atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(etcdtest.Main(m, 1, func(c *etcdtest.Cluster) { cluster = c }, nil))
}

const waitLimit = 20 * time.Second

// node is a Store of one node on the package's etcd, running until the
// test ends.
func node(t *testing.T, prefix string) (*Store, *clientv3.Client) {
	t.Helper()
	return nodeWith(t, prefix, nil)
}

// nodeWith is node with its requests to etcd's keys going through
// kv(the client's), unless kv is nil.
func nodeWith(t *testing.T, prefix string, kv func(clientv3.KV) clientv3.KV) (*Store, *clientv3.Client) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if kv != nil {
		cli.KV = kv(cli.KV)
	}
	s := New(cli, &Options{Prefix: prefix, Logger: slog.New(slog.DiscardHandler), RetryInterval: 20 * time.Millisecond})
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, cli
}

// describe says what s holds and has still to write, for a failure's
// message.
func (s *Store) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := 0
	for _, fns := range s.pending {
		pending += len(fns)
	}
	var revs []string
	for k, h := range s.hist {
		for _, r := range h.Revisions {
			revs = append(revs, fmt.Sprintf("%s/%s#%d(gen %d)", k.kind, k.name, r.Number, r.Generation))
		}
	}
	return fmt.Sprintf("the node mirrors %v, has %d changes left to write, its watch: %v", revs, pending, s.inf.Stale())
}

// until returns once cond holds, checked at every change of s.
func until(t *testing.T, what string, s *Store, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		ch := s.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("not %s within %s; %s", what, waitLimit, s.describe())
		}
	}
}

func profile(uid string, gen int64, args ...string) *v1alpha1.Profile {
	p := &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "codex", UID: uid, Generation: gen}, Spec: v1alpha1.ProfileSpec{Harness: "codex", Args: args}}
	p.SetDefaults()
	return p
}

func recordOn(s *Store, p *v1alpha1.Profile, at time.Time) {
	s.Update(v1alpha1.KindProfile, p.Name, func(h *rollout.History) bool {
		changed, _ := h.Record(p, at)
		return changed
	})
}

// keys lists the keys under prefix.
func keys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// Two nodes record the same profile changes as they each see them: every
// revision is written once, with one number, a key each, and both read
// the same history; a halt written on one is read on the other; at most
// ten revisions are kept, the older keys deleted; a history emptied
// deletes every key of the object.
func TestStore_NodesShareOneHistory(t *testing.T) {
	prefix := fmt.Sprintf("/rollout-test-%d", prefixes.Add(1))
	a, cli := node(t, prefix)
	b, _ := node(t, prefix)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

	for i := range 3 {
		p := profile("u1", int64(i+1), "-n", fmt.Sprint(i))
		recordOn(a, p, t0)
		recordOn(b, p, t0) // the same change, seen on the other node
		until(t, fmt.Sprintf("revision %d on both", i+1), b, func() bool {
			ha, hb := a.Get(v1alpha1.KindProfile, "codex"), b.Get(v1alpha1.KindProfile, "codex")
			la, _ := ha.Latest()
			lb, _ := hb.Latest()
			return len(ha.Revisions) == i+1 && len(hb.Revisions) == i+1 && la.Number == int64(i+1) && lb.Number == int64(i+1)
		})
	}
	until(t, "the writes settled", a, func() bool { return len(keys(t, cli, prefix)) == 3 })

	halt := rollout.Halt{Target: "t", Member: "alpha", Message: "agent exited", Time: t0}
	a.Update(v1alpha1.KindProfile, "codex", func(h *rollout.History) bool { h.Halt = &halt; return true })
	until(t, "b reads the halt", b, func() bool { h := b.Get(v1alpha1.KindProfile, "codex"); return h.Halt != nil && *h.Halt == halt })

	for i := 3; i < 12; i++ {
		recordOn(b, profile("u1", int64(i+1), "-n", fmt.Sprint(i)), t0)
	}
	until(t, "ten kept", a, func() bool {
		h := a.Get(v1alpha1.KindProfile, "codex")
		return len(h.Revisions) == rollout.MaxRevisions && h.Revisions[0].Number == 3 && h.Revisions[9].Number == 12
	})
	until(t, "eleven keys", a, func() bool { return len(keys(t, cli, prefix)) == rollout.MaxRevisions+1 })

	a.Update(v1alpha1.KindProfile, "codex", func(h *rollout.History) bool { *h = rollout.History{}; return true })
	until(t, "every key deleted", b, func() bool { return b.Get(v1alpha1.KindProfile, "codex").IsZero() && len(keys(t, cli, prefix)) == 0 })
}

// Get shows a change at once, before etcd has it; a value that is not a
// revision is left out.
func TestStore_GetShowsItsOwnChangesAtOnce(t *testing.T) {
	prefix := fmt.Sprintf("/rollout-test-%d", prefixes.Add(1))
	a, cli := node(t, prefix)
	if _, err := cli.Put(context.Background(), prefix+"/revisions/profiles/codex/rev/0000000001", "not json"); err != nil {
		t.Fatal(err)
	}
	recordOn(a, profile("u1", 1, "-m", "a"), time.Now())
	if h := a.Get(v1alpha1.KindProfile, "codex"); len(h.Revisions) != 1 {
		t.Fatalf("Get right after Update: %+v", h)
	}
	until(t, "written", a, func() bool {
		resp, err := cli.Get(context.Background(), prefix+"/revisions/profiles/codex/rev/0000000001")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) != "not json"
	})
}

// lossyKV holds the next transaction once armed, until the test closes
// go_: committed (or not) as commit says, then answered with answer — an
// error for an answer that was lost — or etcd's answer if answer is nil.
type lossyKV struct {
	clientv3.KV
	armed  atomic.Bool
	commit bool
	answer error
	held   chan struct{} // a transaction is held
	go_    chan struct{} // the held transaction answers
}

func newLossyKV(kv clientv3.KV, commit bool, answer error) *lossyKV {
	return &lossyKV{KV: kv, commit: commit, answer: answer, held: make(chan struct{}), go_: make(chan struct{})}
}

func (l *lossyKV) Txn(ctx context.Context) clientv3.Txn {
	return &lossyTxn{Txn: l.KV.Txn(ctx), l: l}
}

type lossyTxn struct {
	clientv3.Txn
	l *lossyKV
}

func (t *lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	if !t.l.armed.CompareAndSwap(true, false) {
		return t.Txn.Commit()
	}
	var resp *clientv3.TxnResponse
	var err error
	if t.l.commit {
		resp, err = t.Txn.Commit()
	}
	close(t.l.held)
	<-t.l.go_
	if t.l.answer != nil {
		return nil, t.l.answer
	}
	return resp, err
}

// lossyNode is a node whose transactions go through a lossyKV.
func lossyNode(t *testing.T, prefix string, commit bool, answer error) (*Store, *lossyKV) {
	t.Helper()
	var l *lossyKV
	s, _ := nodeWith(t, prefix, func(kv clientv3.KV) clientv3.KV { l = newLossyKV(kv, commit, answer); return l })
	return s, l
}

// A node whose write committed but whose answer was lost (or came late)
// while another node cleared the history: the history stays cleared —
// the change is not applied again on what the other node left — and the
// node reads it cleared once its write is taken off.
func TestStore_ALostAnswerDoesNotBringAClearedHistoryBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer error
	}{
		{"answer lost", context.DeadlineExceeded},
		{"answer late", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := fmt.Sprintf("/rollout-test-%d", prefixes.Add(1))
			a, cli := node(t, prefix)
			b, lossy := lossyNode(t, prefix, true, tt.answer)
			lossy.armed.Store(true)
			recordOn(b, profile("u1", 1, "-n", "1"), time.Now())
			<-lossy.held // committed; its answer held
			until(t, "a reads b's revision", a, func() bool { return len(a.Get(v1alpha1.KindProfile, "codex").Revisions) == 1 })
			a.Update(v1alpha1.KindProfile, "codex", func(h *rollout.History) bool { *h = rollout.History{}; return true })
			until(t, "a's clear written", a, func() bool { return len(keys(t, cli, prefix)) == 0 })
			until(t, "b mirrors the clear", b, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.hist) == 0 })

			changed := b.Changed()
			close(lossy.go_)
			select {
			case <-changed:
			case <-time.After(waitLimit):
				t.Fatalf("b's Get did not change when its write was settled; %s", b.describe())
			}
			until(t, "every key deleted", b, func() bool {
				return b.Get(v1alpha1.KindProfile, "codex").IsZero() && len(keys(t, cli, prefix)) == 0
			})
		})
	}
}

// A write that did not commit and whose answer was lost is written again.
func TestStore_ALostWriteThatDidNotCommitIsWrittenAgain(t *testing.T) {
	prefix := fmt.Sprintf("/rollout-test-%d", prefixes.Add(1))
	b, lossy := lossyNode(t, prefix, false, context.DeadlineExceeded)
	_, cli := node(t, prefix+"-other")
	lossy.armed.Store(true)
	recordOn(b, profile("u1", 1, "-n", "1"), time.Now())
	<-lossy.held
	// etcd moves on past the write's read, with no change of the object.
	if _, err := cli.Put(context.Background(), prefix+"-other/x", "y"); err != nil {
		t.Fatal(err)
	}
	close(lossy.go_)
	until(t, "written", b, func() bool {
		resp, err := cli.Get(context.Background(), prefix+"/revisions/profiles/codex/rev/0000000001")
		b.mu.Lock()
		settled := len(b.pending) == 0
		b.mu.Unlock()
		return err == nil && len(resp.Kvs) == 1 && settled && len(b.Get(v1alpha1.KindProfile, "codex").Revisions) == 1
	})
}
