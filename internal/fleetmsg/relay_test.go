package fleetmsg

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// The tests run relays over real messaging cores (a fake herdr that
// records what is typed) on the package's etcd. Nothing sleeps: a test
// waits for a prompt on its herdr's channel, for a held call's result, or
// with a waiting poll.

const primary = "@primary"

var prefixes atomic.Int64

// herdr is the cores' Prompter: it records every prompt and reports it.
type herdr struct {
	mu      sync.Mutex
	typed   []string
	prompts chan string
}

func (h *herdr) Prompt(_ context.Context, target, text string) error {
	h.mu.Lock()
	h.typed = append(h.typed, target+": "+text)
	h.mu.Unlock()
	h.prompts <- target + ": " + text
	return nil
}

func (h *herdr) ReadTail(context.Context, string, int) (string, error) { return "tail", nil }

func (h *herdr) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.typed...)
}

// node is one fleetd node as the relay sees it: a core, its herdr, its
// relay, running until the test ends (or stop).
type node struct {
	name  string
	core  *messaging.Core
	herdr *herdr
	relay *Relay
	stop  func()
}

// fleet is a few nodes on one prefix; members maps each member to its
// node.
type fleet struct {
	t       *testing.T
	prefix  string
	cli     *clientv3.Client
	members map[string]string
	nodes   map[string]*node
	opts    Options // applied to every relay
	// hook, if set, sees each relay before it runs.
	hook func(*Relay)
}

func newFleet(t *testing.T, members map[string]string, opts *Options) *fleet {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f := &fleet{t: t, prefix: fmt.Sprintf("/relay-test-%d", prefixes.Add(1)), cli: cli, members: members, nodes: map[string]*node{}}
	if opts != nil {
		f.opts = *opts
	}
	return f
}

// start runs node name on dir (a restart when dir was used before).
func (f *fleet) start(name, dir string) *node {
	f.t.Helper()
	h := &herdr{prompts: make(chan string, 64)}
	core, err := messaging.New(dir, h, &messaging.Options{PrimaryName: primary, PickupGrace: time.Hour, Admit: func(w string) error {
		if f.members[w] != name {
			return &messaging.Error{Code: messaging.CodeNotFound, Msg: "no member " + w + " on node " + name}
		}
		return nil
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	// The node's lease, which its waiting keys go with: revoked when the
	// node stops.
	sess := session.New(f.cli, &session.Options{Logger: slog.New(slog.DiscardHandler)})
	o := f.opts
	o.Client, o.Session, o.Prefix, o.Node, o.PrimaryName = f.cli, sess, f.prefix, name, primary
	o.Locate = func(m string) (string, bool) { n, ok := f.members[m]; return n, ok }
	r, err := New(core, &o)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.hook != nil {
		f.hook(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	sessDone := make(chan struct{})
	go func() { sess.Run(ctx); close(sessDone) }()
	var once sync.Once
	n := &node{name: name, core: core, herdr: h, relay: r}
	n.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			<-sessDone
			core.Close()
		})
	}
	f.t.Cleanup(n.stop)
	f.nodes[name] = n
	return n
}

func (f *fleet) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	f.t.Cleanup(cancel)
	return ctx
}

// threeNodes is the fleet most relay tests run: member w bound to node b
// and idle there, with nodes a and c to send from and answer on.
func threeNodes(t *testing.T) (f *fleet, a, b, c *node, ctx context.Context) {
	t.Helper()
	f = newFleet(t, map[string]string{"w": "b"}, nil)
	a, b, c = f.start("a", t.TempDir()), f.start("b", t.TempDir()), f.start("c", t.TempDir())
	ctx = f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	return f, a, b, c, ctx
}

// prompted waits for n's herdr to type a prompt.
func (n *node) prompted(t *testing.T, ctx context.Context) string {
	t.Helper()
	select {
	case p := <-n.herdr.prompts:
		return p
	case <-ctx.Done():
		t.Fatalf("node %s typed nothing", n.name)
		return ""
	}
}

// keys lists the keys under the fleet's PREFIX/msg/DIR.
func (f *fleet) keys(dir string) []string {
	f.t.Helper()
	resp, err := f.cli.Get(context.Background(), f.prefix+"/msg/"+dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), f.prefix+"/msg/"))
	}
	return out
}

type sent struct {
	res messaging.SendResult
	err error
}

func sendAsync(ctx context.Context, r *Relay, req messaging.SendRequest) <-chan sent {
	ch := make(chan sent, 1)
	go func() {
		res, err := r.Send(ctx, req)
		ch <- sent{res, err}
	}()
	return ch
}

func wait(t *testing.T, ctx context.Context, ch <-chan sent) (messaging.SendResult, error) {
	t.Helper()
	select {
	case s := <-ch:
		return s.res, s.err
	case <-ctx.Done():
		t.Fatal("the call did not return")
		panic("unreachable")
	}
}

// A held Send on a for a worker on b: b types the prompt, the worker's
// reply on b resolves the call on a, and nothing is left in etcd but the
// reply's tombstone.
func TestRelay_HeldSendAcrossNodes(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "do X", Wait: true, Timeout: time.Minute})
	if got := b.prompted(t, ctx); got != "w: do X" {
		t.Fatalf("b typed %q", got)
	}
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "X done", true); err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, ctx, held)
	if err != nil || res.Outcome != messaging.OutcomeReply || res.Text != "X done" || res.Worker != "w" {
		t.Fatalf("held Send = %+v, %v; want the reply", res, err)
	}
	for _, dir := range []string{"requests/", "turns/", "waiting/", "mailbox/"} {
		if k := f.keys(dir); len(k) != 0 {
			t.Errorf("%s left in etcd: %v", dir, k)
		}
	}
	if k := f.keys("acked/"); len(k) != 1 {
		t.Errorf("tombstones %v, want the reply's", k)
	}
	if n := a.relay.Pending(primary); n != 0 {
		t.Errorf("pending %d after the held call took its reply", n)
	}
}

// A worker on b asks; the held call on a returns the question; the answer
// sent from c reaches the pending Ask through b's rendezvous (not the
// pane), and the reply resolves c's held call.
func TestRelay_QuestionAnsweredFromAThirdNode(t *testing.T) {
	_, a, b, c, ctx := threeNodes(t)
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, To: "w", Content: "fix it", Wait: true, Timeout: time.Minute})
	b.prompted(t, ctx)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	asked := make(chan messaging.AskResult, 1)
	go func() {
		res, err := b.relay.Ask(ctx, "w", "which file?", time.Minute)
		if err != nil {
			t.Errorf("Ask: %v", err)
		}
		asked <- res
	}()
	q, err := wait(t, ctx, held)
	if err != nil || q.Outcome != messaging.OutcomeQuestion || q.Text != "which file?" {
		t.Fatalf("held Send = %+v, %v; want the question", q, err)
	}
	answer := sendAsync(ctx, c.relay, messaging.SendRequest{From: primary, TurnID: q.TurnID, Content: "main.go", Wait: true, Timeout: time.Minute})
	select {
	case a := <-asked:
		if a.Outcome != messaging.OutcomeAnswer || a.Answer != "main.go" || a.TurnID != q.TurnID {
			t.Fatalf("Ask = %+v, want the answer", a)
		}
	case <-ctx.Done():
		t.Fatal("the answer never reached the Ask")
	}
	if _, err := b.relay.Reply(ctx, "w", "fixed main.go", true); err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, ctx, answer)
	if err != nil || res.Outcome != messaging.OutcomeReply || res.Text != "fixed main.go" || res.TurnID != q.TurnID {
		t.Fatalf("the answer's Send = %+v, %v; want the reply", res, err)
	}
	if diff := cmp.Diff([]string{"w: fix it"}, b.herdr.all()); diff != "" {
		t.Errorf("typed on b (-want +got):\n%s", diff)
	}
}

// A detached Send: the reply lands in the fleet mailbox, which a poll on
// any node shows (cursor, page bounds) and an ack on any node retires for
// all; a poll waiting for mail wakes when it arrives.
func TestRelay_DetachedReplyPolledAndAcked(t *testing.T) {
	f, a, b, c, ctx := threeNodes(t)
	res, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "later"})
	if err != nil || res.Outcome != messaging.OutcomeDispatched || res.TurnID == "" {
		t.Fatalf("detached Send = %+v, %v", res, err)
	}
	b.prompted(t, ctx)
	polled := make(chan messaging.PollPage, 1)
	go func() {
		p, err := c.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Minute})
		if err != nil {
			t.Errorf("PollPage: %v", err)
		}
		polled <- p
	}()
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	if _, err := b.relay.Reply(ctx, "w", "progress", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.relay.Reply(ctx, "w", "the answer", true); err != nil {
		t.Fatal(err)
	}
	var first messaging.PollPage
	select {
	case first = <-polled:
	case <-ctx.Done():
		t.Fatal("the waiting poll never woke")
	}
	if len(first.Messages) == 0 || first.Messages[0].Content != "progress" || first.Messages[0].TurnID != res.TurnID {
		t.Fatalf("waiting poll on c = %+v, want the progress note first", first)
	}
	// Both, in order, a page at a time.
	var all []messaging.Message
	cursor := ""
	for {
		p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Cursor: cursor, Limit: 1, Wait: true, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Messages...)
		cursor = p.Next
		if len(all) == 2 {
			if p.More != 0 {
				t.Errorf("more %d after the last page", p.More)
			}
			break
		}
	}
	if all[0].Kind != messaging.KindProgress || all[1].Kind != messaging.KindReply || all[1].Content != "the answer" || all[1].From != "w" {
		t.Fatalf("pages = %+v", all)
	}
	if n := a.relay.Pending(primary); n != 2 {
		t.Errorf("pending on a = %d, want 2", n)
	}
	if n, err := c.relay.Ack(primary, []string{all[0].ID, all[1].ID, "b-unknown", "bad/id"}); n != 2 || err != nil {
		t.Fatalf("Ack = %d, %v; want 2", n, err)
	}
	if n, _ := a.relay.Ack(primary, []string{all[0].ID}); n != 0 {
		t.Errorf("Ack again = %d, want 0", n)
	}
	if k := f.keys("turns/"); len(k) != 0 {
		t.Errorf("the turn's location outlived its reply: %v", k)
	}
	if p, _ := a.relay.PollPage(ctx, primary, messaging.PollRequest{}); len(p.Messages) != 0 {
		t.Errorf("poll after the ack = %+v", p)
	}
	if _, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Cursor: "x1"}); messaging.CodeOf(err) != messaging.CodeInvalid {
		t.Errorf("a foreign cursor: %v, want invalid_argument", err)
	}
}

// Changed wakes a watcher (the console) at a change of the fleet mailbox
// as well as of the local core.
func TestRelay_ChangedWakesOnFleetMail(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	a.relay.waitSynced(ctx, nil)
	ch := a.relay.Changed()
	if _, err := b.relay.forwardOne(ctx, messaging.Message{ID: "m-9", From: "w", Kind: messaging.KindReply, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("Changed did not wake for fleet mail forwarded on another node")
	}
	ch = a.relay.Changed()
	a.core.ObserveStatus("x", messaging.StatusIdle, 1)
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal("Changed did not wake for a change of the local core")
	}
}

// A watcher that asks for Changed again after every wake (the console
// does, woken by member changes too) costs nothing while the messaging
// stays quiet: no goroutine per call waits for a change.
func TestRelay_ChangedCostsNoGoroutinePerCall(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a := f.start("a", t.TempDir())
	a.relay.waitSynced(f.ctx(), nil)
	before := runtime.NumGoroutine()
	for range 1000 {
		a.relay.Changed()
	}
	if n := runtime.NumGoroutine() - before; n > 50 {
		t.Errorf("1000 calls of Changed left %d more goroutines waiting", n)
	}
}

// A question polled from the fleet mailbox (nobody held a call) is
// answered with a held Send from another node: the call waits for the
// reply and does not return the old question again.
func TestRelay_AnswerToAPolledQuestion(t *testing.T) {
	f := newFleet(t, map[string]string{"w": "b"}, nil)
	a, b := f.start("a", t.TempDir()), f.start("b", t.TempDir())
	ctx := f.ctx()
	b.core.ObserveStatus("w", messaging.StatusIdle, 1)
	if _, err := a.relay.Send(ctx, messaging.SendRequest{From: primary, To: "w", Content: "task"}); err != nil {
		t.Fatal(err)
	}
	b.prompted(t, ctx)
	b.core.ObserveStatus("w", messaging.StatusWorking, 2)
	asked := make(chan messaging.AskResult, 1)
	go func() {
		res, _ := b.relay.Ask(ctx, "w", "which?", time.Minute)
		asked <- res
	}()
	p, err := a.relay.PollPage(ctx, primary, messaging.PollRequest{Wait: true, Timeout: time.Minute})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Kind != messaging.KindQuestion {
		t.Fatalf("poll = %+v, %v; want the question", p, err)
	}
	held := sendAsync(ctx, a.relay, messaging.SendRequest{From: primary, TurnID: p.Messages[0].TurnID, Content: "this one", Wait: true, Timeout: time.Minute})
	select {
	case res := <-asked:
		if res.Answer != "this one" {
			t.Fatalf("Ask = %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("the answer never arrived")
	}
	if _, err := b.relay.Reply(ctx, "w", "done", true); err != nil {
		t.Fatal(err)
	}
	res, err := wait(t, ctx, held)
	if err != nil || res.Outcome != messaging.OutcomeReply || res.Text != "done" {
		t.Fatalf("held answer = %+v, %v; want the reply, not the old question", res, err)
	}
}

// Status reports this node's workers from its core and another node's
// from Options.RemoteStatus, or as unknown without it: never this node's
// empty view of a worker it does not run.
func TestRelay_StatusOfAnotherNodesWorker(t *testing.T) {
	f := newFleet(t, map[string]string{"near": "a", "far": "b"}, nil)
	a := f.start("a", t.TempDir())
	a.core.ObserveStatus("near", messaging.StatusIdle, 7)
	if s := a.relay.Status("near"); s.AgentStatus != messaging.StatusIdle || s.StateChangeSeq != 7 {
		t.Errorf("Status(near) = %+v, want the core's", s)
	}
	if s := a.relay.Status("far"); s.AgentStatus != messaging.StatusUnknown || s.Worker != "far" {
		t.Errorf("Status(far) without RemoteStatus = %+v, want unknown", s)
	}
	a.relay.o.RemoteStatus = func(member, node string) (messaging.WorkerStatus, bool) {
		return messaging.WorkerStatus{Worker: member, AgentStatus: "working", GoneReason: "on " + node}, true
	}
	if s := a.relay.Status("far"); s.AgentStatus != "working" || s.GoneReason != "on b" {
		t.Errorf("Status(far) = %+v, want RemoteStatus's answer", s)
	}
}
