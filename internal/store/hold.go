package store

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// The prune hold. A typo never tears down an agent (a source that stops
// decoding keeps its last good objects), and neither should one careless
// command: a manifests directory emptied, a file holding most of the fleet
// removed, a git checkout of another branch, an etcd prefix deleted by
// hand. A [Hold] sits between a backend and its [Published] snapshot and
// holds back every such mass removal: when one observed change — one scan
// of the directory, one watch response or list of etcd, or the first read
// after a restart, against what was in effect before it — removes more than
// half of the members in effect (and at least [MinPruneHold]) without an
// explicit delete (the backend tells which removals were: [Store.Delete],
// a member bound to another node), those members stay in the snapshot on
// their last definition, with the objects they reference, and are listed
// in [Snapshot.PruneHeld]. The controllers keep them running and say so.
//
// A hold ends for a member when its definition comes back (it then runs
// the new one), when it is deleted explicitly ([Hold.Release]), when the
// operator confirms the prune ([Hold.Confirm]: `fleetd prune --confirm`),
// or when it has lasted HoldOptions.Duration: a hold delays a prune, it
// does not veto it. A removal of fewer members passes at once, as does
// every removal while nothing was read yet.

// DefaultPruneHold is how long a held prune waits for confirmation before
// it goes ahead (`fleetd serve --prune-hold`).
const DefaultPruneHold = 2 * time.Minute

// MinPruneHold is the fewest members one change must remove, without
// explicit deletes, to be held.
const MinPruneHold = 3

// PruneHold is one held member: why, and until when.
type PruneHold struct {
	// Member is the member's name.
	Member string `json:"member"`
	// Source is where its definition was (a manifest file, an etcd key).
	Source string `json:"source,omitempty"`
	// Since is when the removal was observed; Until when the hold ends by
	// itself and the member is pruned.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Message says what happened and how to confirm, for a person.
	Message string `json:"message"`
}

// HoldOptions configure a [Hold]. nil means defaults.
type HoldOptions struct {
	// Duration is how long a held prune waits for confirmation; default
	// DefaultPruneHold.
	Duration time.Duration
	// Clock times the holds; default the wall clock.
	Clock clock.Clock
	// Logger receives a line when a prune is held and when a hold ends;
	// default slog.Default().
	Logger *slog.Logger
	// Baseline is what was in effect before the backend's first snapshot —
	// the desired state as this node last ran it, persisted by the backend
	// — so that a mass removal made while fleetd was stopped is held at
	// start like one made while it runs. nil: nothing (a first start).
	Baseline *Snapshot
	// Confirm is what an operator runs to confirm, for the messages;
	// default "fleetd prune --confirm".
	Confirm string
}

// Hold publishes a backend's snapshots with mass removals held back; see
// the package's prune hold notes above. The backend calls [Hold.Publish]
// instead of Published.Publish, and [Hold.Stop] when it stops.
type Hold struct {
	pub     *Published
	dur     time.Duration
	clock   clock.Clock
	log     *slog.Logger
	confirm string

	// mu serializes Publish, Confirm, Release and the expiry, each of which
	// computes and publishes the next snapshot; it is held for no I/O.
	mu      sync.Mutex
	in      *Snapshot // the backend's last snapshot; nil before the first
	prev    *Snapshot // the last synced snapshot published (or the baseline)
	held    map[string]*heldMember
	timer   clock.Timer
	stopped bool
}

// heldMember is a held member's last definition and the objects it
// references, kept for as long as the hold lasts.
type heldMember struct {
	PruneHold
	obj  *v1alpha1.Member
	refs map[Key]heldRef
}

type heldRef struct {
	obj    v1alpha1.Object
	source string
}

// NewHold returns a hold that publishes into pub.
func NewHold(pub *Published, opts *HoldOptions) *Hold {
	var o HoldOptions
	if opts != nil {
		o = *opts
	}
	h := &Hold{pub: pub, dur: cmp.Or(o.Duration, DefaultPruneHold), clock: cmp.Or[clock.Clock](o.Clock, clock.Real{}),
		log: cmp.Or(o.Logger, slog.Default()), confirm: cmp.Or(o.Confirm, "fleetd prune --confirm"),
		prev: o.Baseline, held: map[string]*heldMember{}}
	return h
}

// Publish publishes the backend's next snapshot, holding back a mass
// removal. explicit reports whether a member that next no longer holds was
// removed on purpose — deleted through the store, bound to another node —
// and is never held; nil means none was. A next that shows what the last
// one showed ([Snapshot] objects by pointer), while nothing is held, is
// not published again: the readers are not woken for nothing.
func (h *Hold) Publish(next *Snapshot, explicit func(name string) bool) {
	if explicit == nil {
		explicit = func(string) bool { return false }
	}
	h.mu.Lock()
	if len(h.held) == 0 && h.in != nil && next.sameAs(h.in) {
		// Nothing held and nothing to show: what is published stays, and
		// its readers sleep (a fleet's other nodes' changes reach here).
		h.in = next
		h.mu.Unlock()
		return
	}
	h.in = next
	var logs []func()
	if next.Synced {
		logs = h.observe(next, explicit)
	}
	h.publishLocked()
	h.mu.Unlock()
	for _, l := range logs {
		l()
	}
}

// observe ends the holds of members that came back or were deleted
// explicitly, and holds the members next removes when they are a mass
// removal. It returns the log lines to write once h.mu is released.
func (h *Hold) observe(next *Snapshot, explicit func(string) bool) (logs []func()) {
	var back []string
	for _, name := range slices.Sorted(maps.Keys(h.held)) {
		if _, ok := next.Members[name]; ok || explicit(name) {
			delete(h.held, name)
			back = append(back, name)
		}
	}
	if len(back) > 0 {
		logs = append(logs, func() {
			h.log.Info("held members defined again or deleted; their hold ended", "members", strings.Join(back, ","))
		})
	}
	if h.prev == nil {
		return logs
	}
	live := 0
	var gone []string
	for _, name := range slices.Sorted(maps.Keys(h.prev.Members)) {
		if _, held := h.held[name]; held {
			continue
		}
		live++
		if _, ok := next.Members[name]; !ok && !explicit(name) {
			gone = append(gone, name)
		}
	}
	if len(gone) < MinPruneHold || 2*len(gone) <= live {
		return logs
	}
	now := h.clock.Now()
	until := now.Add(h.dur)
	for _, name := range gone {
		m := h.prev.Members[name]
		source := h.prev.Sources[Key{Kind: v1alpha1.KindMember, Name: name}]
		hm := &heldMember{obj: m, refs: map[Key]heldRef{}, PruneHold: PruneHold{Member: name, Source: source, Since: now, Until: until,
			Message: fmt.Sprintf("its definition (%s) disappeared in one change together with %d of this node's %d members, without a delete through fleetd: "+
				"it keeps running on its last definition until the prune is confirmed (%s) or until %s, when the hold (%s) ends; define it again to keep it",
				cmp.Or(source, "unknown source"), len(gone), live, h.confirm, until.UTC().Format(time.RFC3339), h.dur)}}
		for _, ref := range m.References() {
			if obj := h.prev.Referenced(ref); obj != nil {
				k := Key{Kind: ref.Kind, Name: ref.Name}
				hm.refs[k] = heldRef{obj: obj, source: h.prev.Sources[k]}
			}
		}
		h.held[name] = hm
	}
	return append(logs, func() {
		h.log.Warn("prune held: the definitions of most members disappeared at once, without a delete through fleetd; they keep running",
			"members", strings.Join(gone, ","), "of", live, "until", until, "confirm", h.confirm)
	})
}

// publishLocked publishes the backend's snapshot with the held members in
// it, and times the next expiry. h.mu is held.
func (h *Hold) publishLocked() {
	if h.in == nil {
		return
	}
	out := h.in
	if len(h.held) > 0 {
		out = h.withHeld(h.in)
	}
	if out.Synced {
		h.prev = out
	}
	h.pub.Publish(out)
	h.scheduleLocked()
}

// withHeld is in with every held member and what it references (where in
// lacks them) put back.
func (h *Hold) withHeld(in *Snapshot) *Snapshot {
	out := *in
	out.Members, out.Profiles, out.Tenants, out.Sources = maps.Clone(in.Members), maps.Clone(in.Profiles), maps.Clone(in.Tenants), maps.Clone(in.Sources)
	out.PruneHeld = make(map[string]PruneHold, len(h.held))
	for name, hm := range h.held {
		out.Put(hm.obj, hm.Source)
		out.PruneHeld[name] = hm.PruneHold
		for k, r := range hm.refs {
			if cur, ok := in.Object(k); ok {
				hm.refs[k] = heldRef{obj: cur, source: in.Sources[k]} // the newest definition, should it go too
				continue
			}
			if _, ok := out.Object(k); !ok {
				out.Put(r.obj, r.source)
			}
		}
	}
	return &out
}

// scheduleLocked arms the timer for the earliest end of a hold. h.mu is
// held.
func (h *Hold) scheduleLocked() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if len(h.held) == 0 || h.stopped {
		return
	}
	var first time.Time
	for _, hm := range h.held {
		if first.IsZero() || hm.Until.Before(first) {
			first = hm.Until
		}
	}
	h.timer = h.clock.AfterFunc(max(first.Sub(h.clock.Now()), 0), h.expire)
}

// expire prunes the members whose hold has lasted its time.
func (h *Hold) expire() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	now := h.clock.Now()
	var ended []string
	for _, name := range slices.Sorted(maps.Keys(h.held)) {
		if !h.held[name].Until.After(now) {
			delete(h.held, name)
			ended = append(ended, name)
		}
	}
	h.publishLocked()
	h.mu.Unlock()
	if len(ended) > 0 {
		h.log.Warn("prune hold ended unconfirmed; pruning the held members", "members", strings.Join(ended, ","), "after", h.dur)
	}
}

// Confirm ends every hold: the held members are pruned now. It returns
// their names, sorted.
func (h *Hold) Confirm() []string {
	h.mu.Lock()
	names := slices.Sorted(maps.Keys(h.held))
	clear(h.held)
	if len(names) > 0 {
		h.publishLocked()
	}
	h.mu.Unlock()
	if len(names) > 0 {
		h.log.Info("prune confirmed; pruning the held members", "members", strings.Join(names, ","))
	}
	return names
}

// Release ends the hold of one member, deleted explicitly, and reports
// whether it was held: a backend's Delete of a member it no longer
// defines calls it.
func (h *Hold) Release(name string) bool {
	h.mu.Lock()
	_, ok := h.held[name]
	if ok {
		delete(h.held, name)
		h.publishLocked()
	}
	h.mu.Unlock()
	if ok {
		h.log.Info("held member deleted; pruning it", "member", name)
	}
	return ok
}

// Held returns the held members, sorted by name.
func (h *Hold) Held() []PruneHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]PruneHold, 0, len(h.held))
	for _, name := range slices.Sorted(maps.Keys(h.held)) {
		out = append(out, h.held[name].PruneHold)
	}
	return out
}

// Input returns the backend's last snapshot, before the hold: what its
// writes act on (a held member is not defined anywhere).
func (h *Hold) Input() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.in == nil {
		return NewSnapshot()
	}
	return h.in
}

// Stop stops the expiry timer; the holds stay as they are. The backend
// calls it when it stops.
func (h *Hold) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}
