package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Store keeps the [History] of each Profile and Member. The directory
// store ([OpenDir]) keeps them in the state directory; the etcd store
// (package etcdrollout) under the fleet's prefix, where every node reads
// them.
type Store interface {
	// Get returns the history of the object of kind (v1alpha1.KindProfile
	// or KindMember) named name, as this node last read it with the
	// changes it asked for applied (the zero History when there is none).
	// It never waits on the disk or the network, and its result is the
	// caller's to change.
	Get(kind, name string) History
	// Update applies change to the history of kind/name and keeps the
	// result when change reports true; a history left with nothing
	// ([History.IsZero]) is deleted. The directory store writes before it
	// returns; the etcd store returns at once and writes in the background
	// (retrying while etcd does not answer), applying change again to
	// what etcd holds then — so change must say what to do to a history,
	// not what the history was. Get shows the change at once either way.
	Update(kind, name string, change func(*History) bool) error
	// Names lists the names of kind that have a history, sorted.
	Names(kind string) []string
	// Changed returns a channel closed at the next change of any history.
	Changed() <-chan struct{}
}

// Dir is the [Store] of a state directory: one file per object,
// revisions/KIND.NAME.json (KIND profile or member), a [History] as JSON,
// replaced atomically when it changes and removed when it keeps nothing.
// Every file is read at [OpenDir]; reads are served from memory.
type Dir struct {
	state statedir.Layout
	disk  bool // false keeps the histories in memory only

	writeMu sync.Mutex // serialises Update's read-change-write, disk included
	mu      sync.Mutex // guards hist; never held over I/O
	hist    map[key]History
	changed notify.Signal
}

type key struct{ kind, name string }

// fileKinds are the KIND of a history file's name, by object kind.
var fileKinds = map[string]string{v1alpha1.KindProfile: "profile", v1alpha1.KindMember: "member"}

// OpenDir reads every history kept in the state directory at root,
// creating its directory when missing ("" keeps them in memory only, for
// tests). A file that does not decode is an error naming it and what to
// do.
func OpenDir(root string) (*Dir, error) {
	d := &Dir{state: statedir.At(root), disk: root != "", hist: map[key]History{}}
	if !d.disk {
		return d, nil
	}
	dir := d.state.RevisionsDir()
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	for _, e := range entries {
		k, ok := parseFileName(e.Name())
		if e.IsDir() || !ok {
			continue // a temporary file of an interrupted write, or not ours
		}
		path := filepath.Join(dir, e.Name())
		data, err := statedir.ReadFile(path, statedir.MaxIndexBytes)
		if err != nil {
			return nil, fmt.Errorf("revisions: %w", err)
		}
		var h History
		if err := json.Unmarshal(data, &h); err != nil {
			return nil, fmt.Errorf("revision history %s is corrupt (%v); move it away to let fleetd start (the object's earlier revisions are then forgotten)", path, err)
		}
		d.hist[k] = h
	}
	return d, nil
}

// parseFileName reads KIND.NAME.json.
func parseFileName(name string) (key, bool) {
	base, ok := strings.CutSuffix(name, ".json")
	if !ok || strings.HasPrefix(base, ".") {
		return key{}, false
	}
	fk, n, ok := strings.Cut(base, ".")
	for kind, f := range fileKinds {
		if ok && f == fk && v1alpha1.IsObjectName(n) {
			return key{kind, n}, true
		}
	}
	return key{}, false
}

// Get implements [Store].
func (d *Dir) Get(kind, name string) History {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hist[key{kind, name}].Clone()
}

// Update implements [Store]: the file is written before it returns.
func (d *Dir) Update(kind, name string, change func(*History) bool) error {
	fk, ok := fileKinds[kind]
	if !ok {
		return fmt.Errorf("%s has no revisions: only Profiles and Members do", kind)
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	k := key{kind, name}
	h := d.Get(kind, name)
	if !change(&h) {
		return nil
	}
	path := d.state.Revisions(fk, name)
	var err error
	switch {
	case !d.disk:
	case h.IsZero():
		if err = os.Remove(path); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	default:
		var data []byte
		if data, err = json.Marshal(h); err == nil { // compact: a spec is kept as it was encoded
			err = atomicfile.Write(path, append(data, '\n'), statedir.FileMode)
		}
	}
	if err != nil {
		return fmt.Errorf("write the revisions of %s/%s: %w", fk, name, err)
	}
	d.mu.Lock()
	if h.IsZero() {
		delete(d.hist, k)
	} else {
		d.hist[k] = h
	}
	d.mu.Unlock()
	d.changed.Notify()
	return nil
}

// Names implements [Store].
func (d *Dir) Names(kind string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k := range d.hist {
		if k.kind == kind {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// Changed implements [Store].
func (d *Dir) Changed() <-chan struct{} { return d.changed.Changed() }
