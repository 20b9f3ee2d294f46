package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// Status across nodes: each node publishes the status of the members it
// runs (the controllers' status and the messaging core's), and reads every
// other node's from the store's watch (fleetView).

// Bounds on the messaging state a node publishes of one member: enough
// for bridge_status, never the size of a conversation.
const (
	maxPublishedTurns     = 16
	maxPublishedUncertain = 8
	maxPublishedText      = 1024 // a question, a reason
)

// workerStatuses is the messaging core as the status publisher reads it.
type workerStatuses interface {
	Status(name string) messaging.WorkerStatus
	Changed() <-chan struct{}
}

// statusSource is what this node publishes: the status of each member its
// controllers run, with the core's messaging state of it.
type statusSource struct {
	local   localMembers
	core    workerStatuses
	changes *changes
}

func newStatusSource(local localMembers, core workerStatuses) *statusSource {
	return &statusSource{local: local, core: core, changes: newChanges(local.Changed, core.Changed)}
}

func (s *statusSource) Changed() <-chan struct{} { return s.changes.Changed() }

func (s *statusSource) Statuses() map[string]etcdstore.PublishedStatus {
	out := map[string]etcdstore.PublishedStatus{}
	for _, m := range s.local.Members() {
		if m.Status.PaneID == "" && m.Status.Phase == "" {
			continue // not reconciled yet: nothing this node knows to tell
		}
		st := m.Status
		st.NodeName = ""
		out[m.Name] = etcdstore.PublishedStatus{MemberUID: m.UID, Status: st, Worker: encodeWorker(s.core.Status(m.Name))}
	}
	return out
}

// encodeWorker is a worker's messaging state as published: bounded, the
// most recent turns and uncertain deliveries kept.
func encodeWorker(w messaging.WorkerStatus) json.RawMessage {
	w.Worker = ""
	w.GoneReason = clip(w.GoneReason)
	if len(w.OpenTurns) > maxPublishedTurns {
		w.OpenTurns = w.OpenTurns[len(w.OpenTurns)-maxPublishedTurns:]
	}
	w.OpenTurns = slices.Clone(w.OpenTurns)
	for i := range w.OpenTurns {
		w.OpenTurns[i].Question = clip(w.OpenTurns[i].Question)
	}
	if len(w.Uncertain) > maxPublishedUncertain {
		w.Uncertain = w.Uncertain[len(w.Uncertain)-maxPublishedUncertain:]
	}
	w.Uncertain = slices.Clone(w.Uncertain)
	for i := range w.Uncertain {
		w.Uncertain[i].Reason = clip(w.Uncertain[i].Reason)
	}
	if w.LastDelivery != nil {
		d := *w.LastDelivery
		d.Reason = clip(d.Reason)
		w.LastDelivery = &d
	}
	b, _ := json.Marshal(w)
	return b
}

func decodeWorker(raw json.RawMessage) (messaging.WorkerStatus, error) {
	var w messaging.WorkerStatus
	err := json.Unmarshal(raw, &w)
	return w, err
}

// clip cuts s to maxPublishedText bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxPublishedText {
		return s
	}
	cut := maxPublishedText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// runFleet runs what a node on etcd does for the fleet besides reconciling
// its own members, until ctx ends: the fleet view's change feed, the
// publisher of its members' status, and following the fleet's primary
// token.
func runFleet(ctx context.Context, view *fleetView, cli *clientv3.Client, st *etcdstore.Store, local localMembers, core workerStatuses,
	etcd *EtcdConfig, toks *tokens.Registry, log *slog.Logger) error {
	src := newStatusSource(local, core)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { view.Run(ctx); return nil })
	g.Go(func() error { src.changes.Run(ctx); return nil })
	g.Go(func() error {
		return etcdstore.PublishStatuses(ctx, cli.KV, st, src, &etcdstore.StatusPublisherOptions{Node: etcd.Node, RequestTimeout: etcd.RequestTimeout, Logger: log})
	})
	g.Go(func() error { followFleetToken(ctx, st, toks, log); return nil })
	return g.Wait()
}

// nodeName is this fleetd's node name on etcd; "" with the directory store.
func nodeName(cfg Config) string {
	if cfg.Etcd == nil {
		return ""
	}
	return cfg.Etcd.Node
}
