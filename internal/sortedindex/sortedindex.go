// Package sortedindex is an index of entries by a string key, one entry a
// key, kept as a slice of pointers sorted by key and searched by binary
// search: what fleetd keeps for every member (or pane, tab) where a map
// would cost six times the room.
//
// A map of a fleet's entries takes about 53 B an entry (Go's maps grow to
// twice the room past 7/8 full, and never shrink); the slice takes 8 B.
// A lookup is a binary search: about 0.1 µs over 1000 or 10000 entries,
// where a map's is 0.01 µs; a put of a new key or a removal moves the
// entries after it, about 0.1 µs at 1000 entries and 1 µs at 10000
// (BenchmarkIndex).
//
// It never does: lock (its owner does), copy or change an entry, or change
// an entry's key — an entry's key must not change while it is indexed.
package sortedindex

import (
	"slices"
	"strings"
)

// Index holds entries sorted by a string key, one entry a key. The zero
// Index is not usable: build one with [New].
type Index[E any] struct {
	key     func(*E) string
	entries []*E
}

// New returns an index by key of entries, which it sorts; of entries with
// the same key it keeps one.
func New[E any](key func(*E) string, entries []*E) Index[E] {
	slices.SortFunc(entries, func(a, b *E) int { return strings.Compare(key(a), key(b)) })
	entries = slices.CompactFunc(entries, func(a, b *E) bool { return key(a) == key(b) })
	return Index[E]{key: key, entries: entries}
}

func (x *Index[E]) find(k string) (int, bool) {
	return slices.BinarySearchFunc(x.entries, k, func(e *E, k string) int { return strings.Compare(x.key(e), k) })
}

// Get returns the entry with key k, or nil.
func (x *Index[E]) Get(k string) *E {
	if i, ok := x.find(k); ok {
		return x.entries[i]
	}
	return nil
}

// Put indexes e, in place of the entry with the same key if any.
func (x *Index[E]) Put(e *E) {
	if i, ok := x.find(x.key(e)); ok {
		x.entries[i] = e
	} else {
		x.entries = slices.Insert(x.entries, i, e)
	}
}

// Remove drops e, if it is the entry indexed under its key.
func (x *Index[E]) Remove(e *E) {
	if i, ok := x.find(x.key(e)); ok && x.entries[i] == e {
		x.entries = slices.Delete(x.entries, i, i+1)
	}
}

// Len returns the number of entries.
func (x *Index[E]) Len() int { return len(x.entries) }

// Entries returns the entries sorted by key: the index's own slice, which
// the caller must not change, and which a Put or Remove changes (clone it
// to change the index while walking it).
func (x *Index[E]) Entries() []*E { return x.entries }

// Key returns e's key, by the index's key function.
func (x *Index[E]) Key(e *E) string { return x.key(e) }
