package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Defaults for DirectoryOptions.
const (
	DefaultDebounce      = 100 * time.Millisecond
	DefaultRetryInterval = 2 * time.Second
)

// DirectoryOptions configure a Directory. nil means defaults.
type DirectoryOptions struct {
	// StateDir is the state directory where object metadata (uid,
	// generation) persists, in the file package statedir names; "" keeps
	// it in memory only.
	StateDir string
	// Clock drives debouncing and retries; default the wall clock.
	Clock clock.Clock
	// Debounce is how long a burst of file events is collected before the
	// directory is read again; default DefaultDebounce.
	Debounce time.Duration
	// RetryInterval is how often an unreadable or unwatchable directory is
	// tried again; default DefaultRetryInterval.
	RetryInterval time.Duration
	// Logger receives one line per change of the manifest errors or of the
	// directory's readability; default slog.Default().
	Logger *slog.Logger
	// Rescan, if set, replaces the fsnotify watch: Run reads the directory
	// again (after Debounce) whenever a value arrives, and every
	// RetryInterval while it is unreadable; nothing else is noticed. It is
	// for tests under testing/synctest, where the watcher's blocking inotify
	// read would keep virtual time from moving: write the files, then nudge.
	Rescan <-chan struct{}
}

// Directory is the Store backed by a manifests directory.
type Directory struct {
	dir      string
	clock    clock.Clock
	debounce time.Duration
	retry    time.Duration
	log      *slog.Logger
	nudge    <-chan struct{} // Options.Rescan: no fsnotify watch when set

	mu       sync.Mutex
	files    map[string]*fileState // by path
	meta     *metaBook
	snap     *Snapshot
	watchers map[chan struct{}]struct{}

	scans   int           // completed scans, for tests
	scanned chan struct{} // tests: signalled (coalesced) after every scan, if set
}

// fileState is what the store knows about one manifest file.
type fileState struct {
	hash    [32]byte
	objects []v1alpha1.Object // the last good objects
	errs    decode.ErrorList  // problems of the current content
}

var _ Store = (*Directory)(nil)

// NewDirectory returns a Directory for dir and reads it once. A directory
// that cannot be read is not an error here: the snapshot reports it in
// DirErr and Run keeps trying.
func NewDirectory(dir string, opts *DirectoryOptions) (*Directory, error) {
	var o DirectoryOptions
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
		files:    map[string]*fileState{},
		meta:     meta,
		snap:     emptySnapshot(),
		watchers: map[chan struct{}]struct{}{},
	}
	d.mu.Lock()
	d.scanLocked()
	d.mu.Unlock()
	return d, nil
}

// Path returns the manifests directory.
func (d *Directory) Path() string { return d.dir }

// Snapshot returns the current desired state.
func (d *Directory) Snapshot() *Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

// Get returns one object by kind and name.
func (d *Directory) Get(kind, name string) (v1alpha1.Object, bool) {
	return d.Snapshot().object(Key{kind, name})
}

// List returns every object of one kind, sorted by name.
func (d *Directory) List(kind string) []v1alpha1.Object {
	return d.Snapshot().list(kind)
}

// Watch returns a channel signalled after every snapshot change until ctx
// ends. Signals coalesce: a slow reader sees one for many changes.
func (d *Directory) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	d.mu.Lock()
	d.watchers[ch] = struct{}{}
	d.mu.Unlock()
	context.AfterFunc(ctx, func() {
		d.mu.Lock()
		delete(d.watchers, ch)
		d.mu.Unlock()
	})
	return ch
}

// Run watches the directory (or, with DirectoryOptions.Rescan, waits for
// nudges) until ctx ends. It returns nil on cancellation and an error only
// if fsnotify itself cannot be used.
func (d *Directory) Run(ctx context.Context) error {
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
	d.rescan()

	var debounce, retry clock.Timer
	var debounceC, retryC <-chan time.Time
	defer func() {
		for _, t := range []clock.Timer{debounce, retry} {
			if t != nil {
				t.Stop()
			}
		}
	}()
	debounceSoon := func() { // read again once a burst of changes is over
		if debounce == nil {
			debounce = d.clock.NewTimer(d.debounce)
			debounceC = debounce.C()
		}
	}
	for {
		if retry == nil && (!watching || d.Snapshot().DirErr != nil) {
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
			d.rescan()
		case <-retryC:
			retry, retryC = nil, nil
			if !watching {
				watching = d.addWatch(w)
			}
			d.rescan()
		}
	}
}

// addWatch (re)adds the inotify watch on the directory.
func (d *Directory) addWatch(w *fsnotify.Watcher) bool {
	_ = w.Remove(d.dir)
	return w.Add(d.dir) == nil
}

func (d *Directory) rescan() {
	d.mu.Lock()
	d.scanLocked()
	d.scans++
	d.mu.Unlock()
	if d.scanned != nil {
		select {
		case d.scanned <- struct{}{}:
		default:
		}
	}
}

// scanLocked reads the directory and publishes a new snapshot if anything
// changed. d.mu must be held.
func (d *Directory) scanLocked() {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		if d.snap.DirErr == nil || d.snap.DirErr.Error() != err.Error() {
			d.log.Error("manifests directory unreadable; keeping every object as last read", "dir", d.dir, "err", err)
			next := *d.snap
			next.DirErr = fmt.Errorf("read manifests directory: %w", err)
			d.publishLocked(&next)
		}
		return
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !decode.IsManifestFile(e.Name()) {
			continue
		}
		path := filepath.Join(d.dir, e.Name())
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed between ReadDir and ReadFile
		}
		seen[path] = true
		st := d.files[path]
		if st == nil {
			st = &fileState{}
			d.files[path] = st
		}
		if err != nil {
			st.hash = [32]byte{}
			st.errs = decode.ErrorList{{File: path, Msg: "cannot read file: " + err.Error()}}
			continue
		}
		h := sha256.Sum256(data)
		if h == st.hash {
			continue
		}
		st.hash = h
		objs, errs := decode.File(path, data)
		if len(errs) > 0 {
			st.errs = errs // keep st.objects: the last good ones
			continue
		}
		st.objects, st.errs = objs, nil
		if st.objects == nil {
			st.objects = []v1alpha1.Object{}
		}
	}
	for path := range d.files {
		if !seen[path] {
			delete(d.files, path)
		}
	}
	d.publishLocked(d.buildLocked())
}

// buildLocked assembles a snapshot from the files, reusing the previous
// snapshot's pointer for every object whose content did not change.
func (d *Directory) buildLocked() *Snapshot {
	next := emptySnapshot()
	next.Synced = true
	paths := make([]string, 0, len(d.files))
	for p := range d.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	now := d.clock.Now()
	present := map[string]bool{}
	for _, p := range paths {
		st := d.files[p]
		next.Errors = append(next.Errors, st.errs...)
		for _, obj := range st.objects {
			key := Key{obj.GetObjectKind(), obj.GetName()}
			if first, dup := next.Sources[key]; dup {
				next.Errors = append(next.Errors, &decode.Error{File: p, Field: "metadata.name",
					Msg: fmt.Sprintf("duplicate %s %q: already defined in %s; this definition is ignored", key.Kind, key.Name, first)})
				continue
			}
			obj = obj.(interface{ DeepCopyObject() v1alpha1.Object }).DeepCopyObject()
			d.meta.stamp(obj, now)
			present[key.String()] = true
			next.Sources[key] = p
			if prev, ok := d.snap.object(key); ok && sameObject(prev, obj) {
				obj = prev
			}
			switch o := obj.(type) {
			case *v1alpha1.Member:
				next.Members[o.Name] = o
			case *v1alpha1.Profile:
				next.Profiles[o.Name] = o
			case *v1alpha1.Tenant:
				next.Tenants[o.Name] = o
			}
		}
	}
	d.meta.prune(present)
	if err := d.meta.save(); err != nil {
		d.log.Error("cannot persist object metadata; generations may be renumbered after a restart", "err", err)
	}
	return next
}

// publishLocked installs next if it differs from the current snapshot,
// logs changed manifest errors and signals watchers.
func (d *Directory) publishLocked(next *Snapshot) {
	prev := d.snap
	if sameSnapshot(prev, next) {
		return
	}
	if prev.DirErr != nil && next.DirErr == nil {
		d.log.Info("manifests directory readable again", "dir", d.dir)
	}
	old := map[string]bool{}
	for _, e := range prev.Errors {
		old[e.Error()] = true
	}
	for _, e := range next.Errors {
		if !old[e.Error()] {
			d.log.Error("manifest error; the file's last good objects stay in effect", "file", e.File, "line", e.Line, "err", e.Error())
		}
	}
	if len(prev.Errors) > 0 && len(next.Errors) == 0 {
		d.log.Info("manifest errors cleared", "dir", d.dir)
	}
	d.snap = next
	for ch := range d.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func sameSnapshot(a, b *Snapshot) bool {
	if a.Synced != b.Synced || (a.DirErr == nil) != (b.DirErr == nil) ||
		(a.DirErr != nil && a.DirErr.Error() != b.DirErr.Error()) {
		return false
	}
	if len(a.Errors) != len(b.Errors) || len(a.Sources) != len(b.Sources) {
		return false
	}
	for i := range a.Errors {
		if a.Errors[i].Error() != b.Errors[i].Error() {
			return false
		}
	}
	for k, p := range a.Sources {
		if b.Sources[k] != p {
			return false
		}
	}
	return sameMap(a.Members, b.Members) && sameMap(a.Profiles, b.Profiles) && sameMap(a.Tenants, b.Tenants)
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
