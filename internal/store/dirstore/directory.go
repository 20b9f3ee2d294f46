package dirstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sync/errgroup"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// Defaults for Options.
const (
	DefaultDebounce      = 100 * time.Millisecond
	DefaultRetryInterval = 2 * time.Second
)

// maxBurst bounds a burst of file events, in debounces: events that keep
// coming are read at least this often.
const maxBurst = 10

// Options configure a Directory. nil means defaults.
type Options struct {
	// StateDir is the state directory where object metadata (uid,
	// generation) persists, in the file package statedir names; "" keeps
	// it in memory only.
	StateDir string
	// Clock drives debouncing and retries; default the wall clock.
	Clock clock.Clock
	// Debounce is the quiet that ends a burst of file events: the
	// directory is read again once no event came for Debounce (or the
	// burst has lasted ten of them); default DefaultDebounce.
	Debounce time.Duration
	// RetryInterval is how often an unreadable or unwatchable directory is
	// tried again; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Logger receives one line per change of the manifest errors or of the
	// directory's readability; default slog.Default().
	Logger *slog.Logger
	// MaxFileBytes is the size limit on one manifest file; a larger file is
	// skipped with an error ([decode.ReadManifest]). 0 means
	// decode.DefaultMaxManifestBytes.
	MaxFileBytes int64
	// PruneHold is how long a mass removal of members waits for
	// confirmation (store.Hold); 0 means store.DefaultPruneHold.
	PruneHold time.Duration
	// Rescan, if set, replaces the fsnotify watch: Run reads the directory
	// again (after Debounce) whenever a value arrives, and every
	// RetryInterval while it is unreadable; nothing else is noticed. It is
	// for tests under testing/synctest, where the watcher's blocking inotify
	// read would keep virtual time from moving: write the files, then nudge.
	Rescan <-chan struct{}
}

// Directory is the store.Store backed by a manifests directory.
//
// Two locks keep file-system calls away from readers. sem serializes
// everything that touches the directory — a scan, Apply, Delete — and is
// held across their file-system calls (each of them bounded: see
// [decode.ReadManifest]). The published snapshot ([store.Published]) has a
// lock of its own, held only to read or swap a pointer, never across a
// file-system call or a log line, so Snapshot, Get, List and Watch — what
// request handlers call — never wait on the disk.
type Directory struct {
	store.Published // replaced by hold
	hold            *store.Hold

	dir      string
	clock    clock.Clock
	debounce time.Duration
	retry    time.Duration
	log      *slog.Logger
	nudge    <-chan struct{} // Options.Rescan: no fsnotify watch when set
	maxBytes int64
	read     func(path string, limit int64) ([]byte, error) // decode.ReadManifest; tests wrap it

	sem chan struct{} // capacity 1: held by a scan, Apply or Delete
	// files are the manifest files, in path order (the order
	// decode.ManifestPaths lists them in). A thousand members' files are
	// kept in one slice, not one allocation each behind a map. sem.
	files []fileState
	meta  *metaBook // sem
	// deleted are the members Delete removed since the last scan: removed
	// on purpose, never held. sem.
	deleted map[string]bool

	mu      sync.Mutex
	scans   int           // completed scans, for tests; mu
	scanned chan struct{} // tests: signalled (coalesced) after every scan, if set
}

// location is where an object in effect is written: Objects[i] of a file's
// last good result.
type location struct {
	file decode.FileResult
	i    int
}

// fileState is what the store knows about one manifest file.
type fileState struct {
	hash [32]byte
	// res is the file as the store holds it: its Path; the Objects of its
	// last good content, with their positions — an object in effect is
	// the snapshot's (stamped, never changed), not its decoded copy
	// (build); and the Errors of its current content, none when that is
	// the good one. Errors never take the objects away.
	res decode.FileResult
}

// file returns the state of the file at path; nil when the store has
// none. It only reads d.files; d.sem must be held.
func (d *Directory) file(path string) *fileState {
	i := sort.Search(len(d.files), func(i int) bool { return d.files[i].res.Path >= path })
	if i < len(d.files) && d.files[i].res.Path == path {
		return &d.files[i]
	}
	return nil
}

var _ store.Store = (*Directory)(nil)

// New returns a Directory for dir and reads it once. A directory
// that cannot be read is not an error here: the snapshot reports it in
// Unreadable and Run keeps trying.
func New(dir string, opts *Options) (*Directory, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = decode.DefaultMaxManifestBytes
	}
	meta, err := loadMeta(o.StateDir)
	if err != nil {
		return nil, err
	}
	d := &Directory{
		dir:      filepath.Clean(dir),
		clock:    o.Clock,
		debounce: o.Debounce,
		retry:    o.RetryInterval,
		log:      o.Logger,
		nudge:    o.Rescan,
		maxBytes: o.MaxFileBytes,
		read:     decode.ReadManifest,
		sem:      make(chan struct{}, 1),
		meta:     meta,
		deleted:  map[string]bool{},
	}
	hold := &store.HoldOptions{Duration: o.PruneHold, Clock: o.Clock, Logger: o.Logger}
	if o.StateDir != "" {
		hold.Baseline = meta.baseline()
	}
	d.hold = store.NewHold(&d.Published, hold)
	d.rescan(context.Background())
	return d, nil
}

// lock takes sem, the right to touch the directory, or fails when ctx ends
// first.
func (d *Directory) lock(ctx context.Context) error {
	select {
	case d.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Directory) unlock() { <-d.sem }

// Path returns the manifests directory.
func (d *Directory) Path() string { return d.dir }

// PruneHold returns the store's prune hold: what it holds, and its
// confirmation.
func (d *Directory) PruneHold() *store.Hold { return d.hold }

// Run watches the directory (or, with Options.Rescan, waits for
// nudges) until ctx ends. It returns nil on cancellation and an error only
// if fsnotify itself cannot be used.
func (d *Directory) Run(ctx context.Context) error {
	defer d.hold.Stop()
	var w *fsnotify.Watcher
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	watching := true // with nudges there is no watch to lose
	if d.nudge == nil {
		var err error
		if w, err = fsnotify.NewWatcher(); err != nil {
			return fmt.Errorf("watch manifests %s: %w", d.dir, err)
		}
		defer w.Close()
		events, watchErrs = w.Events, w.Errors
		parent := filepath.Dir(d.dir)
		if err := w.Add(parent); err != nil {
			d.log.Warn("cannot watch the manifests directory's parent; retrying periodically", "dir", parent, "err", err)
		}
		watching = d.addWatch(w)
	}
	d.rescan(ctx)

	var debounce, retry clock.Timer
	var debounceC, retryC <-chan time.Time
	defer func() {
		for _, t := range []clock.Timer{debounce, retry} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	// A burst of changes is over once none came for Debounce (a checkout,
	// an rm of many files, a slow disk: one read sees them all, and the
	// prune hold judges them as one change), or once it has lasted
	// maxBurst debounces (a writer that never stops is still read).
	var burst time.Time      // when the burst being collected began
	debounceSoon := func() { // read again once a burst of changes is over
		now := d.clock.Now()
		if debounce == nil {
			burst = now
		} else if now.Sub(burst) < maxBurst*d.debounce && debounce.Stop() {
			debounce = nil
		}
		if debounce == nil {
			debounce = d.clock.NewTimer(d.debounce)
			debounceC = debounce.C()
		}
	}
	for {
		if retry == nil && (!watching || d.Snapshot().Unreadable != nil) {
			retry = d.clock.NewTimer(d.retry)
			retryC = retry.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.nudge:
			debounceSoon()
		case ev, ok := <-events:
			if !ok {
				return fmt.Errorf("watch manifests %s: watcher closed", d.dir)
			}
			if filepath.Clean(ev.Name) == d.dir {
				// The directory itself moved, vanished or came back: watch
				// it afresh on the next scan.
				_ = w.Remove(d.dir)
				watching = false
			} else if filepath.Dir(ev.Name) != d.dir || !decode.IsManifestFile(ev.Name) {
				continue
			}
			debounceSoon()
		case err, ok := <-watchErrs:
			if !ok {
				return fmt.Errorf("watch manifests %s: watcher closed", d.dir)
			}
			// Typically an event-queue overflow: events were lost, read again.
			d.log.Warn("manifest watcher error; reading the directory again", "dir", d.dir, "err", err)
			debounceSoon()
		case <-debounceC:
			debounce, debounceC = nil, nil
			if !watching {
				watching = d.addWatch(w)
			}
			d.rescan(ctx)
		case <-retryC:
			retry, retryC = nil, nil
			if !watching {
				watching = d.addWatch(w)
			}
			d.rescan(ctx)
		}
	}
}

// addWatch (re)adds the inotify watch on the directory.
func (d *Directory) addWatch(w *fsnotify.Watcher) bool {
	_ = w.Remove(d.dir)
	return w.Add(d.dir) == nil
}

// rescan reads the directory (see scan) and counts the read; it does
// nothing if ctx ends before the directory is free.
func (d *Directory) rescan(ctx context.Context) {
	if d.lock(ctx) != nil {
		return
	}
	d.scan()
	d.unlock()
	d.mu.Lock()
	d.scans++
	d.mu.Unlock()
	if d.scanned != nil {
		select {
		case d.scanned <- struct{}{}:
		default:
		}
	}
}

// scan reads the directory and publishes a new snapshot if anything
// changed. d.sem must be held. Each file is read the way `fleetd validate`
// reads it ([decode.ReadManifest]): a file it refuses keeps its last good
// objects, like a file that stops parsing, and reports why — also the first
// time this process reads it: its last good objects are then the ones the
// state directory recorded.
func (d *Directory) scan() {
	defer clear(d.deleted)
	paths, err := decode.ManifestPaths(d.dir)
	if err != nil {
		if prev := d.hold.Input(); prev.Unreadable == nil || prev.Unreadable.Error() != err.Error() {
			d.log.Error("manifests directory unreadable; keeping every object as last read", "dir", d.dir, "err", err)
			next := *prev
			next.Unreadable = err
			d.publish(&next)
		}
		return
	}
	// changed is whether the snapshot could differ from the last one
	// built: it is rebuilt only then, since building it stamps and
	// compares every object (megabytes of garbage for a large fleet, for
	// nothing when no file changed, as at Run's first read right after
	// New's).
	prev := d.hold.Input()
	changed := !prev.Synced || prev.Unreadable != nil
	// files are the states of the files listed, in their order; known
	// counts those read before, so that one removed since is noticed.
	files := make([]fileState, 0, len(paths))
	known := 0
	var recorded map[string][]string // the records' keys by file, once a new file needs them
	for i, r := range d.readAll(paths) {
		path := paths[i]
		if r.missing {
			continue // removed since it was listed
		}
		var st fileState
		if old := d.file(path); old != nil {
			st = *old
			known++
		} else {
			if recorded == nil {
				recorded = d.meta.keysBySource()
			}
			st = fileState{res: d.meta.lastGood(path, recorded[path])}
			changed = true
		}
		switch {
		case r.err != nil:
			st.hash = [32]byte{}
			st.res.Errors = decode.ErrorList{decode.AsError(path, r.err)}
			changed = true
		case r.res == nil: // as it was last read
		case len(r.res.Errors) > 0:
			st.hash = r.hash
			st.res.Errors = r.res.Errors // keep the last good objects
			changed = true
		default:
			st.hash = r.hash
			st.res = *r.res
			changed = true
		}
		files = append(files, st)
	}
	changed = changed || known < len(d.files)
	d.files = files
	if changed {
		d.publish(d.build())
	}
	d.saveMeta() // also retries a save that failed
}

// fileRead is what readAll found of one manifest file.
type fileRead struct {
	missing bool  // removed since it was listed
	err     error // it could not be read
	hash    [32]byte
	// res is the file decoded; nil when its content is the one last read
	// (the hash of d.files).
	res *decode.FileResult
}

// readAll reads, hashes and decodes the files of paths that changed since
// they were last read, the ith in the ith result, on as many goroutines as
// the process has processors: a thousand members' files are read and
// decoded before fleetd creates a pane, and nothing else runs then. It only
// reads d.files; d.sem must be held.
func (d *Directory) readAll(paths []string) []fileRead {
	out := make([]fileRead, len(paths))
	one := func(i int) {
		data, err := d.read(paths[i], d.maxBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out[i].missing = true
			return
		case err != nil:
			out[i].err = err
			return
		}
		h := sha256.Sum256(data)
		out[i].hash = h
		if st := d.file(paths[i]); st != nil && st.hash == h {
			return
		}
		res := decode.Manifest(paths[i], data)
		out[i].res = &res
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range paths {
		g.Go(func() error { one(i); return nil })
	}
	g.Wait() // one reports in out, never an error
	return out
}

// saveMeta persists the records of the objects in effect — held members
// and what they reference too — and forgets the others. d.sem must be
// held.
func (d *Directory) saveMeta() {
	d.meta.retain(d.Snapshot())
	if err := d.meta.save(); err != nil {
		d.log.Error("cannot persist object metadata; generations may be renumbered after a restart", "err", err)
	}
}

// build assembles a snapshot from the files, reusing the previous
// snapshot's pointer for every object whose content did not change.
//
// An object defined more than once (in one file or in several) is an
// error, reported the decoder's way ([decode.CheckDuplicates]: on the
// later definition, naming the earlier one's file and line), and neither
// definition takes effect — as in `fleetd validate`. What stays in effect
// is the object's last good definition, exactly as for a file that stops
// parsing: the object of the previous snapshot or, right after a restart,
// the copy whose spec is the one the state directory last recorded. So a
// second copy of a running member's file never tears the member down;
// deleting either copy ends the error.
func (d *Directory) build() *store.Snapshot {
	prev := d.Snapshot()
	next := store.NewSnapshot()
	next.Synced = true
	files := make([]decode.FileResult, 0, len(d.files))
	defs := make(map[store.Key]int, len(prev.Sources))
	dup := false
	for _, st := range d.files {
		next.Errors = append(next.Errors, st.res.Errors...)
		f := st.res
		f.Errors = nil // the checks below judge the objects in effect
		files = append(files, f)
		for _, obj := range f.Objects {
			key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
			defs[key]++
			dup = dup || defs[key] > 1
		}
	}
	if dup {
		next.Errors = append(next.Errors, decode.CheckDuplicates(files)...)
		next.Errors.Sort()
	}

	now := d.clock.Now()
	put := func(_ store.Key, obj v1alpha1.Object, at location) {
		next.Put(obj, at.file.Path)
		d.meta.keep(obj, at.file.Path)
	}
	// refs are the Members in effect, where they are written, for the
	// reference check: whole files where nothing is duplicated.
	refs := make([]decode.FileResult, 0, len(files))
	for _, f := range files {
		whole := true
		for i, obj := range f.Objects {
			key := store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}
			at := location{f, i}
			switch n := defs[key]; {
			case n < 0:
				whole = false
				continue // a duplicate already settled
			case n > 1:
				whole = false
				defs[key] = -1
				if last, ok := prev.Object(key); ok {
					if was, ok := copyIn(files, key, prev.Sources[key]); ok {
						at = was
					} // else its file no longer defines it: point at this copy
					put(key, last, at)
					refs = append(refs, inEffect(at, last))
					continue
				}
				copyAt, ok := d.recordedCopy(files, key)
				if !ok {
					continue
				}
				at, obj = copyAt, copyAt.file.Objects[copyAt.i]
			}
			obj = obj.(interface{ DeepCopyObject() v1alpha1.Object }).DeepCopyObject()
			d.meta.stamp(obj, now)
			if last, ok := prev.Object(key); ok && sameObject(last, obj) {
				obj = last
			}
			put(key, obj, at)
			// The file's last good objects keep the object in effect in
			// place of the decoded one: stamped again, it is the same, and
			// each object is kept once, not twice.
			at.file.Objects[at.i] = obj
			if n := defs[key]; n < 0 {
				refs = append(refs, inEffect(at, obj))
			}
		}
		if whole {
			refs = append(refs, f)
		} else {
			for i, obj := range f.Objects {
				if defs[store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}] == 1 {
					refs = append(refs, f.Only(i))
				}
			}
		}
	}
	next.Unresolved = decode.CheckReferences(refs, func(kind, name string) bool {
		_, ok := next.Object(store.Key{Kind: kind, Name: name})
		return ok
	}, d.dir)
	next.Unresolved = append(next.Unresolved, decode.CheckWorktrees(refs, func(name string) *v1alpha1.Profile { return next.Profiles[name] })...)
	next.Unresolved.Sort()
	return next
}

// copyIn returns where the file at path defines key.
func copyIn(files []decode.FileResult, key store.Key, path string) (location, bool) {
	for _, f := range files {
		if f.Path != path {
			continue
		}
		for i, obj := range f.Objects {
			if (store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}) == key {
				return location{f, i}, true
			}
		}
	}
	return location{}, false
}

// inEffect is the object in effect, alone with the positions of the
// definition at. For a duplicate's last good definition those are the
// current copy's in the same file, which an edit may have moved.
func inEffect(at location, obj v1alpha1.Object) decode.FileResult {
	f := at.file.Only(at.i)
	f.Objects[0] = obj
	return f
}

// recordedCopy returns where the first definition
// of key whose spec is the one the state directory recorded as key's last
// good spec — the copy that was in effect before fleetd restarted.
func (d *Directory) recordedCopy(files []decode.FileResult, key store.Key) (location, bool) {
	rec, ok := d.meta.lookup(key)
	if !ok {
		return location{}, false
	}
	for _, f := range files {
		for i, obj := range f.Objects {
			if (store.Key{Kind: obj.GetObjectKind(), Name: obj.GetName()}) == key && specHash(obj) == rec.SpecHash {
				return location{f, i}, true
			}
		}
	}
	return location{}, false
}

// publish installs next through the prune hold if it differs from the
// last snapshot read, logs changed manifest errors and signals watchers.
// d.sem must be held.
func (d *Directory) publish(next *store.Snapshot) {
	prev := d.hold.Input()
	if sameSnapshot(prev, next) {
		return
	}
	if prev.Unreadable != nil && next.Unreadable == nil {
		d.log.Info("manifests directory readable again", "dir", d.dir)
	}
	old := map[string]bool{}
	for _, e := range prev.Errors {
		old[e.Error()] = true
	}
	for _, e := range next.Errors {
		if !old[e.Error()] {
			attrs := []any{"file", e.File}
			if e.Line > 0 { // a whole-file problem (unreadable, not a regular file) has no line
				attrs = append(attrs, "line", e.Line)
			}
			d.log.Error("manifest error; the file's last good objects stay in effect", append(attrs, "err", e.Error())...)
		}
	}
	if len(prev.Errors) > 0 && len(next.Errors) == 0 {
		d.log.Info("manifest errors cleared", "dir", d.dir)
	}
	old = map[string]bool{}
	for _, e := range prev.Unresolved {
		old[e.Error()] = true
	}
	for _, e := range next.Unresolved {
		if !old[e.Error()] {
			d.log.Warn("member references an object that is not defined; it waits at Ready=False", "file", e.File, "line", e.Line, "err", e.Error())
		}
	}
	d.hold.Publish(next, func(name string) bool { return d.deleted[name] })
}

func sameSnapshot(a, b *store.Snapshot) bool {
	if a.Synced != b.Synced || (a.Unreadable == nil) != (b.Unreadable == nil) ||
		(a.Unreadable != nil && a.Unreadable.Error() != b.Unreadable.Error()) {
		return false
	}
	if !sameErrors(a.Errors, b.Errors) || !sameErrors(a.Unresolved, b.Unresolved) || len(a.Sources) != len(b.Sources) {
		return false
	}
	for k, p := range a.Sources {
		if b.Sources[k] != p {
			return false
		}
	}
	return sameMap(a.Members, b.Members) && sameMap(a.Profiles, b.Profiles) && sameMap(a.Tenants, b.Tenants)
}

func sameErrors(a, b decode.ErrorList) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Error() != b[i].Error() {
			return false
		}
	}
	return true
}

func sameMap[T comparable](a, b map[string]T) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
