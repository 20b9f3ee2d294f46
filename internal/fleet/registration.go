package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/internal/etcd/session"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/retry"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// Registration is this node's registration in etcd: PREFIX/nodes/NAME with
// its NodeInfo, under the node's session lease (package
// internal/etcd/session), written again under each new lease.
type Registration struct {
	cli      *clientv3.Client
	sessions *session.Session
	name     string
	key      string // PREFIX/nodes/NAME
	o        Options

	mu    sync.Mutex // serialises the writes; held over their etcd requests, never by a request handler
	info  NodeInfo
	sent  string           // the registration as last written to etcd
	lease clientv3.LeaseID // the lease it was written under
}

// Register registers info.Name as a node of the fleet, under the session's
// current lease (sessions must be started). The same name may register
// again at once (a restarted node does not wait for its old lease to
// expire): the newest registration wins. A write etcd does not take fails
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
	if err := r.register(ctx, sess.Lease()); err != nil {
		return nil, err
	}
	return r, nil
}

// register puts the node's key under lease.
func (r *Registration) register(ctx context.Context, lease clientv3.LeaseID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := json.Marshal(r.info)
	if err != nil {
		return fmt.Errorf("encode node %s: %w", r.name, err)
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	if _, err := r.cli.Put(rctx, r.key, string(data), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("register node %s: %w: %w", r.name, etcdstore.ErrUnavailable, err)
	}
	r.lease, r.sent = lease, string(data)
	return nil
}

// Info returns what the node publishes now.
func (r *Registration) Info() NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	info := r.info
	info.Labels = maps.Clone(info.Labels)
	return info
}

// Update changes what the node publishes: change edits a copy of the
// current NodeInfo (its name stays), and the key is written again under
// the node's lease if anything changed. Herdr.Since moves when
// Herdr.Reachable changes. A write etcd does not take fails with an error
// matching etcdstore.ErrUnavailable; the new info is kept either way, so
// the next registration (after a lost lease) publishes it.
func (r *Registration) Update(ctx context.Context, change func(*NodeInfo)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.info
	next.Labels = maps.Clone(next.Labels)
	change(&next)
	next.Name = r.name
	if next.Herdr.Reachable != r.info.Herdr.Reachable {
		now := r.o.Clock.Now().UTC().Truncate(time.Second)
		next.Herdr.Since = &now
	}
	if err := next.check(); err != nil {
		return err
	}
	data, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode node %s: %w", r.name, err)
	}
	r.info = next
	if string(data) == r.sent {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.RequestTimeout)
	defer cancel()
	if _, err := r.cli.Put(rctx, r.key, string(data), clientv3.WithLease(r.lease)); err != nil {
		return fmt.Errorf("update node %s: %w: %w", r.name, etcdstore.ErrUnavailable, err)
	}
	r.sent = string(data)
	return nil
}

// Run registers the node again under every new lease of its session (one
// lost while etcd was out of reach is replaced when etcd answers) until
// ctx ends. The session's end revokes the lease, so the key goes at once.
// It returns nil.
func (r *Registration) Run(ctx context.Context) error {
	b := retry.New(r.o.RetryInterval, r.o.Clock)
	for {
		var lease clientv3.LeaseID
		if notify.Wait(ctx, r.sessions, func() bool {
			sess := r.sessions.Current()
			r.mu.Lock()
			defer r.mu.Unlock()
			if sess != nil && sess.Lease() != r.lease {
				lease = sess.Lease()
				return true
			}
			return false
		}) != nil {
			return nil
		}
		r.o.Logger.Warn("node registration lost; registering again", "node", r.name, "key", r.key)
		for {
			err := r.register(ctx, lease)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				b.Reset()
				r.o.Logger.Info("node registered again", "node", r.name, "key", r.key)
				break
			}
			if !b.Wait(ctx) {
				return nil
			}
			if cur := r.sessions.Current(); cur == nil || cur.Lease() != lease {
				break // that lease is gone too: wait for the next
			}
		}
	}
}
