package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
	"github.com/fleetd-dev/fleetd/internal/statedb"
)

// Store keeps the [History] of each Profile and Member. The directory
// store ([OpenDir]) keeps them in the state database; the etcd store
// (package etcdrollout) under the fleet's prefix, where every node reads
// them. Its methods are safe for concurrent use.
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
	// returns (concurrent Updates share the database's fsyncs); the etcd
	// store returns at once and writes in the background (retrying while
	// etcd does not answer), applying change again to what etcd holds
	// then — so change must say what to do to a history, not what the
	// history was. Get shows the change once Update returns either way.
	Update(kind, name string, change func(*History) bool) error
	// Names lists the names of kind that have a history, sorted.
	Names(kind string) []string
	// Changed returns a channel closed at the next change of any history.
	Changed() <-chan struct{}
}

// Dir is the [Store] of a fleetd on the manifests directory: its
// histories are a table of the state database (statedb.Revisions, keyed
// KIND/NAME, KIND profile or member), read once at [OpenDir] and served
// from memory. A change waits for its record to be durable, and changes
// of different objects share the database's group commits: the thousand
// histories a first start records cost a few fsyncs, not a thousand
// atomic file writes.
type Dir struct {
	db *statedb.DB // nil keeps the histories in memory only

	mu sync.Mutex // guards hist and busy; never held over I/O
	// hist are the histories by kind, then name, each by pointer
	// (replaced, never changed) in a sorted index: 8 bytes a history,
	// where a map of a thousand members' histories kept 2048 slots of 24.
	hist map[string]*sortedindex.Index[named]
	// busy are the objects an Update is changing: another Update of the
	// same object waits (idle), so that each applies its change to the
	// last one's result; Updates of different objects go on at once.
	busy    map[key]bool
	idle    *sync.Cond
	changed notify.Signal
	// defs are the definitions (specs) of the current revisions kept
	// last, by digest, at most maxDefs (keep).
	defs map[string]definition
}

// definition is a revision's spec and its digest.
type definition struct {
	hash string
	spec json.RawMessage
}

// maxDefs bounds the definitions a Dir remembers to share (keep): a few
// more than the distinct specs a fleet's members usually have.
const maxDefs = 16

type key struct{ kind, name string }

// named is an object's history, with the object's name it is kept by.
type named struct {
	name string
	History
}

func nameOf(n *named) string { return n.name }

// keyKinds are the KIND of a history's key, KIND/NAME, by object kind.
var keyKinds = map[string]string{v1alpha1.KindProfile: "profile", v1alpha1.KindMember: "member"}

// OpenDir reads every history kept in db (nil keeps them in memory only,
// for tests). A key that names no Profile or Member is not read. A
// history that does not decode (written by another version of fleetd, say)
// is logged on log (nil: slog.Default()) and not read: the object's
// earlier revisions are forgotten, its record left as it is until its next
// change replaces it. A revision history is never a reason not to start.
func OpenDir(db *statedb.DB, log *slog.Logger) (*Dir, error) {
	if log == nil {
		log = slog.Default()
	}
	d := &Dir{db: db, hist: map[string]*sortedindex.Index[named]{}, busy: map[key]bool{}, defs: map[string]definition{}}
	d.idle = sync.NewCond(&d.mu)
	err := db.Each(statedb.Revisions, func(k string, value []byte) error {
		hk, ok := parseKey(k)
		if !ok {
			return nil
		}
		var h History
		if err := json.Unmarshal(value, &h); err != nil {
			log.Warn("a revision history in the state database does not decode; the object's earlier revisions are forgotten", "history", k, "err", err)
			return nil
		}
		d.keep(&h)
		d.histOf(hk.kind).Put(&named{hk.name, h})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	return d, nil
}

// parseKey reads KIND/NAME.
func parseKey(k string) (key, bool) {
	kk, n, ok := strings.Cut(k, "/")
	for kind, f := range keyKinds {
		if ok && f == kk && v1alpha1.IsObjectName(n) {
			return key{kind, n}, true
		}
	}
	return key{}, false
}

// Get implements [Store].
func (d *Dir) Get(kind, name string) History {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clone(key{kind, name})
}

// clone returns a copy of k's history (Clone); the zero History when
// there is none. d.mu must be held.
func (d *Dir) clone(k key) History {
	if x := d.hist[k.kind]; x != nil {
		if n := x.Get(k.name); n != nil {
			return n.Clone()
		}
	}
	return History{}
}

// histOf returns the histories of kind, made on first use. d.mu must be
// held (or d not yet shared).
func (d *Dir) histOf(kind string) *sortedindex.Index[named] {
	x := d.hist[kind]
	if x == nil {
		index := sortedindex.New(nameOf, nil)
		x = &index
		d.hist[kind] = x
	}
	return x
}

// Update implements [Store]: it returns once the change is durable, and
// Get shows it from then on; a change that could not be written is
// returned and changes nothing.
func (d *Dir) Update(kind, name string, change func(*History) bool) error {
	kk, ok := keyKinds[kind]
	if !ok {
		return fmt.Errorf("%s has no revisions: only Profiles and Members do", kind)
	}
	k, dbKey := key{kind, name}, kk+"/"+name
	d.mu.Lock()
	for d.busy[k] {
		d.idle.Wait()
	}
	d.busy[k] = true
	h := d.clone(k)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.busy, k)
		d.idle.Broadcast()
		d.mu.Unlock()
	}()
	if !change(&h) {
		return nil
	}
	var err error
	switch {
	case h.IsZero():
		err = d.db.Write(statedb.Delete(statedb.Revisions, dbKey))
	default:
		var data []byte
		if data, err = json.Marshal(h); err == nil { // compact: a spec is kept as it was encoded
			err = d.db.Write(statedb.Put(statedb.Revisions, dbKey, data))
		}
	}
	if err != nil {
		return fmt.Errorf("write the revisions of %s: %w", dbKey, err)
	}
	d.mu.Lock()
	if h.IsZero() {
		if x := d.hist[kind]; x != nil {
			if n := x.Get(name); n != nil {
				x.Remove(n)
			}
		}
	} else {
		d.keep(&h)
		d.histOf(kind).Put(&named{name, h})
	}
	d.mu.Unlock()
	d.changed.Notify()
	return nil
}

// keep readies h to be kept: its revisions in an array of their own
// length (decoding and appending grow one by doubling: three revisions
// get room for four), and its current revision's definition (spec and
// digest) one kept recently, not a copy, when they are equal: a fleet
// whose members share a spec (created from one profile, say) keeps it
// once, not once per member. A revision's spec is never changed in place;
// Clone shares it too. d.mu must be held (or d not yet shared).
func (d *Dir) keep(h *History) {
	if cap(h.Revisions) > len(h.Revisions) {
		// Clipped: the copy's allocation may have a size class's room,
		// which the next keep must not copy again.
		h.Revisions = slices.Clip(slices.Clone(h.Revisions))
	}
	n := len(h.Revisions)
	if n == 0 {
		return
	}
	cur := &h.Revisions[n-1]
	if def, ok := d.defs[cur.Hash]; ok && bytes.Equal(def.spec, cur.Spec) {
		cur.Hash, cur.Spec = def.hash, def.spec
		return
	}
	if len(d.defs) >= maxDefs {
		clear(d.defs)
	}
	d.defs[cur.Hash] = definition{hash: cur.Hash, spec: cur.Spec}
}

// Names implements [Store].
func (d *Dir) Names(kind string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string // nil, as before, when there are none
	if x := d.hist[kind]; x != nil {
		for _, n := range x.Entries() {
			names = append(names, n.name)
		}
	}
	return names
}

// Changed implements [Store].
func (d *Dir) Changed() <-chan struct{} { return d.changed.Changed() }
