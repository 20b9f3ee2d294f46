package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// SchedulerOptions configure RunScheduler. nil means defaults.
type SchedulerOptions struct {
	// Prefix is the fleet's key prefix; default DefaultPrefix.
	Prefix string
	// Candidate names this scheduler in the election (the node's name).
	Candidate string
	// TTL is the election session's lease: a scheduler that dies is
	// replaced this long after; default DefaultNodeTTL.
	TTL time.Duration
	// RequestTimeout bounds each transaction of bindings; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RescheduleAfter is how long a member stays bound to a lost node (its
	// lease expired) before it is bound to another; default
	// DefaultRescheduleAfter. Members whose spec.nodeName names the lost
	// node wait for it.
	RescheduleAfter time.Duration
	// Clock drives the retry after a lost session and the reschedule
	// grace (against the store's clock, which dates a node's loss);
	// default the wall clock.
	Clock clock.Clock
	// Logger receives a line per election won or lost and per member
	// bound; default slog.Default().
	Logger *slog.Logger
}

// DefaultRescheduleAfter is SchedulerOptions.RescheduleAfter's default,
// Kubernetes' pod eviction timeout.
const DefaultRescheduleAfter = 5 * time.Minute

// RunScheduler takes part in the fleet's scheduler election (an etcd
// election at PREFIX/scheduler, under a session lease) until ctx ends; one
// fleetd at a time is the scheduler. While it leads it binds every
// unbound Member of st's Fleet (or one whose binding names an older uid)
// to the node [Place] picks, each binding fenced so that it holds only if
// the member's key is still at the revision it placed, its binding is
// still as it read it, and its leadership key is still there: a scheduler
// that lost the election, or placed a member that changed meanwhile,
// writes nothing (for that member). Many bindings go in one transaction;
// a batch that fails its fences is split until the stale ones are alone. Bindings of deleted members are removed the same way. Members
// no node can take stay unbound (Place says why). A member bound to a
// lost node (Fleet.Lost) is bound again, the same way and also only if
// its binding is still at the revision the scheduler read, once the node
// has been lost for RescheduleAfter — unless its spec.nodeName pins it
// there. It returns nil on cancellation.
func RunScheduler(ctx context.Context, cli *clientv3.Client, st *Store, opts *SchedulerOptions) error {
	var o SchedulerOptions
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TTL <= 0 {
		o.TTL = DefaultNodeTTL
	}
	if o.RescheduleAfter <= 0 {
		o.RescheduleAfter = DefaultRescheduleAfter
	}
	defaultShared(&o.RequestTimeout, &o.Clock, &o.Logger)
	for ctx.Err() == nil {
		err := lead(ctx, cli, st, &o)
		if ctx.Err() != nil {
			return nil
		}
		o.Logger.Warn("scheduler election lost or failed; campaigning again", "candidate", o.Candidate, "err", err)
		t := o.Clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
	return nil
}

// lead campaigns, then schedules on every change of the fleet until the
// session ends or ctx does.
func lead(ctx context.Context, cli *clientv3.Client, st *Store, o *SchedulerOptions) error {
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(max((o.TTL+time.Second-1)/time.Second, 1))), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("scheduler session: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), o.RequestTimeout)
		defer cancel()
		_, _ = cli.Revoke(rctx, sess.Lease()) // resign at once; an unrevoked lease expires on its own
		sess.Close()
	}()
	e := concurrency.NewElection(sess, o.Prefix+"/scheduler")
	// Campaign, cancelled, resigns on the client's own context, which
	// blocks while etcd is unreachable: a node stopped while cut off from
	// etcd would never stop. So it runs aside; cancelled, lead returns at
	// once and the campaign ends when etcd answers or the client closes.
	campaigned := make(chan error, 1)
	go func() { campaigned <- e.Campaign(ctx, o.Candidate) }()
	select {
	case err := <-campaigned:
		if err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
	case <-ctx.Done():
		return nil
	}
	o.Logger.Info("scheduling the fleet", "candidate", o.Candidate)
	s := &scheduler{cli: cli, st: st, o: o, leaderKey: e.Key(), leaderRev: e.Rev()}
	for {
		changed := st.FleetChanged()
		wake, err := s.pass(ctx)
		if err != nil && ctx.Err() == nil {
			o.Logger.Warn("scheduling pass failed; trying again at the next change", "err", err)
		}
		var timer <-chan time.Time
		stop := func() {}
		if wake > 0 {
			t := o.Clock.NewTimer(wake)
			timer, stop = t.C(), func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-sess.Done():
			stop()
			return fmt.Errorf("session lease lost")
		case <-changed:
		case <-timer:
		}
		stop()
	}
}

type scheduler struct {
	cli       *clientv3.Client
	st        *Store
	o         *SchedulerOptions
	leaderKey string
	leaderRev int64
	// wrote is the etcd revision of this scheduler's last committed
	// bindings: a pass places from a fleet that has seen it, or not at all.
	wrote int64
}

// pass binds what is unbound, rebinds what waited its grace on a lost
// node, and unbinds what is gone, once. wake, if positive, is when the
// next member's grace ends. Its writes go in batches (see commit): one
// transaction binds many members, so a fleet of hundreds is bound in a
// few round trips to etcd rather than one per member.
func (s *scheduler) pass(ctx context.Context) (wake time.Duration, _ error) {
	// Capacity and spread are counted from the fleet's bindings, which no
	// fence covers: a fleet read before this scheduler's own last bindings
	// came back through the watch would count their nodes short (and bind
	// a member created meanwhile to a node already full).
	if s.wrote > 0 {
		rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
		err := s.st.waitRev(rctx, s.wrote)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("scheduling pass: %w", err)
		}
	}
	f := s.st.Fleet()
	counts := f.Counts()
	now := s.o.Clock.Now()
	present := map[string]bool{}
	var binds []bindingWrite
	for _, m := range f.Members {
		present[m.Name] = true
		old, bound := f.Bindings[m.Name]
		if bound {
			since, lost := f.Lost[old.Node]
			if !lost || m.Spec.NodeName == old.Node {
				continue
			}
			if left := since.Add(s.o.RescheduleAfter).Sub(now); left > 0 {
				if wake == 0 || left < wake {
					wake = left
				}
				continue
			}
		}
		node, _ := Place(m, f.Nodes, counts)
		if node == "" {
			continue
		}
		rev, err := strconv.ParseInt(m.ResourceVersion, 10, 64)
		if err != nil {
			continue // not read from etcd: nothing to fence on
		}
		// Counted as placed at once, so that the members after it in this
		// pass spread around it; one whose write fails is placed again at
		// the next pass, from the fleet as it is then.
		counts[node]++
		if bound {
			counts[old.Node]--
		}
		memberKey, _ := s.st.Key("Member", m.Name)
		value, _ := json.Marshal(Binding{Node: node, MemberUID: m.UID})
		name := m.Name
		binds = append(binds, s.planWrite(s.st.bindingKey(name),
			clientv3.Compare(clientv3.ModRevision(memberKey), "=", rev),
			clientv3.OpPut(s.st.bindingKey(name), string(value)),
			func() {
				if bound {
					s.o.Logger.Info("member rescheduled from a lost node", "member", name, "lost", old.Node, "node", node)
				} else {
					s.o.Logger.Info("member bound", "member", name, "node", node)
				}
			}))
	}
	firstErr := s.commit(ctx, binds)
	// Bindings whose member is gone. (One whose member was made again, with
	// a new uid, is overwritten above.)
	s.st.mu.Lock()
	var stale []string
	for name := range s.st.binds {
		if !present[name] {
			stale = append(stale, name)
		}
	}
	s.st.mu.Unlock()
	var unbinds []bindingWrite
	for _, name := range stale {
		memberKey, _ := s.st.Key("Member", name)
		unbinds = append(unbinds, s.planWrite(s.st.bindingKey(name),
			clientv3.Compare(clientv3.CreateRevision(memberKey), "=", 0),
			clientv3.OpDelete(s.st.bindingKey(name)), nil))
	}
	unbindErr := s.commit(ctx, unbinds)
	// Statuses nobody will delete: of a member that is gone, published by
	// a node that is not registered (killed, and not back: a node deletes
	// its own when it runs).
	registered := map[string]bool{}
	for _, n := range f.Nodes {
		registered[n.Name] = true
	}
	s.st.mu.Lock()
	orphans := map[string]int64{}
	for name, r := range s.st.statuses {
		if !present[name] && !registered[r.Node] {
			orphans[name] = r.modRev
		}
	}
	s.st.mu.Unlock()
	for name, rev := range orphans {
		memberKey, _ := s.st.Key("Member", name)
		key := s.st.statusKey(name)
		rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
		_, err := s.cli.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev), clientv3.Compare(clientv3.CreateRevision(memberKey), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.leaderRev)).Then(clientv3.OpDelete(key)).Commit()
		cancel()
		if err != nil {
			firstErr = cmpOr(firstErr, fmt.Errorf("delete %s: %w: %w", key, ErrUnavailable, err))
		}
	}
	return wake, cmpOr(firstErr, unbindErr)
}

// bindingWrite is one write of a pass: op on a binding key, if its own
// fence (on the member's key) holds and the binding key is as this store
// last saw it; done, if set, runs once it is committed.
type bindingWrite struct {
	cmps []clientv3.Cmp
	op   clientv3.Op
	done func()
}

// planWrite is the write of op on a binding key fenced on fence and on the
// binding key's mod revision as this store last saw it.
func (s *scheduler) planWrite(key string, fence clientv3.Cmp, op clientv3.Op, done func()) bindingWrite {
	var seen int64
	if e := s.bindingSeen(key); e != nil {
		seen = e.modRev
	}
	return bindingWrite{cmps: []clientv3.Cmp{fence, clientv3.Compare(clientv3.ModRevision(key), "=", seen)}, op: op, done: done}
}

// maxTxnOps is etcd's default bound on the comparisons (and on the
// operations) of one transaction (--max-txn-ops).
const maxTxnOps = 128

// bindBatch is how many binding writes go in one transaction: each has two
// comparisons, and the transaction one more for the leadership.
const bindBatch = (maxTxnOps - 1) / 2

// commit writes ws in transactions of up to bindBatch writes, each fenced
// as a whole on this scheduler's leadership and on every write's own
// comparisons. A batch whose comparisons fail while the scheduler still
// leads is split in halves and each tried again, down to single writes,
// so that one member changed meanwhile holds back only itself (its write
// is dropped; the next pass places it from the fleet as it is then). A
// scheduler found no longer leading writes nothing more. It returns the
// first error of etcd, having tried every batch.
func (s *scheduler) commit(ctx context.Context, ws []bindingWrite) error {
	var firstErr error
	for len(ws) > 0 {
		n := min(len(ws), bindBatch)
		leads, err := s.commitSplit(ctx, ws[:n])
		firstErr = cmpOr(firstErr, err)
		if !leads {
			return firstErr
		}
		ws = ws[n:]
	}
	return firstErr
}

// commitSplit commits ws in one transaction or, if its comparisons fail,
// in halves; leads is false once the scheduler is found not leading.
func (s *scheduler) commitSplit(ctx context.Context, ws []bindingWrite) (leads bool, _ error) {
	ok, leads, err := s.txn(ctx, ws)
	if err != nil || ok || !leads || len(ws) == 1 {
		return leads, err
	}
	h := len(ws) / 2
	leads, err = s.commitSplit(ctx, ws[:h])
	if !leads {
		return false, err
	}
	leads, err2 := s.commitSplit(ctx, ws[h:])
	return leads, cmpOr(err, err2)
}

// txn commits ws in one transaction if all their comparisons hold and this
// scheduler still leads; if not, leads says whether it still does (the
// transaction reads the leadership key when it fails).
func (s *scheduler) txn(ctx context.Context, ws []bindingWrite) (ok, leads bool, _ error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.leaderRev)}
	ops := make([]clientv3.Op, 0, len(ws))
	for _, w := range ws {
		cmps = append(cmps, w.cmps...)
		ops = append(ops, w.op)
	}
	rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(rctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(s.leaderKey)).Commit()
	if err != nil {
		return false, true, fmt.Errorf("write %d binding(s): %w: %w", len(ws), ErrUnavailable, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		return false, len(kvs) == 1 && kvs[0].CreateRevision == s.leaderRev, nil
	}
	s.wrote = max(s.wrote, resp.Header.Revision)
	for _, w := range ws {
		if w.done != nil {
			w.done()
		}
	}
	return true, true, nil
}

// bindingSeen returns the binding key's entry as the store last read it.
func (s *scheduler) bindingSeen(key string) *bindingEntry {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.bindSeen[key]
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
