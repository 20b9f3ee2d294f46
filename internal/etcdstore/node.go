package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// DefaultNodeTTL is the lease of a node's registration: a node that stops
// renewing it (killed, cut off from etcd) is gone from etcd this long
// after.
const DefaultNodeTTL = 10 * time.Second

// ErrPrefixTaken is returned (wrapped) by RegisterNode and Node.Run when
// another live node serves the prefix. Until placement exists, every node
// would reconcile every Member into its own herdr, so one prefix has one
// node at a time.
var ErrPrefixTaken = errors.New("another fleetd node serves this etcd prefix")

// NodeInfo is what a node publishes about itself at PREFIX/nodes/NAME.
type NodeInfo struct {
	Name       string            `json:"name"`
	Labels     map[string]string `json:"labels,omitempty"`
	GatewayURL string            `json:"gatewayURL,omitempty"`
	Version    string            `json:"version,omitempty"`
	StartedAt  time.Time         `json:"startedAt"`
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
// NodeInfo, and PREFIX/node, the prefix's one serving node, both under one
// lease that Run keeps alive.
type Node struct {
	cli     *clientv3.Client
	info    []byte
	name    string
	key     string // PREFIX/nodes/NAME
	sole    string // PREFIX/node
	ttl     time.Duration
	timeout time.Duration
	clock   clock.Clock
	log     *slog.Logger
	lease   clientv3.LeaseID
}

// RegisterNode registers info.Name as the prefix's serving node, in one
// transaction that fails with ErrPrefixTaken while another node's lease is
// alive. The same name may register again at once (a restarted node does
// not wait for its old lease to expire).
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
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := CheckNodeName(info.Name); err != nil {
		return nil, err
	}
	if info.StartedAt.IsZero() {
		info.StartedAt = o.Clock.Now().UTC().Truncate(time.Second)
	}
	data, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode node %s: %w", info.Name, err)
	}
	n := &Node{cli: cli, info: data, name: info.Name, key: o.Prefix + "/nodes/" + info.Name, sole: o.Prefix + "/node",
		ttl: o.TTL, timeout: o.RequestTimeout, clock: o.Clock, log: o.Logger}
	if err := n.register(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// register grants a lease and puts both keys under it, unless another
// node's name is at PREFIX/node.
func (n *Node) register(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	lease, err := n.cli.Grant(rctx, int64((n.ttl+time.Second-1)/time.Second))
	if err != nil {
		return fmt.Errorf("register node %s: %w: %w", n.name, ErrUnavailable, err)
	}
	resp, err := n.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(n.sole), "=", 0)).
		Then(clientv3.OpPut(n.sole, n.name, clientv3.WithLease(lease.ID)), clientv3.OpPut(n.key, string(n.info), clientv3.WithLease(lease.ID))).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(n.sole), "=", n.name)},
			[]clientv3.Op{clientv3.OpPut(n.sole, n.name, clientv3.WithLease(lease.ID)), clientv3.OpPut(n.key, string(n.info), clientv3.WithLease(lease.ID))},
			[]clientv3.Op{clientv3.OpGet(n.sole)})).
		Commit()
	if err != nil {
		n.revoke(lease.ID)
		return fmt.Errorf("register node %s: %w: %w", n.name, ErrUnavailable, err)
	}
	if !resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		if !inner.Succeeded {
			n.revoke(lease.ID)
			holder := "?"
			if kvs := inner.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				holder = string(kvs[0].Value)
			}
			return fmt.Errorf("register node %s: node %s is alive at %s: %w; until placement is built, run one fleetd per etcd prefix (another --etcd-prefix, or stop %s)",
				n.name, holder, n.sole, ErrPrefixTaken, holder)
		}
	}
	n.lease = lease.ID
	return nil
}

func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	_, _ = n.cli.Revoke(ctx, id) // an unrevoked lease expires on its own
}

// Run keeps the registration alive until ctx ends, then revokes it so the
// keys go at once. A lease lost while etcd was out of reach is registered
// again when etcd answers; Run returns an error matching ErrPrefixTaken if
// another node took the prefix meanwhile.
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
			if errors.Is(err, ErrPrefixTaken) {
				return err
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
