package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// Defaults of [Options].
const (
	// DefaultRescheduleAfter is Options.RescheduleAfter's default,
	// Kubernetes' pod eviction timeout.
	DefaultRescheduleAfter = 5 * time.Minute
	DefaultRequestTimeout  = 5 * time.Second
	DefaultRetryInterval   = time.Second
)

// Source is the fleet as this node's watches last read it (package
// fleet's): what a pass reads, never a request of its own.
type Source interface {
	// Fleet returns every member, binding and node, and the lost nodes.
	Fleet() Fleet
	// Orphans returns the published statuses nobody else will delete.
	Orphans() []Orphan
	// Changed is closed at the next change of the fleet.
	Changed() <-chan struct{}
	// WaitBindings returns once the source has read the bindings written
	// at revision rev.
	WaitBindings(ctx context.Context, rev int64) error
	// BindingsRevision returns the etcd revision up to which the source
	// has read the bindings: a Fleet read after it holds every binding
	// written up to it.
	BindingsRevision() int64
}

// Orphan is a published status of a member that is gone, published by a
// node that is not registered (killed, and not back: a node deletes its
// own when it runs).
type Orphan struct {
	Member string
	// Key is the status's key; ModRevision its revision as last read.
	Key         string
	ModRevision int64
}

// Options configure [Run]. nil means defaults.
type Options struct {
	// Prefix is the fleet's key prefix; default etcdstore.DefaultPrefix.
	Prefix string
	// Candidate names this scheduler in the election (the node's name).
	Candidate string
	// RequestTimeout bounds each transaction; default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RescheduleAfter is how long a member stays bound to a lost node
	// before it is bound to another, for a node that did not register
	// its own (Fleet.Grace: the lost node's --reschedule-after, which
	// its fence counts on, wins); default DefaultRescheduleAfter.
	// Members whose spec.nodeName names the lost node wait for it.
	RescheduleAfter time.Duration
	// RetryInterval is the base of the backoff before campaigning again
	// after the election failed; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Clock drives the backoff and the reschedule grace (against the
	// source's clock, which dates a node's loss); default the wall clock.
	Clock clock.Clock
	// Logger receives a line per election won or lost and per member
	// bound; default slog.Default().
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	r.Prefix = cmp.Or(r.Prefix, etcdstore.DefaultPrefix)
	r.RequestTimeout = cmp.Or(r.RequestTimeout, DefaultRequestTimeout)
	r.RescheduleAfter = cmp.Or(r.RescheduleAfter, DefaultRescheduleAfter)
	r.RetryInterval = cmp.Or(r.RetryInterval, DefaultRetryInterval)
	r.Clock = cmp.Or[clock.Clock](r.Clock, clock.Real{})
	r.Logger = cmp.Or(r.Logger, slog.Default())
	return r
}

// Run takes part in the fleet's scheduler election under the node's
// session until ctx ends, and schedules while it leads (see the package
// documentation). It returns nil on cancellation.
func Run(ctx context.Context, cli *clientv3.Client, sessions *session.Session, src Source, opts *Options) error {
	o := opts.withDefaults()
	b := retry.New(o.RetryInterval, o.Clock)
	for {
		var sess *concurrency.Session
		if notify.Wait(ctx, sessions, func() bool { sess = sessions.Current(); return sess != nil }) != nil {
			return nil
		}
		led, err := lead(ctx, cli, sess, src, &o)
		if ctx.Err() != nil {
			return nil
		}
		if led {
			b.Reset()
		}
		o.Logger.Warn("scheduler election lost or failed; campaigning again", "candidate", o.Candidate, "err", err)
		if !b.Wait(ctx) {
			return nil
		}
	}
}

// lead campaigns under sess, then schedules on every change of the fleet
// until the session ends or ctx does; led says whether it won.
func lead(ctx context.Context, cli *clientv3.Client, sess *concurrency.Session, src Source, o *Options) (led bool, _ error) {
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
			return false, fmt.Errorf("campaign: %w", err)
		}
	case <-sess.Done():
		return false, errors.New("session lease lost while campaigning")
	case <-ctx.Done():
		return false, nil
	}
	o.Logger.Info("scheduling the fleet", "candidate", o.Candidate)
	s := &scheduler{cli: cli, src: src, o: o, leaderKey: e.Key(), leaderRev: e.Rev()}
	for {
		changed := src.Changed()
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
			s.resign(e)
			return true, nil
		case <-sess.Done():
			stop()
			return true, errors.New("session lease lost")
		case <-changed:
		case <-timer:
		}
		stop()
	}
}

// resign gives up the leadership at once, so that another node schedules
// without waiting for this node's lease (which its session revokes too).
func (s *scheduler) resign(e *concurrency.Election) {
	rctx, cancel := context.WithTimeout(context.Background(), s.o.RequestTimeout)
	defer cancel()
	_ = e.Resign(rctx) // the key goes with the lease otherwise
}

type scheduler struct {
	cli       *clientv3.Client
	src       Source
	o         *Options
	leaderKey string
	leaderRev int64
	// wrote is the etcd revision of this scheduler's last committed
	// bindings: a pass places from a fleet that has seen it, or not at all.
	// Guarded by mu, for the transactions a pass has in flight at once.
	mu    sync.Mutex
	wrote int64
	// view is the revision the pass's counts reflect: its fleet's bindings,
	// or its own last committed write since. A write holds only if no
	// binding changed after it.
	view int64
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
		err := s.src.WaitBindings(rctx, s.wrote)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("scheduling pass: %w", err)
		}
	}
	// The bindings are read at seen or later: every binding write of the
	// pass holds only if no binding changed after seen (or after this
	// pass's own last write), so that counts taken from them are right
	// when it commits (capacity, after a write etcd took without saying
	// so: see commit).
	seen := s.src.BindingsRevision()
	f := s.src.Fleet()
	s.view = max(seen, s.wrote)
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
			grace := s.o.RescheduleAfter
			if g, ok := f.Grace[old.Node]; ok {
				grace = g // the lost node's own: what its fence counts on
			}
			if left := since.Add(grace).Sub(now); left > 0 {
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
		memberKey := s.memberKey(m.Name)
		value, _ := json.Marshal(etcdstore.Binding{Node: node, MemberUID: m.UID})
		name := m.Name
		fences := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(memberKey), "=", rev)}
		if bound {
			// Never away from a node registered again: a node that
			// re-registered keeps its members (it runs them, fenced
			// only past its deadline).
			fences = append(fences, clientv3.Compare(clientv3.CreateRevision(NodeKey(s.o.Prefix, old.Node)), "=", 0))
		}
		binds = append(binds, s.planWrite(&f, name, fences,
			clientv3.OpPut(etcdstore.BindingKey(s.o.Prefix, name), string(value)),
			func() {
				if bound {
					s.o.Logger.Info("member rescheduled from a lost node", "member", name, "lost", old.Node, "node", node)
				} else {
					s.o.Logger.Info("member bound", "member", name, "node", node)
				}
			}))
	}
	// Without a capacity anywhere, the counts hold nothing that a
	// binding written meanwhile could break: the batches go at once.
	capped := slices.ContainsFunc(f.Nodes, func(n Node) bool { return n.MaxMembers > 0 })
	firstErr := s.commit(ctx, binds, capped)
	// Bindings whose member is gone. (One whose member was made again,
	// with a new uid, is overwritten above.)
	var unbinds []bindingWrite
	for name, st := range f.Stored {
		if st.Binding != nil && !present[name] {
			unbinds = append(unbinds, s.planWrite(&f, name,
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.memberKey(name)), "=", 0)},
				clientv3.OpDelete(etcdstore.BindingKey(s.o.Prefix, name)), nil))
		}
	}
	unbindErr := s.commit(ctx, unbinds, false)
	for _, o := range s.src.Orphans() {
		rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
		_, err := s.cli.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(o.Key), "=", o.ModRevision),
			clientv3.Compare(clientv3.CreateRevision(s.memberKey(o.Member)), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.leaderRev)).Then(clientv3.OpDelete(o.Key)).Commit()
		cancel()
		if err != nil {
			firstErr = cmpOr(firstErr, fmt.Errorf("delete %s: %w: %w", o.Key, etcdstore.ErrUnavailable, err))
		}
	}
	return wake, cmpOr(firstErr, unbindErr)
}

// memberKey is a member's key in the fleet.
func (s *scheduler) memberKey(name string) string {
	key, _ := etcdstore.KeyOf(s.o.Prefix, v1alpha1.KindMember, name) // a known kind: no error
	return key
}

// bindingWrite is one write of a pass: op on a binding key, if its own
// fence (on the member's key) holds and the binding key is as the fleet
// last read it; done, if set, runs once it is committed.
type bindingWrite struct {
	cmps []clientv3.Cmp
	op   clientv3.Op
	done func()
}

// planWrite is the write of op on member's binding key, fenced on fences
// and on the binding key's mod revision as f read it (0: none).
func (s *scheduler) planWrite(f *Fleet, member string, fences []clientv3.Cmp, op clientv3.Op, done func()) bindingWrite {
	key := etcdstore.BindingKey(s.o.Prefix, member)
	return bindingWrite{cmps: append(fences, clientv3.Compare(clientv3.ModRevision(key), "=", f.Stored[member].ModRevision)), op: op, done: done}
}

// NodeKey is a node's registration key in a fleet under prefix (package
// fleet writes it; a rebind is fenced on its absence).
func NodeKey(prefix, name string) string { return prefix + "/nodes/" + name }

// maxTxnOps is etcd's default bound on the comparisons (and on the
// operations) of one transaction (--max-txn-ops).
const maxTxnOps = 128

// txnCmps is the comparisons of a transaction of binding writes besides
// the writes' own: the leadership, the bindings as counted.
const txnCmps = 2

// maxTxnsInFlight bounds the transactions of a pass's batches that are
// in flight at once (commit, unfenced).
const maxTxnsInFlight = 4

// commit writes ws in transactions of as many writes as etcd takes, each
// fenced as a whole on this scheduler's leadership and on every write's
// own comparisons and, when fenced, on the bindings being as the pass
// counted them (none changed after s.view). A batch whose own comparisons
// fail while the scheduler still leads (and its count holds) is split in
// halves and each tried again, down to single writes, so that one member
// changed meanwhile holds back only itself (its write is dropped; the
// next pass places it from the fleet as it is then).
//
// Fenced, the batches go one after another, and a scheduler found no
// longer leading, or whose count is behind the bindings — a write etcd
// took although it answered with an error, another writer — writes
// nothing more: the next pass counts again once its source has read them.
// Unfenced (a pass that places on no node with a capacity: the count
// guards nothing), up to maxTxnsInFlight batches go at once, and s.view is
// left as the pass read it, so that a fenced write after them in the same
// pass waits for the next. It returns the first error of etcd, having
// tried every batch.
func (s *scheduler) commit(ctx context.Context, ws []bindingWrite, fenced bool) error {
	var batches [][]bindingWrite
	for len(ws) > 0 {
		// As many writes as their comparisons fit (63 binds, two each).
		n, cmps := 0, txnCmps
		for n < len(ws) && cmps+len(ws[n].cmps) <= maxTxnOps {
			cmps += len(ws[n].cmps)
			n++
		}
		batches, ws = append(batches, ws[:n]), ws[n:]
	}
	errs := make([]error, len(batches))
	if fenced {
		for i, b := range batches {
			var goOn bool
			if goOn, errs[i] = s.commitSplit(ctx, b, true); !goOn {
				break
			}
		}
		return cmpOr(errs...)
	}
	var g errgroup.Group
	g.SetLimit(maxTxnsInFlight)
	for i, b := range batches {
		g.Go(func() error {
			_, errs[i] = s.commitSplit(ctx, b, false)
			return nil
		})
	}
	_ = g.Wait() // every batch's error is in errs
	return cmpOr(errs...)
}

// commitSplit commits ws in one transaction or, if its own comparisons
// fail, in halves; goOn is false once the scheduler is found not leading
// or counting from bindings that changed, or etcd failed.
func (s *scheduler) commitSplit(ctx context.Context, ws []bindingWrite, fenced bool) (goOn bool, _ error) {
	ok, goOn, err := s.txn(ctx, ws, fenced)
	if err != nil || ok || !goOn || len(ws) == 1 {
		return goOn && err == nil, err
	}
	h := len(ws) / 2
	if goOn, err = s.commitSplit(ctx, ws[:h], fenced); !goOn {
		return false, err
	}
	return s.commitSplit(ctx, ws[h:], fenced)
}

// txn commits ws in one transaction if all their comparisons hold, this
// scheduler still leads and, fenced, no binding changed after s.view; if
// not, goOn says whether only the writes' own comparisons failed (the
// transaction reads the leadership key and a binding changed since, if
// any, when it fails). A write etcd took but did not answer leaves s.view
// behind it, so that no later fenced one holds until the pass counts
// again.
func (s *scheduler) txn(ctx context.Context, ws []bindingWrite, fenced bool) (ok, goOn bool, _ error) {
	bindings := etcdstore.BindingKey(s.o.Prefix, "")
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.leaderKey), "=", s.leaderRev)}
	orElse := []clientv3.Op{clientv3.OpGet(s.leaderKey)}
	if fenced {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(bindings), "<", s.view+1).WithPrefix())
		orElse = append(orElse, clientv3.OpGet(bindings, clientv3.WithPrefix(), clientv3.WithMinModRev(s.view+1), clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	}
	ops := make([]clientv3.Op, 0, len(ws))
	for _, w := range ws {
		cmps = append(cmps, w.cmps...)
		ops = append(ops, w.op)
	}
	rctx, cancel := context.WithTimeout(ctx, s.o.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(rctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
	if err != nil {
		return false, false, fmt.Errorf("write %d binding(s): %w: %w", len(ws), etcdstore.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		leads := len(kvs) == 1 && kvs[0].CreateRevision == s.leaderRev
		return false, leads && (!fenced || len(resp.Responses[1].GetResponseRange().GetKvs()) == 0), nil
	}
	s.mu.Lock()
	s.wrote = max(s.wrote, resp.Header.Revision)
	s.mu.Unlock()
	if fenced {
		s.view = max(s.view, resp.Header.Revision)
	}
	for _, w := range ws {
		if w.done != nil {
			w.done()
		}
	}
	return true, true, nil
}

func cmpOr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
