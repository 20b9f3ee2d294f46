package fleetmsg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/retry"
)

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// remote sends req to worker on node through etcd: one transaction writes
// the request for that node, the turn's location and, with Wait, this
// node's waiting key; the held call then waits for the turn's mail in the
// fleet mailbox.
func (r *Relay) remote(ctx context.Context, req messaging.SendRequest, node, worker string) (messaging.SendResult, error) {
	if err := r.checkContent(req.Content); err != nil {
		return messaging.SendResult{}, err
	}
	if err := checkSegment(node); err != nil {
		return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeInvalid, Msg: "node name: " + err.Error()}
	}
	if r.o.NodeLost != nil {
		if since, lost := r.o.NodeLost(node); lost {
			return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeWorkerGone, Msg: fmt.Sprintf(
				"%s runs on node %s, which is lost: not registered since %s (its lease expired); nothing was sent — it may come back, or its members move to another node after --reschedule-after",
				worker, node, since.UTC().Format(time.RFC3339))}
		}
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline = r.o.Clock.Now().Add(cmp.Or(req.Timeout, r.o.DefaultTimeout))
	}
	h := header{From: req.From, To: worker, Deadline: deadline, Origin: r.o.Node}
	var reqID string
	if req.TurnID != "" {
		h.Turn, h.Continue, reqID = req.TurnID, true, newID("r-")
		h.Request = reqID
	} else {
		h.Turn = newID("t-")
		reqID = h.Turn
	}
	value, err := encode(h, req.Content)
	if err != nil {
		return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeInvalid, Msg: "encode the request", Err: err}
	}
	// Everything up to the transaction is bounded by one request
	// timeout, however many requests it takes (lease, count, write).
	wctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	var session clientv3.LeaseID
	if req.Wait {
		if err := r.acquire(); err != nil {
			return messaging.SendResult{}, err
		}
		defer r.release()
		var err error
		if session, err = r.waitSession(wctx); err != nil {
			return messaging.SendResult{}, err
		}
		// This node's polls hide the turn's mail from now on, not from
		// when its watch of the waiting keys sees the key written below
		// (the mailbox's watch may see the turn's first mail before).
		r.hold(h.Turn)
		defer r.unhold(h.Turn)
	}
	if err := r.roomAt(wctx, node); err != nil {
		return messaging.SendResult{}, err
	}
	loc, err := jsonString(location{Node: node, Worker: worker, Caller: req.From, Deadline: deadline})
	if err != nil {
		return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeInvalid, Msg: "encode the turn's location", Err: err}
	}
	rk, tk, wk := r.keys.request(node, reqID), r.keys.turn(h.Turn), r.keys.waiting(h.Turn)
	resp, err := r.txnWithLease(wctx, deadline.Add(r.o.TurnGrace), func(ctx context.Context, lease clientv3.LeaseID) clientv3.Txn {
		conds := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)}
		ops := []clientv3.Op{clientv3.OpPut(rk, value), clientv3.OpPut(tk, loc, clientv3.WithLease(lease))}
		if req.Wait {
			conds = append(conds, clientv3.Compare(clientv3.CreateRevision(wk), "=", 0))
			ops = append(ops, clientv3.OpPut(wk, r.o.Node, clientv3.WithLease(session)))
		}
		return r.cli.Txn(ctx).If(conds...).Then(ops...)
	})
	if err != nil {
		return messaging.SendResult{}, unavailable(fmt.Sprintf("send to %s on node %s; if etcd took it before failing, it is delivered once", worker, node), err)
	}
	if !resp.Succeeded {
		return messaging.SendResult{}, &messaging.Error{Code: messaging.CodeTooManyWaiters, Msg: "a call is already waiting on turn " + h.Turn}
	}
	res := messaging.SendResult{Outcome: messaging.OutcomeDispatched, TurnID: h.Turn, Worker: worker}
	if !req.Wait {
		return res, nil
	}
	// Only mail written after the request answers it: a question the
	// primary polled and is answering now may still be in the mailbox.
	res, took, err := r.await(ctx, h.Turn, worker, deadline, wk, resp.Header.Revision)
	if !took {
		r.unwait(wk)
	}
	return res, err
}

// roomAt refuses, with mailbox_full, a request for a node that has
// Options.MaxRequests requests it has not taken. It counts them with a
// serializable read (answered by the etcd member at hand, without a raft
// round), and not again for a second while the last count and the
// requests this node wrote since stay under half the bound: the bound
// holds within the requests the fleet's nodes write in that second.
func (r *Relay) roomAt(ctx context.Context, node string) error {
	now := r.o.Clock.Now()
	r.mu.Lock()
	c, ok := r.counts[node]
	if ok && now.Sub(c.at) < time.Second && c.n < int64(r.o.MaxRequests)/2 {
		c.n++
		r.counts[node] = c
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	count, err := r.cli.Get(cctx, r.keys.requests(node), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	cancel()
	if err != nil {
		return unavailable("count the requests for node "+node+"; nothing was sent", err)
	}
	if count.Count >= int64(r.o.MaxRequests) {
		return &messaging.Error{Code: messaging.CodeMailboxFull,
			Msg: fmt.Sprintf("node %s has %d requests it has not taken yet (the limit); nothing was sent: is it running?", node, count.Count)}
	}
	r.mu.Lock()
	r.counts[node] = requestCount{n: count.Count + 1, at: now}
	r.mu.Unlock()
	return nil
}

// requestCount is the requests a node had not taken when last counted,
// plus those this node wrote for it since.
type requestCount struct {
	n  int64
	at time.Time
}

// hold counts a call of this node on turn; unhold ends it, and wakes the
// polls that may show the turn's mail now. They count: a second call on
// the turn, refused because the first holds it, must not end the first's
// hold when it returns.
func (r *Relay) hold(turn string) {
	r.mu.Lock()
	r.holding[turn]++
	r.mu.Unlock()
}

func (r *Relay) unhold(turn string) {
	r.mu.Lock()
	if r.holding[turn]--; r.holding[turn] <= 0 {
		delete(r.holding, turn)
	}
	r.mu.Unlock()
	r.changed.Notify()
}

// unwait deletes a waiting key once its call returned; a key etcd did not
// delete goes with the node's lease.
func (r *Relay) unwait(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.RequestTimeout)
	defer cancel()
	if _, err := r.cli.Delete(ctx, key); err != nil {
		r.o.Logger.Warn("fleet messaging: delete a waiting key; it goes with the node's lease", "key", key, "err", err)
	}
}

// await holds the call until the fleet mailbox has mail of turn that ends
// or pauses it (reply, question, turn_done, worker_gone, delivery_failed),
// which it takes (deleting the waiting key wk in the same transaction:
// took), or until deadline (timeout: the turn stays open, its mail shows in
// polls) or ctx's end. Its etcd requests end by the deadline plus
// deadlineSlack (see bounded), so the call does too.
func (r *Relay) await(ctx context.Context, turn, worker string, deadline time.Time, wk string, after int64) (res messaging.SendResult, took bool, err error) {
	fired := make(chan struct{})
	tm := r.o.Clock.AfterFunc(max(deadline.Sub(r.o.Clock.Now()), 0), func() { close(fired) })
	defer tm.Stop()
	// The call's takes name it in the mail's tombstone, so that a take
	// whose answer etcd lost is known to be this call's, or not.
	taker := newID("k-")
	// uncertain is mail whose take etcd failed without saying whether it
	// committed: if it did, the mail is out of the mailbox and only this
	// call can return it, so nothing else is taken until that is known.
	// A call that ends before it is known leaves it to Run (settle).
	var uncertain *fleetMail
	defer func() {
		if uncertain != nil && !took {
			r.leaveUnsettled(uncertain, taker)
		}
	}()
	timeout := messaging.SendResult{Outcome: messaging.OutcomeTimeout, TurnID: turn, Worker: worker}
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	for {
		select {
		case <-fired:
			return timeout, false, nil
		default:
		}
		if uncertain != nil {
			bctx, cancel := r.bounded(ctx, deadline)
			ours, known, rev := r.tookAlready(bctx, uncertain, taker)
			cancel()
			switch {
			case known && ours:
				r.waitMirrored(ctx, rev) // as below
				m := uncertain
				res, err := outcomeOf(m, turn, worker)
				return res, true, err
			case known:
				uncertain = nil
			}
		}
		ch := r.changed.Changed()
		r.mu.Lock()
		m := r.answerLocked(turn, after)
		r.mu.Unlock()
		if uncertain == nil && m != nil {
			bctx, cancel := r.bounded(ctx, deadline)
			took, rev, err := r.take(bctx, m.msg.ID, int64(m.msg.Seq), taker, clientv3.OpDelete(wk))
			cancel()
			if err == nil && took {
				// Once the call returns it no longer holds the turn: a poll
				// then must not show the mail it took, as after an Ack.
				r.waitMirrored(ctx, rev)
				res, err := outcomeOf(m, turn, worker)
				return res, true, err
			}
			if err == nil {
				continue // another call took it; look again
			}
			r.o.Logger.Warn("fleet messaging: take a message for a held call; retrying", "turn", turn, "err", err)
			uncertain = m
		}
		var again <-chan time.Time
		stop := func() {}
		if uncertain != nil {
			// Look again in a moment, whatever changes.
			t := r.o.Clock.NewTimer(b.Next())
			again, ch, stop = t.C(), nil, func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return messaging.SendResult{}, false, fmt.Errorf("wait released: %w", ctx.Err())
		case <-fired:
			stop()
			return timeout, false, nil
		case <-ch:
		case <-again:
		}
		stop()
	}
}

// deadlineSlack is how long past its deadline a held call may still wait
// for an etcd request it made before the deadline: a call ends within its
// deadline plus this (and a wait within its timeout plus this).
const deadlineSlack = time.Second

// bounded is ctx for an etcd step of a wait that ends at deadline: one
// request timeout, but no later than deadlineSlack past the deadline.
func (r *Relay) bounded(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, min(r.o.RequestTimeout, max(deadline.Sub(r.o.Clock.Now()), 0)+min(deadlineSlack, r.o.RequestTimeout)))
}

// tookAlready reports whether a take of m by taker committed when etcd did
// not say: the message's tombstone, keyed by its id, names the taker that
// took it. A message still in the mailbox was not taken; one taken by
// anyone else (an acknowledgement, another call) is not this call's to
// return. known is false when etcd did not answer; rev is the revision
// of this call's take.
func (r *Relay) tookAlready(ctx context.Context, m *fleetMail, taker string) (ours, known bool, rev int64) {
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	resp, err := r.cli.Txn(rctx).Then(clientv3.OpGet(r.keys.acked(m.msg.ID)), clientv3.OpGet(r.keys.mail(m.msg.ID), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return false, false, 0
	}
	tomb := resp.Responses[0].GetResponseRange().GetKvs()
	if len(tomb) == 1 && string(tomb[0].Value) == taker {
		return true, true, tomb[0].ModRevision
	}
	return false, true, 0
}

// unsettled is a take whose outcome etcd did not tell, left by a held call
// that ended before it knew.
type unsettled struct {
	m     *fleetMail
	taker string
}

// leaveUnsettled hands an uncertain take to Run (settle).
func (r *Relay) leaveUnsettled(m *fleetMail, taker string) {
	r.mu.Lock()
	r.unsettled = append(r.unsettled, unsettled{m: m, taker: taker})
	r.mu.Unlock()
	r.settling.Notify()
}

// settle resolves the takes held calls left uncertain when they ended,
// until ctx ends: a take that committed removed its mail, which nobody
// returned, so the mail is put back into the fleet mailbox (its tombstone,
// which names the take, removed in the same transaction), where polls show
// it; a take that did not commit needs nothing. Nothing is lost, nothing
// crosses twice.
func (r *Relay) settle(ctx context.Context) {
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	for {
		ch := r.settling.Changed()
		r.mu.Lock()
		todo := r.unsettled
		r.unsettled = nil
		r.mu.Unlock()
		var left []unsettled
		for _, u := range todo {
			if err := r.settleOne(ctx, u); err != nil {
				left = append(left, u)
			}
		}
		if len(left) > 0 {
			r.mu.Lock()
			r.unsettled = append(left, r.unsettled...)
			r.mu.Unlock()
			if !b.Wait(ctx) {
				return
			}
			continue
		}
		b.Reset()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// settleOne puts u's mail back if u's take committed; an error means etcd
// did not answer.
func (r *Relay) settleOne(ctx context.Context, u unsettled) error {
	ours, known, _ := r.tookAlready(ctx, u.m, u.taker)
	if !known {
		return errors.New("etcd did not answer")
	}
	if !ours {
		return nil
	}
	value, err := encode(header{From: u.m.msg.From, To: u.m.msg.To, Kind: u.m.msg.Kind, Turn: u.m.msg.TurnID, CreatedAt: u.m.msg.CreatedAt, Code: u.m.code}, u.m.msg.Content)
	if err != nil {
		return nil // it decoded from the same fields: cannot happen
	}
	key, tomb := r.keys.mail(u.m.msg.ID), r.keys.acked(u.m.msg.ID)
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	_, err = r.cli.Txn(rctx).If(clientv3.Compare(clientv3.Value(tomb), "=", u.taker), clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value), clientv3.OpDelete(tomb)).Commit()
	if err != nil {
		return err
	}
	r.o.Logger.Info("fleet messaging: a held call ended before it knew it took its answer; the answer is back in the mailbox", "message", u.m.msg.ID, "turn", u.m.msg.TurnID)
	return nil
}

// answerLocked returns the oldest fleet mail of turn written after
// revision after that ends or pauses a held call.
func (r *Relay) answerLocked(turn string, after int64) *fleetMail {
	var best *fleetMail
	for _, m := range r.mail {
		if m.msg.TurnID == turn && m.msg.Seq > uint64(after) && (ends(m.msg.Kind) || m.msg.Kind == messaging.KindQuestion) && (best == nil || m.msg.Seq < best.msg.Seq) {
			best = m
		}
	}
	return best
}

// outcomeOf is a held call's result for mail m.
func outcomeOf(m *fleetMail, turn, worker string) (messaging.SendResult, error) {
	res := messaging.SendResult{TurnID: turn, Worker: worker, Text: m.msg.Content}
	switch m.msg.Kind {
	case messaging.KindReply:
		res.Outcome = messaging.OutcomeReply
	case messaging.KindQuestion:
		res.Outcome = messaging.OutcomeQuestion
	case messaging.KindTurnDone:
		res.Outcome = messaging.OutcomeTurnDone
	case messaging.KindWorkerGone:
		return messaging.SendResult{}, &messaging.Error{Code: cmp.Or(m.code, messaging.CodeWorkerGone), Msg: m.msg.Content}
	default:
		return messaging.SendResult{}, &messaging.Error{Code: cmp.Or(m.code, messaging.CodeDeliveryFailed), Msg: m.msg.Content}
	}
	return res, nil
}

// takeRequests hands the requests etcd holds for this node (its
// requests' informer) to its core, oldest first, and deletes each once the
// core took it (or refused it, with a notice in the fleet mailbox). A
// request the core took and etcd still holds after a crash is handed
// again; the core knows its id and changes nothing.
func (r *Relay) takeRequests(ctx context.Context) {
	prefix := r.keys.requests(r.o.Node)
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	handled := map[string]int64{} // key → the revision handed, until the informer sees it go
	for {
		ch := r.requests.Changed()
		items := r.requests.Items()
		for k, rev := range handled {
			if it, ok := items[k]; !ok || it.ModRevision != rev {
				delete(handled, k)
			}
		}
		kvs := make([]*mvccpb.KeyValue, 0, len(items))
		for k, it := range items {
			if handled[k] != it.ModRevision {
				kvs = append(kvs, it.Value)
			}
		}
		slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
		failed := false
		for _, kv := range kvs {
			if err := r.handle(ctx, prefix, kv); err != nil {
				if ctx.Err() == nil {
					r.o.Logger.Warn("fleet messaging: hand a request to the core; retrying", "key", string(kv.Key), "err", err)
				}
				failed = true
				break
			}
			handled[string(kv.Key)] = kv.ModRevision
		}
		if failed {
			if !b.Wait(ctx) {
				return
			}
			continue
		}
		b.Reset()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// handle hands one request to the core and deletes it. An error means
// nothing was decided (the core or etcd unavailable): the request stays.
func (r *Relay) handle(ctx context.Context, prefix string, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	id := strings.TrimPrefix(key, prefix)
	h, content, err := decode(kv.Value, r.o.MaxContentBytes)
	if err == nil {
		err = checkSegment(id)
	}
	if err == nil && (checkSegment(h.Turn) != nil || (!h.Continue && h.Turn != id)) {
		err = fmt.Errorf("turn %q does not match the request %q", h.Turn, id)
	}
	if err == nil && h.From != r.o.PrimaryName {
		err = fmt.Errorf("from %q: only the primary sends across nodes", h.From)
	}
	if err != nil {
		r.o.Logger.Error("etcd holds a request that does not decode; deleted", "key", key, "err", err)
		return r.deleteRequest(ctx, kv, nil)
	}
	sr := messaging.SendRequest{From: h.From, Content: content, Deadline: h.Deadline}
	if h.Continue {
		sr.TurnID, sr.ID = h.Turn, id
	} else {
		sr.To, sr.ID = h.To, id
	}
	_, err = r.core.Send(ctx, sr)
	code := messaging.CodeOf(err)
	if err != nil && (code == messaging.CodeUnavailable || code == "") {
		return err
	}
	if err == nil {
		return r.deleteRequest(ctx, kv, nil)
	}
	// Refused: the primary learns why from the fleet mailbox, and a call
	// held on the turn ends with the core's code.
	kind := messaging.KindDeliveryFailed
	if code == messaging.CodeWorkerGone {
		kind = messaging.KindWorkerGone
	}
	text := fmt.Sprintf("node %s refused the message for %s: %s", r.o.Node, cmp.Or(h.To, "turn "+h.Turn), err.Error())
	notice, nerr := encode(header{From: cmp.Or(h.To, r.o.PrimaryName), To: r.o.PrimaryName, Kind: kind, Turn: h.Turn, CreatedAt: r.o.Clock.Now(), Node: r.o.Node, Code: code}, text)
	if nerr != nil {
		return nerr
	}
	nk := r.keys.mail(r.o.Node + "-refused-" + id)
	return r.deleteRequest(ctx, kv, []clientv3.Op{
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(nk), "=", 0)}, []clientv3.Op{clientv3.OpPut(nk, notice)}, nil),
		clientv3.OpDelete(r.keys.turn(h.Turn)),
	})
}

// deleteRequest deletes the request kv (if it still holds that version)
// with extra in the same transaction.
func (r *Relay) deleteRequest(ctx context.Context, kv *mvccpb.KeyValue, extra []clientv3.Op) error {
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	key := string(kv.Key)
	_, err := r.cli.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, extra...)...).Commit()
	if err != nil {
		return unavailable("delete request "+key, err)
	}
	return nil
}
