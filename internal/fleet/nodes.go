package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// maxNodeBytes bounds a node's registration, written or read.
const maxNodeBytes = 512 << 10

// NodeInfo is what a node publishes about itself at PREFIX/nodes/NAME.
type NodeInfo struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// MaxMembers is the node's capacity (--max-members); 0 is no limit.
	MaxMembers int    `json:"maxMembers,omitempty"`
	GatewayURL string `json:"gatewayURL,omitempty"`
	// Version is the node's fleetd version.
	Version string `json:"version,omitempty"`
	// Instance is the fleetd that registered the node: a second one with
	// the same name is refused while the first's lease lives.
	Instance  NodeInstance `json:"instance,omitzero"`
	StartedAt time.Time    `json:"startedAt"`
	// RescheduleAfter is the node's --reschedule-after: how long its
	// members stay bound to it once it is lost, which its fence counts
	// on. The scheduler honours each lost node's own (absent, from an
	// older fleetd: the scheduler's).
	RescheduleAfter v1alpha1.Duration `json:"rescheduleAfter,omitzero"`
	// Herdr is the node's herdr as the node last saw it; Members how many
	// members it reconciles. The node updates both when they change
	// ([Registration.Update]).
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
	if info.RescheduleAfter.Duration < 0 {
		return fmt.Errorf("node %s: rescheduleAfter %s: want a positive duration", info.Name, info.RescheduleAfter.Duration)
	}
	if info.Members < 0 {
		return fmt.Errorf("node %s: members %d: want 0 or more", info.Name, info.Members)
	}
	return nil
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

// nodeKey is a node's registration key in a fleet under prefix.
func nodeKey(prefix, name string) string { return scheduler.NodeKey(prefix, name) }

// Nodes is the fleet's nodes as this node reads them: every registration
// at PREFIX/nodes/NAME, from an informer (no etcd request per read), and
// the lost nodes — nodes members are bound to whose registration is gone
// (their lease expired), each kept as a tombstone dated by this node's
// clock when it first saw it so, with its last registration.
type Nodes struct {
	inf   *informer.Informer[*NodeInfo] // a nil value does not decode
	store *etcdstore.Store              // the bindings
	o     Options

	mu         sync.Mutex
	registered []NodeInfo // sorted by name
	lost       map[string]lostNode
	changed    notify.Signal // registrations or lost nodes changed
}

// lostNode is a node with bindings but no registration: a tombstone.
type lostNode struct {
	since time.Time // when this node first saw it gone
	last  NodeInfo  // its last registration this node read; only Name if none
}

// NewNodes returns the fleet's nodes as read through cli, with the
// bindings st reads; nothing is read until Sync or Run.
func NewNodes(cli *clientv3.Client, st *etcdstore.Store, opts *Options) *Nodes {
	o := opts.withDefaults()
	n := &Nodes{store: st, o: o, lost: map[string]lostNode{}}
	n.inf = informer.New(informer.Options[*NodeInfo]{
		Client: cli, Prefix: nodeKey(o.Prefix, ""), Name: "nodes", Decode: n.decode, OnChange: n.changedRegistrations,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger,
	})
	return n
}

// Sync reads the registrations once, before Run.
func (n *Nodes) Sync(ctx context.Context) error { return n.inf.Sync(ctx) }

// Run follows the registrations and the bindings until ctx ends: a bound
// node that is not registered is lost. It returns nil.
func (n *Nodes) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = n.inf.Run(ctx) })
	for {
		ch := n.store.BindingsChanged()
		n.mark(nil)
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

// decode decodes a node's registration; ok is false for a key below one.
// A value that does not decode, names another node or breaks the rules of
// a registration is logged and leaves the node out (nil).
func (n *Nodes) decode(kv *mvccpb.KeyValue, _ *NodeInfo, _ bool) (*NodeInfo, bool) {
	key := string(kv.Key)
	name := strings.TrimPrefix(key, nodeKey(n.o.Prefix, ""))
	if name == "" || strings.Contains(name, "/") {
		return nil, false
	}
	if len(kv.Value) > maxNodeBytes {
		n.o.Logger.Error("etcd holds a node registration over the size limit; the node is not shown", "key", key, "bytes", len(kv.Value), "limit", maxNodeBytes)
		return nil, true
	}
	var info NodeInfo
	dec := json.NewDecoder(bytes.NewReader(kv.Value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		n.o.Logger.Error("etcd holds a node registration that does not decode; the node is not shown", "key", key, "err", err)
		return nil, true
	}
	if info.Name != name {
		n.o.Logger.Error("etcd holds a node registration for another name than its key's; the node is not shown", "key", key, "name", info.Name)
		return nil, true
	}
	if err := info.check(); err != nil {
		n.o.Logger.Error("etcd holds a node registration that is not valid; the node is not shown", "key", key, "err", err)
		return nil, true
	}
	return &info, true
}

// changedRegistrations installs the registrations the informer read.
func (n *Nodes) changedRegistrations() {
	items := n.inf.Items()
	var next []NodeInfo
	for _, k := range slices.Sorted(maps.Keys(items)) {
		if info := items[k].Value; info != nil {
			next = append(next, *info)
		}
	}
	n.mu.Lock()
	prev := n.registered
	n.registered = next
	n.mu.Unlock()
	n.mark(prev)
	n.changed.Notify()
}

// mark brings the lost nodes up to date with the registrations and the
// bindings: a bound node that is not registered is lost since the moment
// this node first saw it so (prev: the registrations before a change,
// whose last info the tombstone keeps); a node registered again, or with
// no bindings left, is no longer lost.
func (n *Nodes) mark(prev []NodeInfo) {
	bound := n.store.BoundCounts()
	now := n.o.Clock.Now()
	n.mu.Lock()
	registered := map[string]bool{}
	for _, r := range n.registered {
		registered[r.Name] = true
	}
	changed := false
	for name := range n.lost {
		if registered[name] || bound[name] == 0 {
			delete(n.lost, name)
			changed = true
		}
	}
	for _, r := range prev {
		if _, ok := n.lost[r.Name]; !ok && !registered[r.Name] && bound[r.Name] > 0 {
			n.lost[r.Name] = lostNode{since: now, last: r}
			changed = true
		}
	}
	for name := range bound {
		if _, ok := n.lost[name]; !ok && !registered[name] {
			n.lost[name] = lostNode{since: now, last: NodeInfo{Name: name}}
			changed = true
		}
	}
	n.mu.Unlock()
	if changed {
		n.changed.Notify()
	}
}

// Registered returns the registered nodes, sorted by name.
func (n *Nodes) Registered() []NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.registered
}

// Lost returns the lost nodes, each with when this node first saw it gone.
func (n *Nodes) Lost() map[string]time.Time {
	since, _ := n.lostNodes()
	return since
}

// lostNodes returns the lost nodes, read together under one lock: when
// this node first saw each gone, and, of those whose registration said it,
// how long its members stay bound to it once lost (its
// --reschedule-after).
func (n *Nodes) lostNodes() (since map[string]time.Time, grace map[string]time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	since, grace = make(map[string]time.Time, len(n.lost)), map[string]time.Duration{}
	for name, l := range n.lost {
		since[name] = l.since
		if g := l.last.RescheduleAfter.Duration; g > 0 {
			grace[name] = g
		}
	}
	return since, grace
}

// Changed returns a channel closed at the next change of the
// registrations or of the lost nodes.
func (n *Nodes) Changed() <-chan struct{} { return n.changed.Changed() }

// placement returns the registered nodes as placement reads them.
func (n *Nodes) placement() []scheduler.Node {
	reg := n.Registered()
	out := make([]scheduler.Node, len(reg))
	for i, r := range reg {
		out[i] = scheduler.Node{Name: r.Name, Labels: r.Labels, MaxMembers: r.MaxMembers, Ready: r.Herdr.Reachable}
	}
	return out
}

// Nodes returns the registered nodes and the lost ones, sorted by name, as
// last listed or watched. It never waits on etcd. Each has a Ready
// condition: True while its herdr answers, False (HerdrUnavailable) while
// it does not, False (NodeLost) for a node whose lease expired while
// members are still bound to it (shown as last registered), Unknown
// (EtcdUnavailable) while this node cannot read etcd and shows the nodes
// as last seen.
func (n *Nodes) Nodes() []v1alpha1.Node {
	etcdErr := n.inf.Unavailable()
	if etcdErr != nil {
		etcdErr = fmt.Errorf("etcd unavailable; keeping every object as last seen: %w", etcdErr)
	}
	counts := n.store.BoundCounts()
	n.mu.Lock()
	infos := n.registered
	lost := maps.Clone(n.lost)
	n.mu.Unlock()
	out := make([]v1alpha1.Node, 0, len(infos)+len(lost))
	for i := range infos {
		out = append(out, nodeOf(&infos[i], etcdErr))
	}
	for name, l := range lost {
		node := nodeOf(&l.last, etcdErr)
		node.Status.Members = counts[name]
		if etcdErr == nil {
			node.Status.Conditions[0] = v1alpha1.Condition{Type: v1alpha1.ConditionReady, Status: v1alpha1.ConditionFalse,
				Reason: v1alpha1.ReasonNodeLost, LastTransitionTime: l.since.UTC().Truncate(time.Second),
				Message: fmt.Sprintf("not registered since %s (its lease expired); %d members still bound to it", l.since.UTC().Format(time.RFC3339), counts[name])}
		}
		out = append(out, node)
	}
	slices.SortFunc(out, func(a, b v1alpha1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Node returns one node by name, as Nodes shows it.
func (n *Nodes) Node(name string) (v1alpha1.Node, bool) {
	for _, node := range n.Nodes() {
		if node.Name == name {
			return node, true
		}
	}
	return v1alpha1.Node{}, false
}

// nodeOf is the API's Node for a registration.
func nodeOf(info *NodeInfo, etcdErr error) v1alpha1.Node {
	started := info.StartedAt
	n := v1alpha1.Node{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNode},
		ObjectMeta: v1alpha1.ObjectMeta{Name: info.Name, Labels: maps.Clone(info.Labels), CreationTimestamp: &started},
		Spec:       v1alpha1.NodeSpec{MaxMembers: info.MaxMembers, GatewayURL: info.GatewayURL},
		Status:     v1alpha1.NodeStatus{Members: info.Members, Herdr: info.Herdr, FleetdVersion: info.Version},
	}
	since := started
	if info.Herdr.Since != nil {
		since = *info.Herdr.Since
	}
	ready := v1alpha1.Condition{Type: v1alpha1.ConditionReady, LastTransitionTime: since.UTC().Truncate(time.Second)}
	switch {
	case etcdErr != nil:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionUnknown, v1alpha1.ReasonEtcdUnavailable, "as last seen: "+etcdErr.Error()
	case info.Herdr.Reachable:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionTrue, v1alpha1.ReasonNodeReady, "registered; herdr answers"
	default:
		ready.Status, ready.Reason, ready.Message = v1alpha1.ConditionFalse, v1alpha1.ReasonHerdrUnavailable, "registered, but its herdr does not answer: the node creates and recreates nothing"
	}
	n.Status.Conditions = []v1alpha1.Condition{ready}
	return n
}
