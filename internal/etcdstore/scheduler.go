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
	// RequestTimeout bounds each binding write; default
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
// to the node [Place] picks, each in a transaction that holds only if the
// member's key is still at the revision it placed, its binding is still
// as it read it, and its leadership key is still there: a scheduler that
// lost the election, or placed a member that changed meanwhile, writes
// nothing. Bindings of deleted members are removed the same way. Members
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
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.RescheduleAfter <= 0 {
		o.RescheduleAfter = DefaultRescheduleAfter
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
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
}

// pass binds what is unbound, rebinds what waited its grace on a lost
// node, and unbinds what is gone, once. wake, if positive, is when the
// next member's grace ends.
func (s *scheduler) pass(ctx context.Context) (wake time.Duration, _ error) {
	f := s.st.Fleet()
	counts := f.Counts()
	now := s.o.Clock.Now()
	var firstErr error
	present := map[string]bool{}
	for _, m := range f.Members {
		present[m.Name] = true
		if b, bound := f.Bindings[m.Name]; bound {
			since, lost := f.Lost[b.Node]
			if !lost || m.Spec.NodeName == b.Node {
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
		memberKey, _ := s.st.Key("Member", m.Name)
		value, _ := json.Marshal(Binding{Node: node, MemberUID: m.UID})
		ok, err := s.write(ctx, s.st.bindingKey(m.Name), []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(memberKey), "=", rev)},
			clientv3.OpPut(s.st.bindingKey(m.Name), string(value)))
		if err != nil {
			firstErr = cmpOr(firstErr, err)
			continue
		}
		if ok {
			counts[node]++
			if old, bound := f.Bindings[m.Name]; bound {
				counts[old.Node]--
				s.o.Logger.Info("member rescheduled from a lost node", "member", m.Name, "lost", old.Node, "node", node)
			} else {
				s.o.Logger.Info("member bound", "member", m.Name, "node", node)
			}
		}
	}
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
	for _, name := range stale {
		memberKey, _ := s.st.Key("Member", name)
		if _, err := s.write(ctx, s.st.bindingKey(name), []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(memberKey), "=", 0)},
			clientv3.OpDelete(s.st.bindingKey(name))); err != nil {
			firstErr = cmpOr(firstErr, err)
		}
	}
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
	return wake, firstErr
}

// write commits op on a binding key if cmps hold, the binding key is as
// this store last saw it, and this scheduler still leads.
func (s *scheduler) write(ctx context.Context, key string, cmps []clientv3.Cmp, op clientv3.Op) (bool, error) {
	var seen int64
	if e := s.bindingSeen(key); e != nil {
		seen = e.modRev
	}
	cmps = append(cmps,
		clientv3.Compare(clientv3.ModRevision(key), "=", seen),
		clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.leaderRev))
	rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(rctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return false, fmt.Errorf("write %s: %w: %w", key, ErrUnavailable, err)
	}
	return resp.Succeeded, nil
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
