package fleetmsg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// A request etcd still holds after its node's core took it (the node died
// between the two) is handed again after a restart: the core knows its id
// and types nothing twice; the request goes.
func TestRelay_RequestTakenTwiceTypesOnce(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	dirB := t.TempDir()
	a := f.start("a", t.TempDir())
	ctx := f.ctx()
	// b is down: the request waits in etcd.
	res, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "once", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if k := f.keys("requests/b/"); len(k) != 1 {
		t.Fatalf("requests for b: %v", k)
	}
	// b's core took it, and b died before etcd was told.
	h := &herdr{prompts: make(chan string, 8)}
	core, err := messaging.New(dirB, h, &messaging.Options{PrimaryName: primary})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.cli.Get(ctx, f.prefix+"/msg/requests/b/"+res.TurnID)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	hd, content, err := decode(resp.Kvs[0].Value, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Send(ctx, messaging.SendRequest{From: hd.From, To: hd.To, Content: content, ID: res.TurnID, Deadline: hd.Deadline}); err != nil {
		t.Fatal(err)
	}
	core.ObserveStatus("w", messaging.StatusIdle, 1)
	<-h.prompts
	core.Close()

	b := f.start("b", dirB)
	b.core.ObserveStatus("w", messaging.StatusIdle, 3)
	// The request goes; wait for it with a watch, not a sleep.
	waitGone(t, ctx, f.cli, f.prefix+"/msg/requests/b/"+res.TurnID)
	if s := b.core.Status("w"); s.QueueDepth != 0 || len(s.OpenTurns) != 1 || !s.OpenTurns[0].Deadline.Equal(hd.Deadline) {
		t.Errorf("b after the replay: queue %d, turns %+v; want the one turn with the request's deadline, nothing queued", s.QueueDepth, s.OpenTurns)
	}
	select {
	case p := <-b.herdr.prompts:
		t.Errorf("typed again after the restart: %q", p)
	default:
	}
}

// waitGone returns once key is absent from etcd.
func waitGone(t *testing.T, ctx context.Context, cli *clientv3.Client, key string) {
	t.Helper()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	t.Fatalf("%s still in etcd", key)
}

// A forward made again (forwarded, not yet acknowledged in the core, then
// a crash) delivers nothing twice, before and after the primary
// acknowledged the first copy.
func TestRelay_ForwardMadeAgainDeliversOnce(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a := f.start("a", t.TempDir())
	ctx := f.ctx()
	m := messaging.Message{ID: "m-1", From: "w", To: primary, Kind: messaging.KindReply, Content: "hi", CreatedAt: time.Now()}
	for range 2 {
		if ok, err := a.relay.forwardOne(ctx, m); !ok || err != nil {
			t.Fatalf("forwardOne = %v, %v", ok, err)
		}
	}
	p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Minute})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].ID != "a-m-1" {
		t.Fatalf("poll = %+v, %v; want the one copy a-m-1", p, err)
	}
	if n, err := a.relay.Ack(primary, []string{"a-m-1"}); n != 1 || err != nil {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	if ok, err := a.relay.forwardOne(ctx, m); !ok || err != nil {
		t.Fatalf("forwardOne after the ack = %v, %v", ok, err)
	}
	if k := f.keys("mailbox/"); len(k) != 0 {
		t.Errorf("the acknowledged message is back: %v", k)
	}
}

// A request for a member its node does not run is refused there with a
// notice: a held call ends with the core's code, and nothing waits in
// etcd.
func TestRelay_RefusedRequestEndsTheCall(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	f.members["w"] = "b" // a still routes w to b ...
	b.relay.o.Locate = func(string) (string, bool) { return "b", true }
	delete(f.members, "w") // ... which no longer runs it (its core refuses)
	a.relay.o.Locate = func(string) (string, bool) { return "b", true }
	_, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "x", Wait: true, Timeout: time.Minute})
	if messaging.CodeOf(err) != messaging.CodeNotFound {
		t.Fatalf("held Send for a member b does not run: %v, want not_found", err)
	}
	for _, dir := range []string{"requests/", "turns/", "mailbox/"} {
		if k := f.keys(dir); len(k) != 0 {
			t.Errorf("%s left in etcd: %v", dir, k)
		}
	}
	// Detached, the notice waits in the fleet mailbox.
	if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "y"}); err != nil {
		t.Fatal(err)
	}
	p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Minute})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Kind != messaging.KindDeliveryFailed {
		t.Fatalf("poll = %+v, %v; want the refusal notice", p, err)
	}
}

// A held call times out (the turn stays open); its mail, hidden from
// polls while the call waited, shows afterwards, and so does the reply
// that comes later. A cancelled call is released and leaves no waiting
// key.
func TestRelay_TimeoutLeavesTheTurnOpen(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	fake := clock.NewFake(time.Now())
	f.opts.Clock = fake
	a := f.start("a", t.TempDir())
	f.opts.Clock = nil
	b := f.start("b", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "slow", Wait: true, Timeout: time.Minute})
	b.prompted(t, ctx)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "step 1", false); err != nil {
		t.Fatal(err)
	}
	// The progress note reaches the fleet mailbox but not the polls.
	waitMailbox(t, ctx, f, 1)
	if p, _ := a.relay.PollPage(ctx, primary, messaging.PollRequest{}); len(p.Messages) != 0 {
		t.Errorf("poll while a call waits on the turn = %+v, want nothing", p)
	}
	if err := fake.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fake.Step(time.Minute)
	res, err := wait(t, ctx, held)
	if err != nil || res.Outcome != messaging.OutcomeTimeout || res.Worker != "w" {
		t.Fatalf("held Send at its deadline = %+v, %v; want timeout", res, err)
	}
	waitGone(t, ctx, f.cli, f.prefix+"/msg/waiting/"+res.TurnID)
	p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Hour})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Content != "step 1" {
		t.Fatalf("poll after the timeout = %+v, %v; want the progress note", p, err)
	}
	if s := b.core.Status("w"); len(s.OpenTurns) != 1 || s.OpenTurns[0].ID != res.TurnID {
		t.Errorf("turns on b after the timeout: %+v, want %s open", s.OpenTurns, res.TurnID)
	}
	if _, err := b.relay.Reply(ctx, "w", "finally", true); err != nil {
		t.Fatal(err)
	}
	p, err = a.relay.PollPage(ctx, primary, messaging.PollRequest{Cursor: p.Next, Wait: true, Timeout: time.Hour})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Content != "finally" || p.Messages[0].Kind != messaging.KindReply {
		t.Fatalf("poll after the late reply = %+v, %v", p, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	released := sendAsync(cctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "other", Wait: true, Timeout: time.Hour})
	if err := fake.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := wait(t, ctx, released); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	for _, k := range f.keys("waiting/") {
		waitGone(t, ctx, f.cli, f.prefix+"/msg/"+k)
	}
}

func waitMailbox(t *testing.T, ctx context.Context, f *fleet, n int) {
	t.Helper()
	resp, err := f.cli.Get(ctx, f.prefix+"/msg/mailbox/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count >= int64(n) {
		return
	}
	for wr := range f.cli.Watch(ctx, f.prefix+"/msg/mailbox/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		_ = wr
		resp, err := f.cli.Get(ctx, f.prefix+"/msg/mailbox/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count >= int64(n) {
			return
		}
	}
	t.Fatalf("the fleet mailbox never held %d messages", n)
}

// etcd unreachable: a Send for another node fails fast with unavailable
// and writes nothing; one for this node's member goes to its core.
func TestRelay_EtcdDownFailsFast(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	core, err := messaging.New(t.TempDir(), &herdr{prompts: make(chan string, 8)}, &messaging.Options{PrimaryName: primary})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	sess := session.New(cli, &session.Options{RequestTimeout: 200 * time.Millisecond})
	r, err := New(core, &Options{Client: cli, Session: sess, Node: "a", PrimaryName: primary, RequestTimeout: 200 * time.Millisecond,
		Locate: func(m string) (string, bool) { return map[string]string{"far": "b", "near": "a"}[m], true }})
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range []bool{false, true} {
		start := time.Now()
		if _, err := r.Send(context.Background(), messaging.SendRequest{From: primary, To: "far", Content: "x", Wait: wait}); messaging.CodeOf(err) != messaging.CodeUnavailable {
			t.Errorf("Send (wait %v) with etcd down: %v, want unavailable", wait, err)
		}
		// One request timeout, whatever it tried (lease, count, write);
		// the margin is for a loaded machine.
		if d := time.Since(start); d > time.Second {
			t.Errorf("the failed send (wait %v) took %s, over its 200 ms request timeout", wait, d)
		}
	}
	if res, err := r.Send(context.Background(), messaging.SendRequest{From: primary, To: "near", Content: "x"}); err != nil || res.Outcome != messaging.OutcomeDispatched {
		t.Errorf("Send to this node's member with etcd down = %+v, %v", res, err)
	}
	if _, err := r.Send(context.Background(), messaging.SendRequest{From: primary, To: "far", Content: string(make([]byte, 300<<10))}); messaging.CodeOf(err) != messaging.CodeTooLarge {
		t.Errorf("oversized content: %v, want too_large before any etcd request", err)
	}
}

// The fleet mailbox is bounded: over it mail stays in the worker node's
// core (nothing lost) and moves once the primary acknowledged some; a
// notice that ends a turn goes over the bound.
func TestRelay_FullFleetMailboxKeepsMailInTheCore(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, &Options{MaxMailboxMessages: 1})
	f.hook = func(r *Relay) { r.batch = 1 } // the notice is on a page after the note that waits
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "go", Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.prompted(t, ctx)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	for _, text := range []string{"one", "two"} {
		if _, err := b.relay.Reply(ctx, "w", text, false); err != nil {
			t.Fatal(err)
		}
	}
	p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Hour})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Content != "one" {
		t.Fatalf("poll = %+v, %v; want the first note only", p, err)
	}
	// b's core keeps the second note: wait until it acknowledged the
	// first one it forwarded.
	for {
		ch := b.core.Changed()
		if b.core.Pending(primary) == 1 {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("b's core holds %d messages for the primary, want the second note", b.core.Pending(primary))
		}
	}
	b.core.WorkerGone("w", "deleted")
	// The notice goes over the bound while the note waits.
	gone, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Cursor: p.Next, Wait: true, Timeout: time.Hour})
	if err != nil || len(gone.Messages) != 1 || gone.Messages[0].Kind != messaging.KindWorkerGone {
		t.Fatalf("poll after the worker went = %+v, %v; want its notice", gone, err)
	}
	if _, err := a.relay.Ack(primary, []string{p.Messages[0].ID, gone.Messages[0].ID}); err != nil {
		t.Fatal(err)
	}
	got := []string{"worker_gone: " + gone.Messages[0].Content}
	cursor := ""
	for len(got) < 2 {
		p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Cursor: cursor, Wait: true, Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			got = append(got, string(m.Kind)+": "+m.Content)
		}
		cursor = p.Next
	}
	slices.Sort(got)
	if got[0] != "progress: two" || !strings.HasPrefix(got[1], "worker_gone: ") {
		t.Errorf("after the ack: %q, want the second note and the worker_gone notice (over the bound)", got)
	}
}

// Requests for a node that does not take them are bounded: over
// Options.MaxRequests a Send is refused with mailbox_full and writes
// nothing; they wait in etcd, and the node takes them when it starts.
func TestRelay_RequestsForADownNodeAreBounded(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, &Options{MaxRequests: 2})
	a := f.start("a", t.TempDir())
	ctx := f.ctx()
	for i := range 2 {
		if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "task"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "one too many"}); messaging.CodeOf(err) != messaging.CodeMailboxFull {
		t.Fatalf("third send for a node that takes nothing: %v, want mailbox_full", err)
	}
	if k := f.keys("requests/b/"); len(k) != 2 {
		t.Errorf("requests for b: %v, want the two taken", k)
	}
	b := f.start("b", t.TempDir())
	for _, k := range f.keys("requests/b/") {
		waitGone(t, ctx, f.cli, f.prefix+"/msg/"+k)
	}
	if s := b.core.Status("w"); s.QueueDepth != 2 {
		t.Errorf("b queued %d prompts, want 2", s.QueueDepth)
	}
}

// A request written while the node's watch was being set up, with etcd
// compacted past the listed revision, is not missed: the watch fails with
// ErrCompacted and the node lists again.
func TestRelay_CompactionBetweenListAndWatchMissesNothing(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a := f.start("a", t.TempDir())
	ctx := f.ctx()
	var once sync.Once
	f.hook = func(r *Relay) {
		r.listed = func(prefix string, rev int64) {
			if !strings.HasSuffix(prefix, "/requests/b/") {
				return
			}
			once.Do(func() {
				if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "between"}); err != nil {
					t.Error(err)
				}
				resp, err := f.cli.Put(ctx, f.prefix+"/unrelated", "x")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := f.cli.Compact(ctx, resp.Header.Revision); err != nil {
					t.Error(err)
				}
			})
		}
	}
	b := f.start("b", t.TempDir())
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	if got := b.prompted(t, ctx); got != "w: between" {
		t.Fatalf("b typed %q", got)
	}
}

// The node holding a call stops: its waiting key goes with its lease, and
// the turn's reply, which nobody waits for any more, shows in a poll on
// another node.
func TestRelay_OriginStopsWhileHoldingACall(t *testing.T) {
	f, a, b, c, ctx := threeNodes(t)
	hctx, cancel := context.WithCancel(ctx)
	held := sendAsync(hctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "task", Wait: true, Timeout: time.Hour})
	b.prompted(t, ctx)
	waiting := f.keys("waiting/")
	if len(waiting) != 1 {
		t.Fatalf("waiting keys %v, want a's", waiting)
	}
	// a stops: its lease, revoked, takes the waiting key (the call itself
	// ends with the daemon's handlers).
	a.stop()
	waitGone(t, ctx, f.cli, f.prefix+"/msg/"+waiting[0])
	cancel()
	wait(t, ctx, held)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "nobody waits", true); err != nil {
		t.Fatal(err)
	}
	p, err := c.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Hour})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Content != "nobody waits" {
		t.Fatalf("poll on c = %+v, %v; want the reply", p, err)
	}
}

// lostAnswerClient is a client of the package's etcd whose first
// transaction that deletes a waiting key (a held call taking its answer)
// commits, but answers with an error: etcd took it, the caller cannot
// know.
func lostAnswerClient(t *testing.T) *clientv3.Client {
	t.Helper()
	var once sync.Once
	lose := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		txn, ok := req.(*etcdserverpb.TxnRequest)
		if !ok || err != nil {
			return err
		}
		for _, op := range txn.Success {
			if d := op.GetRequestDeleteRange(); d != nil && strings.Contains(string(d.Key), "/msg/waiting/") {
				lost := false
				once.Do(func() { lost = true })
				if lost {
					return status.Error(codes.Unknown, "injected: committed, answer lost")
				}
			}
		}
		return nil
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{lose}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// A held call's take of its answer that etcd committed but whose answer
// was lost (etcd failed after the commit) still returns the answer: the
// answer is out of the mailbox, so a held call that did not return it
// would lose it.
func TestRelay_TakeCommittedButUnansweredReturnsTheAnswer(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, &Options{RetryInterval: 10 * time.Millisecond})
	faulty := lostAnswerClient(t)
	f.hook = func(r *Relay) {
		if r.o.Node == "a" {
			r.cli = faulty
		}
	}
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "do X", Wait: true, Timeout: 5 * time.Second})
	if got := b.prompted(t, ctx); got != "w: do X" {
		t.Fatalf("b typed %q", got)
	}
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "X done", true); err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, ctx, held)
	if err != nil || res.Outcome != messaging.OutcomeReply || res.Text != "X done" {
		t.Fatalf("held Send = %+v, %v; want the reply its take removed from the mailbox", res, err)
	}
	if k := f.keys("mailbox/"); len(k) != 0 {
		t.Errorf("mailbox %v, want the reply taken once", k)
	}
}

// countingClient is a client of the package's etcd that counts its
// transactions.
func countingClient(t *testing.T, txns *atomic.Int64) *clientv3.Client {
	t.Helper()
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*etcdserverpb.TxnRequest); ok {
			txns.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{count}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// An ack of many fleet messages (some unknown, some named twice) retires
// each once in one etcd transaction, not one per id: an ack's cost does
// not grow with the ids it names.
func TestRelay_AckIsOneTransaction(t *testing.T) {
	var txns atomic.Int64
	counting := countingClient(t, &txns)
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	f.hook = func(r *Relay) {
		if r.o.Node == "a" {
			r.cli = counting
		}
	}
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	for i := range 5 {
		if _, err := b.relay.forwardOne(ctx, messaging.Message{ID: fmt.Sprintf("m-%d", i), From: "w", Kind: messaging.KindReply, Content: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	for ch := a.relay.Changed(); a.relay.Pending(primary) < 5; ch = a.relay.Changed() {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("a never mirrored the 5 messages")
		}
	}
	page, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{})
	if err != nil || len(page.Messages) != 5 {
		t.Fatalf("poll = %d messages, %v; want 5", len(page.Messages), err)
	}
	ids := []string{"nobody", "bad/id"}
	for _, m := range page.Messages {
		ids = append(ids, m.ID, m.ID)
	}
	before := txns.Load()
	n, err := a.relay.Ack(primary, ids)
	if err != nil || n != 5 {
		t.Fatalf("Ack = %d, %v; want 5", n, err)
	}
	if got := txns.Load() - before; got != 1 {
		t.Errorf("the ack of %d ids took %d etcd transactions, want 1", len(ids), got)
	}
	if k := f.keys("mailbox/"); len(k) != 0 {
		t.Errorf("mailbox %v after the ack", k)
	}
	if k := f.keys("acked/"); len(k) != 5 {
		t.Errorf("tombstones %v, want 5", k)
	}
	if n := a.relay.Pending(primary); n != 0 {
		t.Errorf("pending %d right after the ack", n)
	}
}

// takeClient is a client of the package's etcd whose transactions that
// delete a waiting key (a held call taking its answer) go through take
// instead, which decides what etcd sees and what the caller hears.
func takeClient(t *testing.T, take func(ctx context.Context, commit func() error) error) *clientv3.Client {
	t.Helper()
	intercept := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*etcdserverpb.TxnRequest); ok {
			for _, op := range txn.Success {
				if d := op.GetRequestDeleteRange(); d != nil && strings.Contains(string(d.Key), "/msg/waiting/") {
					return take(ctx, func() error { return invoker(ctx, method, req, reply, cc, opts...) })
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{intercept}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// A held call's take that etcd did not commit, with no answer, while
// another node's poll and ack took the same reply (the call's node lost
// its lease, so the reply showed in polls): the reply crossed once, to
// the poll, and the call does not return it too. (Before takes named
// their taker in the tombstone, "the message and the waiting key both
// gone" read as "this call took it", and the reply came back twice.)
func TestRelay_AnAnswerTakenElsewhereIsNotReturnedTwice(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, &Options{RetryInterval: 10 * time.Millisecond})
	var c *node
	var polled []messaging.Message
	var once sync.Once
	faulty := takeClient(t, func(ctx context.Context, commit func() error) error {
		failed := false
		once.Do(func() {
			failed = true
			// The call's node loses its lease: its waiting key goes, and
			// the reply shows on c, whose primary polls and acks it.
			for _, k := range f.keys("waiting/") {
				if _, err := f.cli.Delete(ctx, f.prefix+"/msg/"+k); err != nil {
					t.Error(err)
				}
			}
			p, err := c.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: 10 * time.Second})
			if err != nil || len(p.Messages) != 1 {
				t.Errorf("poll on c = %+v, %v; want the reply", p, err)
				return
			}
			polled = p.Messages
			if n, err := c.relay.Ack(primary, []string{p.Messages[0].ID}); n != 1 || err != nil {
				t.Errorf("ack on c = %d, %v", n, err)
			}
		})
		if failed {
			return status.Error(codes.Unavailable, "injected: not committed, no answer")
		}
		return commit()
	})
	f.hook = func(r *Relay) {
		if r.o.Node == "a" {
			r.cli = faulty
		}
	}
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	c = f.start("c", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "do X", Wait: true, Timeout: 3 * time.Second})
	b.prompted(t, ctx)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "X done", true); err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, ctx, held)
	if len(polled) != 1 || polled[0].Content != "X done" {
		t.Fatalf("c's poll saw %+v; want the reply", polled)
	}
	if err == nil && res.Outcome == messaging.OutcomeReply {
		t.Errorf("the held call returned the reply c's primary had already polled and acked: %+v", res)
	}
	if err != nil || res.Outcome != messaging.OutcomeTimeout {
		t.Errorf("held call = %+v, %v; want timeout (its answer went to the poll)", res, err)
	}
}

// Every wait ends within its own deadline plus a small constant: a waiting
// poll of a fleet mailbox not listed yet (etcd unreachable at start), and a
// held call whose take of its answer etcd commits but does not answer
// before the deadline. The answer that take removed is put back into the
// mailbox, where a poll finds it: nothing lost, nothing twice. (Before, the
// poll spent a request timeout on the first list before its own timeout
// began, and the call waited up to two request timeouts past its
// deadline.)
func TestRelay_WaitsEndWithinTheirDeadline(t *testing.T) {
	const timeout, limit = time.Second, time.Second + deadlineSlack + 300*time.Millisecond
	t.Run("poll before the first list", func(t *testing.T) {
		dead, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dead.Close() })
		core, err := messaging.New(t.TempDir(), &herdr{prompts: make(chan string, 1)}, &messaging.Options{PrimaryName: primary})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { core.Close() })
		r, err := New(core, &Options{Client: dead, Session: session.New(dead, nil), Prefix: "/relay-dead", Node: "a", PrimaryName: primary,
			Locate: func(string) (string, bool) { return "", false }, RequestTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		start := time.Now()
		p, err := r.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: timeout})
		if took := time.Since(start); took > limit {
			t.Errorf("a waiting poll of %s took %s while etcd did not answer; want within %s", timeout, took, limit)
		}
		if err != nil || len(p.Messages) != 0 {
			t.Errorf("poll = %+v, %v; want an empty page", p, err)
		}
	})
	t.Run("held call whose take is late", func(t *testing.T) {
		f := newFleet(t, map[string]string{"w": "b"}, &Options{RequestTimeout: 4 * time.Second, RetryInterval: 50 * time.Millisecond})
		var once sync.Once
		faulty := takeClient(t, func(ctx context.Context, commit func() error) error {
			late := false
			once.Do(func() { late = true })
			if !late {
				return commit()
			}
			if err := commit(); err != nil {
				return err
			}
			<-ctx.Done() // committed; the answer never comes
			return ctx.Err()
		})
		f.hook = func(r *Relay) {
			if r.o.Node == "a" {
				r.cli = faulty
			}
		}
		a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
		ctx := f.ctx()
		b.core.ObserveStatus("w", messaging.StatusIdle, 1)
		start := time.Now()
		held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "do X", Wait: true, Timeout: timeout})
		b.prompted(t, ctx)
		b.core.ObserveStatus("w", messaging.StatusWorking, 2)
		if _, err := b.relay.Reply(ctx, "w", "X done", true); err != nil {
			t.Fatal(err)
		}
		res, err := wait(t, ctx, held)
		if took := time.Since(start); took > limit {
			t.Errorf("the held call returned %s after it began; want within its timeout %s plus %s", took, timeout, deadlineSlack)
		}
		if err != nil || res.Outcome != messaging.OutcomeTimeout {
			t.Fatalf("held call = %+v, %v; want timeout", res, err)
		}
		p, err := b.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: 10 * time.Second})
		if err != nil || len(p.Messages) != 1 || p.Messages[0].Content != "X done" {
			t.Errorf("poll after the call's timeout = %+v, %v; want the reply its late take removed, put back", p, err)
		}
	})
}

// A send to a member of a lost node (its registration gone) fails at once
// with worker_gone naming the node, and writes nothing to etcd. (It waited
// in etcd before, and a held call until its timeout.)
func TestRelay_SendToALostNodeFailsFast(t *testing.T) {
	since := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	f := newFleet(t, map[string]string{"w": "b"}, &Options{NodeLost: func(node string) (time.Time, bool) { return since, node == "b" }})
	a := f.start("a", t.TempDir())
	ctx := f.ctx()
	start := time.Now()
	_, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "hello", Wait: true, Timeout: time.Minute})
	if messaging.CodeOf(err) != messaging.CodeWorkerGone || !strings.Contains(err.Error(), "node b, which is lost") || !strings.Contains(err.Error(), "2026-12-01T20:00:00Z") {
		t.Errorf("held Send to a member of lost node b = %v; want worker_gone naming b and since when", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the send took %s to fail", took)
	}
	for _, dir := range []string{"requests/", "turns/", "waiting/"} {
		if k := f.keys(dir); len(k) != 0 {
			t.Errorf("%s after a send to a lost node: %v", dir, k)
		}
	}
}

// A node's holds on a turn count: a second call on a turn, refused because
// the first holds it, ends only its own hold when it returns; the turn's
// mail stays hidden from polls until the first call ends too.
func TestRelay_HoldsOnATurnCount(t *testing.T) {
	r := &Relay{waited: map[string]bool{}, holding: map[string]int{}}
	mail := &fleetMail{msg: messaging.Message{ID: "m", TurnID: "t-1", Kind: messaging.KindProgress}}
	r.hold("t-1")
	r.hold("t-1") // the second call, refused
	r.unhold("t-1")
	if r.shownLocked(mail) {
		t.Fatal("the turn's mail shows while the first call still holds it")
	}
	r.unhold("t-1")
	if !r.shownLocked(mail) || len(r.holding) != 0 {
		t.Errorf("after both calls: shown %v, holds %v; want shown, none left", r.shownLocked(mail), r.holding)
	}
}
