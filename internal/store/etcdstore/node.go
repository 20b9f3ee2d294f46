package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// DefaultNodeTTL is the lease of a node's registration: a node that stops
// renewing it (killed, cut off from etcd) is gone from etcd this long
// after.
const DefaultNodeTTL = 10 * time.Second

// NodeInfo is what a node publishes about itself at PREFIX/nodes/NAME.
type NodeInfo struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// MaxMembers is the node's capacity (--max-members); 0 is no limit.
	MaxMembers int    `json:"maxMembers,omitempty"`
	GatewayURL string `json:"gatewayURL,omitempty"`
	// Version is the node's fleetd version.
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	// Herdr is the node's herdr as the node last saw it; Members how many
	// members it reconciles. The node updates both when they change
	// ([Node.Update]).
	Herdr   v1alpha1.NodeHerdr `json:"herdr"`
	Members int                `json:"members"`
}

// check reports what makes info unfit to publish or to show.
func (info *NodeInfo) check() error {
	if err := CheckNodeName(info.Name); err != nil {
		return err
	}
	if errs := v1alpha1.ValidateNodeLabels(info.Labels); len(errs) > 0 {
		return fmt.Errorf("node %s: %w", info.Name, errs)
	}
	if info.MaxMembers < 0 {
		return fmt.Errorf("node %s: maxMembers %d: want 0 (no limit) or more", info.Name, info.MaxMembers)
	}
	if info.Members < 0 {
		return fmt.Errorf("node %s: members %d: want 0 or more", info.Name, info.Members)
	}
	return nil
}

// NodeOptions configure a node's registration. nil means defaults.
type NodeOptions struct {
	// Prefix is the fleet's key prefix; default DefaultPrefix.
	Prefix string
	// TTL is the registration's lease; default DefaultNodeTTL. etcd's
	// minimum lease is a few seconds; shorter values are raised by etcd.
	TTL time.Duration
	// RequestTimeout bounds each request; default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Clock drives the retries after a lost lease; default the wall clock.
	Clock clock.Clock
	// Logger receives a line when the lease is lost and when it is
	// registered again; default slog.Default().
	Logger *slog.Logger
}

// CheckNodeName reports whether name can name a node: what a Profile's or
// Tenant's name may be (v1alpha1.ObjectNamePattern), so that it is one
// etcd key segment and reads the same everywhere it is shown.
func CheckNodeName(name string) error {
	if name == "" {
		return errors.New("a node needs a name (e.g. the machine's host name), unique in the fleet")
	}
	if !v1alpha1.IsObjectName(name) {
		return fmt.Errorf("node name %q: want %s (a lower-case letter, then lower-case letters, digits, - or _; at most 63)", name, v1alpha1.ObjectNamePattern)
	}
	return nil
}

// Node is a node's registration in etcd: PREFIX/nodes/NAME with its
// NodeInfo, under a lease that Run keeps alive.
type Node struct {
	cli     *clientv3.Client
	name    string
	key     string // PREFIX/nodes/NAME
	ttl     time.Duration
	timeout time.Duration
	clock   clock.Clock
	log     *slog.Logger

	mu    sync.Mutex // serialises Update and register; held over their etcd requests, never by a request handler
	info  NodeInfo
	sent  string // the registration as last written to etcd
	lease clientv3.LeaseID
}

// RegisterNode registers info.Name as a node of the fleet. The same name
// may register again at once (a restarted node does not wait for its old
// lease to expire): the newest registration wins.
func RegisterNode(ctx context.Context, cli *clientv3.Client, info NodeInfo, opts *NodeOptions) (*Node, error) {
	var o NodeOptions
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TTL <= 0 {
		o.TTL = DefaultNodeTTL
	}
	defaultShared(&o.RequestTimeout, &o.Clock, &o.Logger)
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
	n := &Node{cli: cli, info: info, name: info.Name, key: o.Prefix + "/nodes/" + info.Name,
		ttl: o.TTL, timeout: o.RequestTimeout, clock: o.Clock, log: o.Logger}
	if err := n.register(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// register grants a lease and puts the node's key under it.
func (n *Node) register(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	data, err := json.Marshal(n.info)
	if err != nil {
		return fmt.Errorf("encode node %s: %w", n.name, err)
	}
	info := string(data)
	rctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	lease, err := n.cli.Grant(rctx, int64((n.ttl+time.Second-1)/time.Second))
	if err != nil {
		return fmt.Errorf("register node %s: %w: %w", n.name, ErrUnavailable, err)
	}
	if _, err := n.cli.Put(rctx, n.key, info, clientv3.WithLease(lease.ID)); err != nil {
		n.revoke(lease.ID)
		return fmt.Errorf("register node %s: %w: %w", n.name, ErrUnavailable, err)
	}
	n.lease, n.sent = lease.ID, info
	return nil
}

// Info returns what the node publishes now.
func (n *Node) Info() NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	info := n.info
	info.Labels = maps.Clone(info.Labels)
	return info
}

// Update changes what the node publishes: change edits a copy of the
// current NodeInfo (its name stays), and the key is written again under
// the node's lease if anything changed. Herdr.Since moves when
// Herdr.Reachable changes. A write etcd does not take fails with an error
// matching ErrUnavailable; the new info is kept either way, so the next
// registration (after a lost lease) publishes it.
func (n *Node) Update(ctx context.Context, change func(*NodeInfo)) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	next := n.info
	next.Labels = maps.Clone(next.Labels)
	change(&next)
	next.Name = n.name
	if next.Herdr.Reachable != n.info.Herdr.Reachable {
		now := n.clock.Now().UTC().Truncate(time.Second)
		next.Herdr.Since = &now
	}
	if err := next.check(); err != nil {
		return err
	}
	data, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode node %s: %w", n.name, err)
	}
	n.info = next
	if string(data) == n.sent {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	if _, err := n.cli.Put(rctx, n.key, string(data), clientv3.WithLease(n.lease)); err != nil {
		return fmt.Errorf("update node %s: %w: %w", n.name, ErrUnavailable, err)
	}
	n.sent = string(data)
	return nil
}

func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	_, _ = n.cli.Revoke(ctx, id) // an unrevoked lease expires on its own
}

// Run keeps the registration alive until ctx ends, then revokes it so the
// keys go at once. A lease lost while etcd was out of reach is registered
// again when etcd answers.
func (n *Node) Run(ctx context.Context) error {
	defer func() { n.revoke(n.lease) }()
	for {
		ch, err := n.cli.KeepAlive(ctx, n.lease)
		if err == nil {
			for range ch {
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		n.log.Warn("node registration lost; registering again", "node", n.name, "key", n.key)
		for {
			err := n.register(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				n.log.Info("node registered again", "node", n.name, "key", n.key)
				break
			}
			t := n.clock.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
	}
}
