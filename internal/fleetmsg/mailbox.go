package fleetmsg

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/retry"
)

// fleetMail is one message of the fleet mailbox as mirrored.
type fleetMail struct {
	msg  messaging.Message // ID is the key's last segment, Seq its create revision
	code messaging.Code    // a refused request's error code
}

// mirrorMailbox makes r.mail what the mailbox's informer read of
// PREFIX/msg/mailbox/ (the informer's OnChange).
func (r *Relay) mirrorMailbox() {
	items := r.mailbox.Items()
	next := make(map[string]*fleetMail, len(items))
	var size int64
	for _, it := range items {
		if m := it.Value; m != nil {
			next[m.msg.ID] = m
			size += int64(len(m.msg.Content))
		}
	}
	r.mu.Lock()
	r.mail, r.bytes = next, size
	r.mu.Unlock()
}

// waitMirrored waits, at most Options.RequestTimeout, until the mirror of
// the fleet mailbox has seen revision rev: the forwarder's own writes
// count against the bound before it writes the next.
func (r *Relay) waitMirrored(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := r.o.Clock.AfterFunc(r.o.RequestTimeout, cancel)
	defer t.Stop()
	_ = r.mailbox.WaitRevision(wctx, rev)
}

// decodeMail decodes a fleet message; a nil one (logged) does not decode.
func (r *Relay) decodeMail(kv *mvccpb.KeyValue, _ *fleetMail, _ bool) (*fleetMail, bool) {
	id := strings.TrimPrefix(string(kv.Key), r.keys.mailbox())
	h, content, err := decode(kv.Value, r.o.MaxContentBytes)
	if err == nil {
		err = checkSegment(id)
	}
	if err != nil {
		r.o.Logger.Error("etcd holds a fleet message that does not decode; it is not shown", "key", string(kv.Key), "err", err)
		return nil, true
	}
	return &fleetMail{code: h.Code, msg: messaging.Message{ID: id, From: h.From, To: h.To, Kind: h.Kind, Content: content,
		TurnID: h.Turn, CreatedAt: h.CreatedAt, Seq: uint64(kv.CreateRevision)}}, true
}

// mirrorWaiting makes r.waited the turns of PREFIX/msg/waiting/ (the
// waiting keys' informer's OnChange).
func (r *Relay) mirrorWaiting() {
	items := r.waiting.Items()
	next := make(map[string]bool, len(items))
	for k := range items {
		next[strings.TrimPrefix(k, r.keys.waitingDir())] = true
	}
	r.mu.Lock()
	r.waited = next
	r.mu.Unlock()
}

// visibleLocked returns the fleet mail a poll shows, oldest first: all of
// it but the mail of turns a call is held on.
func (r *Relay) visibleLocked() []*fleetMail {
	out := make([]*fleetMail, 0, len(r.mail))
	for _, m := range r.mail {
		if r.shownLocked(m) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *fleetMail) int { return cmp.Compare(a.msg.Seq, b.msg.Seq) })
	return out
}

// shownLocked reports whether a poll shows m: not the mail of a turn a
// call is held on. This node's own calls are known at once; another
// node's once this node's watch saw its waiting key.
func (r *Relay) shownLocked(m *fleetMail) bool {
	t := m.msg.TurnID
	return t == "" || !r.waited[t] && r.holding[t] == 0
}

// Pending is the number of unacknowledged messages for recipient: the
// fleet mailbox's for the primary, the core's for a worker.
func (r *Relay) Pending(recipient string) int {
	if recipient != r.o.PrimaryName {
		return r.core.Pending(recipient)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.mail {
		if r.shownLocked(m) {
			n++
		}
	}
	return n
}

// PollPage returns a page of the fleet mailbox for the primary, as the
// core does for its own mailbox (the cursor is a create revision); a
// worker's mailbox is its core's.
func (r *Relay) PollPage(ctx context.Context, recipient string, req messaging.PollRequest) (messaging.PollPage, error) {
	if recipient != r.o.PrimaryName {
		return r.core.PollPage(ctx, recipient, req)
	}
	after, err := parseCursor(req.Cursor)
	if err != nil {
		return messaging.PollPage{}, err
	}
	limit := cmp.Or(req.Limit, messaging.DefaultPollLimit)
	if limit < 0 {
		return messaging.PollPage{}, &messaging.Error{Code: messaging.CodeInvalid, Msg: "a poll limit must not be negative"}
	}
	// A waiting poll's timeout counts from now, its first wait for the
	// mailbox's first list included.
	fired := make(chan struct{})
	if req.Wait {
		tm := r.o.Clock.AfterFunc(cmp.Or(req.Timeout, r.o.DefaultTimeout), func() { close(fired) })
		defer tm.Stop()
	}
	r.waitSynced(ctx, fired)
	ch := r.changed.Changed()
	r.mu.Lock()
	p := r.pageLocked(after, limit)
	r.mu.Unlock()
	if len(p.Messages) > 0 || !req.Wait {
		return p, nil
	}
	if err := r.acquire(); err != nil {
		return messaging.PollPage{}, err
	}
	defer r.release()
	for {
		select {
		case <-ctx.Done():
			return messaging.PollPage{}, ctx.Err()
		case <-fired:
			return p, nil
		case <-ch:
		}
		ch = r.changed.Changed()
		r.mu.Lock()
		p = r.pageLocked(after, limit)
		r.mu.Unlock()
		if len(p.Messages) > 0 {
			return p, nil
		}
	}
}

func (r *Relay) pageLocked(after uint64, limit int) messaging.PollPage {
	vis := r.visibleLocked()
	i, _ := slices.BinarySearchFunc(vis, after+1, func(m *fleetMail, seq uint64) int { return cmp.Compare(m.msg.Seq, seq) })
	p := messaging.PollPage{Messages: []messaging.Message{}, Next: formatCursor(after)}
	var size int64
	for ; i < len(vis) && len(p.Messages) < limit; i++ {
		size += int64(len(vis[i].msg.Content))
		if size > int64(r.o.MaxPollBytes) && len(p.Messages) > 0 {
			break
		}
		p.Messages = append(p.Messages, vis[i].msg)
		p.Next = formatCursor(vis[i].msg.Seq)
	}
	p.More = len(vis) - i
	return p
}

func formatCursor(rev uint64) string {
	if rev == 0 {
		return ""
	}
	return "c" + strconv.FormatUint(rev, 10)
}

func parseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	rev, err := strconv.ParseUint(strings.TrimPrefix(s, "c"), 10, 64)
	if err != nil || !strings.HasPrefix(s, "c") {
		return 0, &messaging.Error{Code: messaging.CodeInvalid, Msg: "cursor " + strconv.Quote(s) +
			" is not one a poll returned (pass its next value unchanged, or none to start from the oldest message)"}
	}
	return rev, nil
}

// Ack retires fleet messages (the primary's) or the core's (a worker's).
// A fleet message is deleted and leaves a tombstone for
// Options.TombstoneTTL, up to ackBatch of them in one transaction.
// Unknown or already acknowledged ids count zero.
func (r *Relay) Ack(recipient string, ids []string) (int, error) {
	if recipient != r.o.PrimaryName {
		return r.core.Ack(recipient, ids)
	}
	ctx := context.Background()
	seen := make(map[string]bool, len(ids))
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if checkSegment(id) == nil && !seen[id] { // etcd refuses a key twice in a transaction
			seen[id] = true
			valid = append(valid, id)
		}
	}
	n := 0
	var at int64
	defer func() {
		// A poll after the ack does not show the messages, whoever took them.
		r.waitMirrored(ctx, at)
	}()
	for chunk := range slices.Chunk(valid, ackBatch) {
		took, rev, err := r.takeAll(ctx, chunk)
		if err != nil {
			return n, err
		}
		n, at = n+took, rev
	}
	return n, nil
}

// ackBatch is how many fleet messages one transaction of an ack retires
// (etcd bounds a transaction's operations, 128 by default).
const ackBatch = 64

// takeAll takes (see take) every fleet message of ids in one transaction
// and returns how many were there.
func (r *Relay) takeAll(ctx context.Context, ids []string) (int, int64, error) {
	revs := make([]int64, len(ids))
	r.mu.Lock()
	for i, id := range ids {
		if m := r.mail[id]; m != nil {
			revs[i] = int64(m.msg.Seq)
		}
	}
	r.mu.Unlock()
	resp, err := r.txnWithLease(ctx, r.o.Clock.Now().Add(r.o.TombstoneTTL), func(ctx context.Context, lease clientv3.LeaseID) clientv3.Txn {
		ops := make([]clientv3.Op, len(ids))
		for i, id := range ids {
			cond, take := r.takeOps(id, revs[i], lease, ackTaker)
			ops[i] = clientv3.OpTxn([]clientv3.Cmp{cond}, take, nil)
		}
		return r.cli.Txn(ctx).Then(ops...)
	})
	if err != nil {
		return 0, 0, unavailable(fmt.Sprintf("acknowledge %d messages", len(ids)), err)
	}
	n := 0
	for _, op := range resp.Responses {
		if op.GetResponseTxn().GetSucceeded() {
			n++
		}
	}
	return n, resp.Header.Revision, nil
}

// ackTaker is the taker an acknowledgement writes into the tombstones of
// the messages it retires; a held call writes one of its own (newID).
const ackTaker = ""

// takeOps is the condition and the operations of a take of fleet message
// id (created at rev, when known; else whatever holds the key) by taker:
// delete it, leave its tombstone with lease, naming the taker — so that a
// take whose answer was lost asks the tombstone, keyed by the message id,
// whether it was the one that took it.
func (r *Relay) takeOps(id string, rev int64, lease clientv3.LeaseID, taker string) (clientv3.Cmp, []clientv3.Op) {
	key := r.keys.mail(id)
	cond := clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	if rev > 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
	}
	return cond, []clientv3.Op{clientv3.OpDelete(key), clientv3.OpPut(r.keys.acked(id), taker, clientv3.WithLease(lease))}
}

// take deletes fleet message id (created at rev, when known; else
// whatever holds the key) and leaves its tombstone naming taker, with
// extra, in one transaction; false when the message was not there (taken
// already).
func (r *Relay) take(ctx context.Context, id string, rev int64, taker string, extra ...clientv3.Op) (bool, int64, error) {
	resp, err := r.txnWithLease(ctx, r.o.Clock.Now().Add(r.o.TombstoneTTL), func(ctx context.Context, lease clientv3.LeaseID) clientv3.Txn {
		cond, ops := r.takeOps(id, rev, lease, taker)
		return r.cli.Txn(ctx).If(cond).Then(append(ops, extra...)...)
	})
	if err != nil {
		return false, 0, unavailable("acknowledge "+id, err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

// forwardBatch is how many of its core's messages for the primary the
// forwarder reads at once.
const forwardBatch = 64

// forward moves what this node's core holds for the primary into the
// fleet mailbox, then acknowledges it in the core: create-if-absent under
// a key named after this node and the core's message id, and not over a
// tombstone, so that a forward made again after a crash (forwarded, not
// yet acknowledged in the core) delivers nothing twice. While the fleet
// mailbox is full mail stays in the core (whose own bound then refuses
// more); mail a call waits for and the notices that end a turn go over
// the bound, as in the core.
func (r *Relay) forward(ctx context.Context) {
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	for ctx.Err() == nil {
		// Taken before the pass looks at the fleet mailbox: a change after
		// it (an ack making room) wakes the wait below.
		ch, local := r.changed.Changed(), r.core.Changed()
		held, idle := r.forwardPass(ctx)
		switch {
		case idle:
			// The core's wait timed out, or the core is closing: look
			// again in a moment rather than at once.
			b.Wait(ctx)
			continue
		case !held:
			b.Reset()
			continue
		}
		// Wait for room in the fleet mailbox, new mail in the core (which
		// may go over the bound), or etcd back.
		t := r.o.Clock.NewTimer(b.Next())
		select {
		case <-ctx.Done():
		case <-ch:
		case <-local:
		case <-t.C():
		}
		t.Stop()
	}
}

// forwardPass forwards what the core holds for the primary, waiting for
// some when it holds none, and acknowledges in the core what it forwarded.
// held reports mail left in the core (the fleet mailbox full, etcd
// failing): then it read every page, so that mail which goes over the
// bound is not stuck behind mail which does not. idle reports that the
// core had none (its wait timed out, or it is closing).
func (r *Relay) forwardPass(ctx context.Context) (held, idle bool) {
	cursor := ""
	for {
		page, err := r.core.PollPage(ctx, r.o.PrimaryName, messaging.PollRequest{Cursor: cursor, Limit: r.batch, Wait: cursor == "", Timeout: time.Hour})
		if ctx.Err() != nil {
			return false, false
		}
		if err != nil {
			r.o.Logger.Warn("fleet messaging: read the core's mail for the primary", "err", err)
			return true, false
		}
		if cursor == "" && len(page.Messages) == 0 {
			return false, true
		}
		var done []string
		failed := false
		for _, m := range page.Messages {
			ok, err := r.forwardOne(ctx, m)
			if err != nil {
				r.o.Logger.Warn("fleet messaging: forward to the fleet mailbox; retrying", "message", m.ID, "err", err)
				held, failed = true, true
				break
			}
			if !ok {
				held = true
				continue
			}
			done = append(done, m.ID)
		}
		if len(done) > 0 {
			if _, err := r.core.Ack(r.o.PrimaryName, done); err != nil {
				r.o.Logger.Warn("fleet messaging: acknowledge forwarded mail in the core", "err", err)
			}
		}
		if failed || !held || page.More == 0 {
			return held, false
		}
		cursor = page.Next
	}
}

// ends reports whether mail of kind ends its turn.
func ends(k messaging.Kind) bool {
	switch k {
	case messaging.KindReply, messaging.KindTurnDone, messaging.KindWorkerGone, messaging.KindDeliveryFailed:
		return true
	}
	return false
}

// notice reports whether mail of kind is one the core writes itself when
// a turn ends.
func notice(k messaging.Kind) bool {
	return k == messaging.KindTurnDone || k == messaging.KindWorkerGone || k == messaging.KindDeliveryFailed
}

// forwardOne puts m into the fleet mailbox unless it is there or was
// acknowledged; false, nil when the fleet mailbox has no room for it. With
// the message, the turn's location goes (m ends the turn) or is recorded
// if none is (a turn the worker opened with a question).
func (r *Relay) forwardOne(ctx context.Context, m messaging.Message) (bool, error) {
	id := r.o.Node + "-" + m.ID
	if checkSegment(id) != nil {
		r.o.Logger.Error("fleet messaging: a message id the relay cannot store; left in the core", "message", m.ID)
		return false, nil
	}
	r.mu.Lock()
	_, there := r.mail[id]
	full := len(r.mail) >= r.o.MaxMailboxMessages || r.bytes+int64(len(m.Content)) > r.o.MaxMailboxBytes
	waited := m.TurnID != "" && (r.waited[m.TurnID] || r.holding[m.TurnID] > 0)
	r.mu.Unlock()
	if there {
		return true, nil
	}
	if full && !waited && !notice(m.Kind) {
		return false, nil
	}
	value, err := encode(header{From: m.From, To: r.o.PrimaryName, Kind: m.Kind, Turn: m.TurnID, CreatedAt: m.CreatedAt, Node: r.o.Node}, m.Content)
	if err != nil {
		return false, err
	}
	key, tomb := r.keys.mail(id), r.keys.acked(id)
	now := r.o.Clock.Now()
	resp, err := r.txnWithLease(ctx, now.Add(r.o.TurnGrace), func(ctx context.Context, lease clientv3.LeaseID) clientv3.Txn {
		ops := []clientv3.Op{clientv3.OpPut(key, value)}
		if m.TurnID != "" && checkSegment(m.TurnID) == nil {
			tk := r.keys.turn(m.TurnID)
			if ends(m.Kind) {
				ops = append(ops, clientv3.OpDelete(tk))
			} else {
				loc, _ := jsonString(location{Node: r.o.Node, Worker: m.From, Caller: r.o.PrimaryName})
				ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(tk), "=", 0)},
					[]clientv3.Op{clientv3.OpPut(tk, loc, clientv3.WithLease(lease))}, nil))
			}
		}
		return r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.Compare(clientv3.CreateRevision(tomb), "=", 0)).Then(ops...)
	})
	if err != nil {
		return false, err
	}
	r.waitMirrored(ctx, resp.Header.Revision)
	return true, nil
}
