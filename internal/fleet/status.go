package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/etcd/informer"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Member status across nodes. Each node publishes the live status of the
// members it runs at PREFIX/status/MEMBER (a [PublishedStatus], written by
// [PublishStatuses] only when it changes); every node reads those keys
// with an informer and serves them from memory ([Statuses.Status]).
// Whether a reader believes a record is its business: the record names its
// publisher and the binding revision it was published under, so that a
// stale one (from a node that no longer runs the member, or ran it under
// an older binding) is recognisable ([Fleet.BoundStatus]).

// DefaultMaxStatusBytes bounds one published status, written or read.
const DefaultMaxStatusBytes = 16 << 10

// PublishedStatus is the value at PREFIX/status/MEMBER: what the node that
// runs a member knows of it. It holds no token or credential: a member's
// status and its messaging state (delivery and turn bookkeeping, which
// names messages by id; a turn's pending question is its only text).
type PublishedStatus struct {
	// Node is the publisher: the node that runs the member.
	Node string `json:"node"`
	// MemberUID is the uid of the member the status is of.
	MemberUID string `json:"memberUID"`
	// BindingRevision is the mod revision of the member's binding the
	// publisher saw when it published.
	BindingRevision int64 `json:"bindingRevision"`
	// Status is the member's status on its node.
	Status v1alpha1.MemberStatus `json:"status"`
	// Worker is the member's messaging state on its node (the messaging
	// core's status of it, as JSON).
	Worker json.RawMessage `json:"worker,omitempty"`
}

// statusKey is the key of a member's published status in a fleet under
// prefix.
func statusKey(prefix, member string) string { return prefix + "/status/" + member }

// Statuses are the member statuses every node publishes, as this node
// reads them: PREFIX/status/MEMBER, from an informer.
type Statuses struct {
	inf    *informer.Informer[*PublishedStatus] // a nil value does not decode
	prefix string
	o      Options
}

// NewStatuses returns the published statuses as read through cli; nothing
// is read until Sync or Run.
func NewStatuses(cli *clientv3.Client, opts *Options) *Statuses {
	o := opts.withDefaults()
	s := &Statuses{prefix: o.Prefix, o: o}
	s.inf = informer.New(informer.Options[*PublishedStatus]{
		Client: cli, Prefix: statusKey(o.Prefix, ""), Name: "member statuses", Decode: s.decode,
		RequestTimeout: o.RequestTimeout, RetryInterval: o.RetryInterval, Clock: o.Clock, Logger: o.Logger,
	})
	return s
}

// Sync reads the statuses once, before Run.
func (s *Statuses) Sync(ctx context.Context) error { return s.inf.Sync(ctx) }

// Run follows the statuses until ctx ends; it returns nil.
func (s *Statuses) Run(ctx context.Context) error { return s.inf.Run(ctx) }

// Changed returns a channel closed at the next change of the statuses.
func (s *Statuses) Changed() <-chan struct{} { return s.inf.Changed() }

// signal is the change signal, for those that follow it.
func (s *Statuses) signal() *notify.Signal { return s.inf.Signal() }

// decode decodes a published status; ok is false for a key below one. A
// value over the size limit, that does not decode or names no node is
// logged and shows nothing (nil).
func (s *Statuses) decode(kv *mvccpb.KeyValue, _ *PublishedStatus, _ bool) (*PublishedStatus, bool) {
	key := string(kv.Key)
	if name := strings.TrimPrefix(key, statusKey(s.prefix, "")); name == "" || strings.Contains(name, "/") {
		return nil, false
	}
	st, err := decodePublished(kv.Value)
	if err != nil {
		s.o.Logger.Error("etcd holds a member status that does not decode; it is not shown", "key", key, "err", err)
		return nil, true
	}
	return st, true
}

func decodePublished(value []byte) (*PublishedStatus, error) {
	if len(value) > DefaultMaxStatusBytes {
		return nil, fmt.Errorf("%d bytes, over the limit of %d", len(value), DefaultMaxStatusBytes)
	}
	var st PublishedStatus
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if err := CheckNodeName(st.Node); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if st.MemberUID == "" {
		return nil, fmt.Errorf("no memberUID")
	}
	return &st, nil
}

// Status returns the status published for a member, as last listed or
// watched. It never waits on etcd. The caller decides whether to believe
// it ([Fleet.BoundStatus]).
func (s *Statuses) Status(member string) (PublishedStatus, bool) {
	it, ok := s.inf.Get(statusKey(s.prefix, member))
	if !ok || it.Value == nil {
		return PublishedStatus{}, false
	}
	return *it.Value, true
}

// published returns the statuses that decode, by member name, with their
// keys' mod revisions.
func (s *Statuses) published() map[string]informer.Item[*PublishedStatus] {
	out := map[string]informer.Item[*PublishedStatus]{}
	for k, it := range s.inf.Items() {
		if it.Value != nil {
			out[strings.TrimPrefix(k, statusKey(s.prefix, ""))] = it
		}
	}
	return out
}

// publishedBy returns the members whose published status names node, with
// their keys' mod revisions.
func (s *Statuses) publishedBy(node string) map[string]int64 {
	out := map[string]int64{}
	for k, it := range s.inf.Items() { // every member's: no copy of them
		if it.Value != nil && it.Value.Node == node {
			out[strings.TrimPrefix(k, statusKey(s.prefix, ""))] = it.ModRevision
		}
	}
	return out
}
