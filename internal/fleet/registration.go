package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// ErrNodeTaken is matched (errors.Is) by the error of [Register] when
// another fleetd holds the node's name: its registration is under a lease
// that lives, and names another instance.
var ErrNodeTaken = errors.New("node name taken")

// Registration is this node's registration in etcd: PREFIX/nodes/NAME with
// its NodeInfo, under the node's session lease (package
// internal/etcd/session), written again under each new lease and whenever
// someone else changed or deleted it.
type Registration struct {
	cli      *clientv3.Client
	sessions *session.Session
	name     string
	key      string // PREFIX/nodes/NAME
	o        Options

	// writeMu serialises the writes; held over their etcd requests. mu
	// guards the fields below and is never held over a request: the
	// fence reads Registered on every reconcile.
	writeMu  sync.Mutex
	mu       sync.Mutex
	info     NodeInfo
	sent     string           // the registration as last written to etcd
	lease    clientv3.LeaseID // the lease it was written under
	rev      int64            // the revision of that write
	since    int64            // the revision of the first write under lease
	conflict error            // another fleetd holds the name (its key, its lease)
	changed  notify.Signal    // lease, since or conflict changed
}

// Register registers info.Name as a node of the fleet, under the session's
// current lease (sessions must be started). A registration of the same
// instance (info.Instance.ID: the state directory's node id) is taken
// over at once, so that a restarted fleetd does not wait for its old
// lease to expire, and so is one under no lease (written by hand); one of
// another instance under a lease is refused with an error matching
// ErrNodeTaken that names that instance. A write etcd does not take fails
// with an error matching etcdstore.ErrUnavailable.
func Register(ctx context.Context, cli *clientv3.Client, sessions *session.Session, info NodeInfo, opts *Options) (*Registration, error) {
	o := opts.withDefaults()
	if err := info.check(); err != nil {
		return nil, err
	}
	if info.StartedAt.IsZero() {
		info.StartedAt = o.Clock.Now().UTC().Truncate(time.Second)
	}
	if info.Herdr.Since == nil {
		since := info.StartedAt
		info.Herdr.Since = &since
	}
	r := &Registration{cli: cli, sessions: sessions, name: info.Name, key: nodeKey(o.Prefix, info.Name), o: o, info: info}
	sess := sessions.Current()
	if sess == nil {
		return nil, fmt.Errorf("register node %s: %w", info.Name, session.ErrNoSession)
	}
	if err := r.register(ctx, sess.Lease(), nil); err != nil {
		return nil, err
	}
	return r, nil
}

// register puts the node's key under lease: over nothing, over what it
// holds now (at, as last read; nil: read it) unless that is another
// instance's under a live lease.
func (r *Registration) register(ctx context.Context, lease clientv3.LeaseID, at *mvccpb.KeyValue) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	data, err := json.Marshal(r.info)
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode node %s: %w", r.name, err)
	}
	for range 3 {
		over := clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)
		if at != nil {
			r.mu.Lock()
			err := r.holder(at)
			if err != nil {
				r.setConflict(err)
			}
			r.mu.Unlock()
			if err != nil {
				return err
			}
			over = clientv3.Compare(clientv3.ModRevision(r.key), "=", at.ModRevision)
		}
		rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
		resp, err := r.cli.Txn(rctx).If(over).Then(clientv3.OpPut(r.key, string(data), clientv3.WithLease(lease))).Else(clientv3.OpGet(r.key)).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("register node %s: %w: %w", r.name, etcdstore.ErrUnavailable, err)
		}
		if resp.Succeeded {
			r.mu.Lock()
			r.wrote(lease, string(data), resp.Header.Revision)
			r.mu.Unlock()
			return nil
		}
		at = nil
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			at = kvs[0]
		}
	}
	return fmt.Errorf("register node %s: %w: its key kept changing under it", r.name, etcdstore.ErrUnavailable)
}

// holder returns why kv, the node's key, is not this node's to write: it
// names another instance and is under a lease that lives (etcd deletes a
// key whose lease expired). nil for this instance's own, for one written
// by hand (no lease), and for one that does not decode. Callers hold r.mu.
func (r *Registration) holder(kv *mvccpb.KeyValue) error {
	var other NodeInfo
	if kv.Lease == 0 || clientv3.LeaseID(kv.Lease) == r.lease || json.Unmarshal(kv.Value, &other) != nil ||
		other.Instance.ID == "" || other.Instance.ID == r.info.Instance.ID {
		return nil
	}
	return fmt.Errorf("%w: node %s is registered by another fleetd, %s, whose lease in etcd lives (key %s); "+
		"stop that fleetd or give this one another --node (a fleetd that was killed leaves its registration until its lease expires, 10 s by default)",
		ErrNodeTaken, r.name, other.Instance, r.key)
}

// wrote records a write of data under lease at rev. Callers hold r.mu.
func (r *Registration) wrote(lease clientv3.LeaseID, data string, rev int64) {
	newLease := lease != r.lease
	r.sent, r.rev = data, rev
	if newLease {
		r.lease, r.since = lease, rev
	}
	was := r.conflict
	r.conflict = nil
	if newLease || was != nil {
		r.changed.Notify()
	}
}

// setConflict records that another fleetd holds the name. Callers hold r.mu.
func (r *Registration) setConflict(err error) {
	first := r.conflict == nil
	r.conflict = err
	if first {
		r.o.Logger.Error("another fleetd holds this node's registration; this node runs no member until it is its own again", "node", r.name, "err", err)
		r.changed.Notify()
	}
}

// Registered is the registration as this node last wrote it: the lease
// it is under, the revision of its first write under that lease, and why
// it is not this node's (another fleetd holds the name) if it is not.
type Registered struct {
	Lease    clientv3.LeaseID
	Since    int64
	Conflict error
}

// Registered returns the registration as last written; see [Registered].
func (r *Registration) Registered() Registered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Registered{Lease: r.lease, Since: r.since, Conflict: r.conflict}
}

// Changed returns a channel closed at the next change of what Registered
// returns.
func (r *Registration) Changed() <-chan struct{} { return r.changed.Changed() }

// Info returns what the node publishes now.
func (r *Registration) Info() NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	info := r.info
	info.Labels = maps.Clone(info.Labels)
	return info
}

// Update changes what the node publishes: change edits a copy of the
// current NodeInfo (its name and instance stay), and the key is written
// again under the node's lease if anything changed — over the node's own
// last write only: a key someone else changed meanwhile is Run's to
// write again. Herdr.Since moves when Herdr.Reachable changes. A write
// etcd does not take fails with an error matching
// etcdstore.ErrUnavailable; the new info is kept either way, so the next
// registration (after a lost lease) publishes it.
func (r *Registration) Update(ctx context.Context, change func(*NodeInfo)) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	data, lease, rev, write, err := r.edit(change)
	if err != nil || !write {
		return err
	}
	return r.rewrite(ctx, "update", data, lease, rev)
}

// rewrite writes data under lease over this node's own write at rev (a
// key changed since is Run's to write again) and records it. Callers hold
// writeMu.
func (r *Registration) rewrite(ctx context.Context, what, data string, lease clientv3.LeaseID, rev int64) error {
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	resp, err := r.cli.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(r.key), "=", rev)).
		Then(clientv3.OpPut(r.key, data, clientv3.WithLease(lease))).Commit()
	if err != nil {
		return fmt.Errorf("%s node %s: %w: %w", what, r.name, etcdstore.ErrUnavailable, err)
	}
	if resp.Succeeded {
		r.mu.Lock()
		r.wrote(lease, data, resp.Header.Revision)
		r.mu.Unlock()
	}
	return nil
}

// Touch writes the registration again as it is (over this node's own
// last write only), so that etcd's revision moves: etcd answers a watch
// stream's progress request only once its revision reaches the start of
// every watch on the stream, and a watch that began at the newest
// revision of a quiet fleet waits for the next write. The fence uses it
// when its store does not hear that it has read the bindings.
func (r *Registration) Touch(ctx context.Context) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	data, lease, rev, ok := r.sent, r.lease, r.rev, r.sent != "" && r.conflict == nil
	r.mu.Unlock()
	if !ok {
		return nil
	}
	return r.rewrite(ctx, "touch", data, lease, rev)
}

// edit applies Update's change to the info, and says whether to write it
// and over which write (lease and revision: only writes change them, and
// the caller holds writeMu).
func (r *Registration) edit(change func(*NodeInfo)) (data string, lease clientv3.LeaseID, rev int64, write bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.info
	next.Labels = maps.Clone(next.Labels)
	change(&next)
	next.Name, next.Instance = r.name, r.info.Instance
	if next.Herdr.Reachable != r.info.Herdr.Reachable {
		now := r.o.Clock.Now().UTC().Truncate(time.Second)
		next.Herdr.Since = &now
	}
	if err := next.check(); err != nil {
		return "", 0, 0, false, err
	}
	b, err := json.Marshal(next)
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("encode node %s: %w", r.name, err)
	}
	r.info = next
	if string(b) == r.sent || r.conflict != nil {
		return "", 0, 0, false, nil
	}
	return string(b), r.lease, r.rev, true, nil
}

// Run keeps the node registered until ctx ends: again under every new
// lease of its session (one lost while etcd was out of reach is replaced
// when etcd answers), and again whenever the key, as nodes (this node's
// watch of the registrations) reads it, is not what the node last wrote —
// deleted, overwritten or tampered with — unless another fleetd holds it
// under a lease that lives, which Registered then reports until the key
// is this node's to write again. The session's end revokes the lease, so
// the key goes at once. It returns nil.
func (r *Registration) Run(ctx context.Context, nodes *Nodes) error {
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	for {
		sessCh, nodesCh := r.sessions.Changed(), nodes.inf.Changed()
		lease, at, write := r.next(nodes)
		if write {
			err := r.register(ctx, lease, at)
			if ctx.Err() != nil {
				return nil
			}
			switch {
			case err == nil:
				b.Reset()
				r.o.Logger.Info("node registered again", "node", r.name, "key", r.key)
				continue
			case errors.Is(err, ErrNodeTaken):
				// Written again when its holder's key changes or goes.
			default:
				r.o.Logger.Warn("register the node again; retrying", "node", r.name, "key", r.key, "err", err)
				if !b.Wait(ctx) {
					return nil
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sessCh:
		case <-nodesCh:
		}
	}
}

// next says whether the key is to be written again, under which lease,
// over what (nil: nothing there).
func (r *Registration) next(nodes *Nodes) (lease clientv3.LeaseID, at *mvccpb.KeyValue, write bool) {
	sess := r.sessions.Current()
	if sess == nil {
		return 0, nil, false // wait for a lease
	}
	lease = sess.Lease()
	// After any write in flight: its key, read back, is this node's own.
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	it, there := nodes.inf.Get(r.key)
	seen := nodes.inf.Revision()
	r.mu.Lock()
	defer r.mu.Unlock()
	if there {
		at = &mvccpb.KeyValue{Key: []byte(r.key), ModRevision: it.ModRevision, CreateRevision: it.CreateRevision, Lease: it.Lease}
		if it.Value != nil {
			at.Value, _ = json.Marshal(it.Value)
		}
	}
	switch {
	case lease != r.lease:
		r.o.Logger.Warn("node registration lost with its lease; registering again", "node", r.name, "key", r.key)
		if !there {
			at = nil
		}
		return lease, at, true
	case !there && seen > r.rev && nodes.inf.Stale() == nil:
		r.o.Logger.Warn("node registration deleted behind this node's back; registering again", "node", r.name, "key", r.key)
		return lease, nil, true
	case there && it.ModRevision > r.rev:
		if r.conflict == nil {
			r.o.Logger.Warn("node registration changed behind this node's back; registering again", "node", r.name, "key", r.key)
		}
		return lease, at, true
	}
	return 0, nil, false
}
