package fleet

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Bounds on the messaging state a node publishes of one member: enough
// for bridge_status, never the size of a conversation.
const (
	maxPublishedTurns     = 16
	maxPublishedUncertain = 8
	maxPublishedText      = 1024 // a question, a reason
)

// LocalMembers is what the fleet reads of this node's own members: the
// controllers, status included (controllers.Manager).
type LocalMembers interface {
	Changed() <-chan struct{}
	Members() []v1alpha1.Member
	Member(name string) (v1alpha1.Member, bool)
	MemberEvents(name string) []v1alpha1.Event
}

// WorkerStatuses is the messaging core as the status publisher reads it
// (*messaging.Core).
type WorkerStatuses interface {
	Status(name string) messaging.WorkerStatus
	Changed() <-chan struct{}
}

// LocalStatuses is what this node publishes ([StatusSource]): the status of
// each member its controllers run, with the core's messaging state of it.
type LocalStatuses struct {
	local   LocalMembers
	core    WorkerStatuses
	changed notify.Signal // fed by Run
}

// NewLocalStatuses returns the statuses of local's members, with core's
// messaging state; Changed needs Run.
func NewLocalStatuses(local LocalMembers, core WorkerStatuses) *LocalStatuses {
	return &LocalStatuses{local: local, core: core}
}

// Run follows the controllers and the core for Changed until ctx ends.
func (s *LocalStatuses) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.changed.Forward(ctx, s.local) })
	wg.Go(func() { s.changed.Forward(ctx, s.core) })
	wg.Wait()
}

// Changed is closed at the next change of the controllers' members or of
// the core's state. It needs Run.
func (s *LocalStatuses) Changed() <-chan struct{} { return s.changed.Changed() }

// Statuses returns the status of every member the controllers run.
func (s *LocalStatuses) Statuses() map[string]PublishedStatus {
	out := map[string]PublishedStatus{}
	for _, m := range s.local.Members() {
		if m.Status.PaneID == "" && m.Status.Phase == "" {
			continue // not reconciled yet: nothing this node knows to tell
		}
		st := m.Status
		st.NodeName = ""
		out[m.Name] = PublishedStatus{MemberUID: m.UID, Status: st, Worker: encodeWorker(s.core.Status(m.Name))}
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
