package rollout

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// RecorderOptions configure a [Recorder]. nil means defaults.
type RecorderOptions struct {
	// Declared reports whether the desired state still declares an
	// object, for a history whose object left the snapshot: in a fleet on
	// etcd a member leaves a node's snapshot when it moves to another node
	// (which records it from then on), and only a member the whole fleet
	// no longer declares has its history deleted. nil: the snapshot is the
	// whole desired state (the directory store).
	Declared func(kind, name string) bool
	// Clock dates the revisions; default the wall clock.
	Clock clock.Clock
	// Logger receives a line per history that could not be written;
	// default slog.Default().
	Logger *slog.Logger
}

// Recorder keeps a [Store]'s histories in step with the desired state: it
// records each Profile's and Member's definition as a revision whenever
// the object changes (History.Record), clears a Profile's halt once the
// profile rolls out to a new [Target], and deletes the history of an
// object no longer declared. Nothing is deleted from a snapshot the store
// cannot vouch for (not read yet, its source unreadable, or stale).
type Recorder struct {
	src  store.Store
	revs Store
	o    RecorderOptions
	// prev is the snapshot last recorded (nil: none read yet); Sync and
	// then Run's goroutine alone use it.
	prev *store.Snapshot
}

// NewRecorder returns a Recorder of src's objects into revs.
func NewRecorder(src store.Store, revs Store, opts *RecorderOptions) *Recorder {
	r := &Recorder{src: src, revs: revs}
	if opts != nil {
		r.o = *opts
	}
	if r.o.Clock == nil {
		r.o.Clock = clock.Real{}
	}
	if r.o.Logger == nil {
		r.o.Logger = slog.Default()
	}
	return r
}

// Sync records the desired state as it is now, before Run: a fleetd
// that serves its first request after it lists every object's current
// revision. Call it from the goroutine that then calls Run.
func (r *Recorder) Sync() { r.prev = r.record(r.prev, r.src.Snapshot()) }

// Run records until ctx ends; it returns nil.
func (r *Recorder) Run(ctx context.Context) error {
	changes := r.src.Watch(ctx)
	for {
		r.Sync()
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		}
	}
}

// record records what changed from prev to next (everything when prev is
// nil) and returns what the next call compares with: next once it was
// read, nil before. The histories it changes are updated concurrently
// (each is another object's): a store that waits for the disk commits
// them together.
func (r *Recorder) record(prev, next *store.Snapshot) *store.Snapshot {
	if !next.Synced {
		return nil
	}
	var g errgroup.Group
	g.SetLimit(recordConcurrency)
	update := func(kind, name string, change func(*History) bool) {
		g.Go(func() error { r.update(kind, name, change); return nil })
	}
	defer g.Wait()
	now := r.o.Clock.Now()
	for name, p := range next.Profiles {
		if prev == nil || prev.Profiles[name] != p {
			update(v1alpha1.KindProfile, name, func(h *History) bool {
				changed := r.recorded(h, p, now)
				if h.Halt != nil && h.Halt.Target != Target(p) {
					h.Halt, changed = nil, true // the halt stopped an earlier rollout
				}
				return changed
			})
		}
	}
	for name, m := range next.Members {
		if prev == nil || prev.Members[name] != m {
			update(v1alpha1.KindMember, name, func(h *History) bool { return r.recorded(h, m, now) })
		}
	}
	if next.Unreadable != nil || next.Stale != nil {
		return next // the objects are the last read: nothing is known gone
	}
	for _, kind := range []string{v1alpha1.KindProfile, v1alpha1.KindMember} {
		for _, name := range r.gone(kind, prev, next) {
			update(kind, name, func(h *History) bool {
				*h = History{}
				return true
			})
		}
	}
	return next
}

// recordConcurrency bounds the histories one record updates at once.
const recordConcurrency = 64

// recorded records obj in h; an object that cannot be encoded (never) is
// logged and changes nothing.
func (r *Recorder) recorded(h *History, obj v1alpha1.Object, now time.Time) bool {
	changed, err := h.Record(obj, now)
	if err != nil {
		r.o.Logger.Warn("could not record a revision", "kind", obj.GetObjectKind(), "name", obj.GetName(), "err", err)
	}
	return changed
}

// gone lists the objects of kind that have a history (or were in prev)
// and that the desired state no longer declares.
func (r *Recorder) gone(kind string, prev, next *store.Snapshot) []string {
	names := r.revs.Names(kind)
	if prev != nil {
		for _, o := range prev.List(kind) {
			names = append(names, o.GetName())
		}
	}
	slices.Sort(names)
	var out []string
	for _, name := range slices.Compact(names) {
		if _, ok := next.Object(store.Key{Kind: kind, Name: name}); ok {
			continue
		}
		if r.o.Declared != nil && r.o.Declared(kind, name) {
			continue
		}
		if !r.revs.Get(kind, name).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

func (r *Recorder) update(kind, name string, change func(*History) bool) {
	if err := r.revs.Update(kind, name, change); err != nil {
		r.o.Logger.Warn("could not keep a revision history", "kind", kind, "name", name, "err", err)
	}
}
