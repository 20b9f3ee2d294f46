package herdrcache

import (
	"slices"
	"strings"
)

// sortedIndex holds entries sorted by a string key, one entry a key, found
// by binary search: the view's tabs by id and its panes by id and by
// terminal id. A sorted slice rather than a map because the view keeps
// such entries for every member: the slice takes 8 B an entry, where a
// map of a fleet's entries takes about 53 (Go's maps grow to twice the
// room past 7/8 full, and never shrink). A binary search over a thousand
// entries is about as quick as hashing one key; a change moves at most
// the slice's few kB.
type sortedIndex[E any] struct {
	key     func(*E) string
	entries []*E
}

// newSortedIndex returns an index by key of entries, which it sorts; of
// entries with the same key it keeps one.
func newSortedIndex[E any](key func(*E) string, entries []*E) sortedIndex[E] {
	slices.SortFunc(entries, func(a, b *E) int { return strings.Compare(key(a), key(b)) })
	entries = slices.CompactFunc(entries, func(a, b *E) bool { return key(a) == key(b) })
	return sortedIndex[E]{key: key, entries: entries}
}

func (x *sortedIndex[E]) find(k string) (int, bool) {
	return slices.BinarySearchFunc(x.entries, k, func(e *E, k string) int { return strings.Compare(x.key(e), k) })
}

// get returns the entry with key k, or nil.
func (x *sortedIndex[E]) get(k string) *E {
	if i, ok := x.find(k); ok {
		return x.entries[i]
	}
	return nil
}

// put indexes e, in place of the entry with the same key if any.
func (x *sortedIndex[E]) put(e *E) {
	if i, ok := x.find(x.key(e)); ok {
		x.entries[i] = e
	} else {
		x.entries = slices.Insert(x.entries, i, e)
	}
}

// remove drops e, if it is the entry indexed under its key.
func (x *sortedIndex[E]) remove(e *E) {
	if i, ok := x.find(x.key(e)); ok && x.entries[i] == e {
		x.entries = slices.Delete(x.entries, i, i+1)
	}
}
