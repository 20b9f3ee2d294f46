package herdrcache

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type indexed struct{ key, val string }

// A sortedIndex answers as a map of its keys would: put replaces the entry
// with the same key, remove drops only the entry indexed, get finds what
// was put last, whatever the order of the changes.
func TestSortedIndex_AnswersAsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 26))
	key := func(e *indexed) string { return e.key }
	keys := []string{"", "a", "b", "c", "d", "e"}
	x, want := newSortedIndex(key, nil), map[string]*indexed{}
	for i := range 2000 {
		k := keys[r.IntN(len(keys))]
		switch r.IntN(3) {
		case 0, 1:
			e := &indexed{k, string(rune('0' + i%10))}
			x.put(e)
			want[k] = e
		case 2:
			// An entry not indexed (one put before, since replaced, or
			// never put) leaves the index be.
			e := &indexed{k, "other"}
			if r.IntN(2) == 0 && want[k] != nil {
				e = want[k]
				delete(want, k)
			}
			x.remove(e)
		}
		got := map[string]*indexed{}
		for j, e := range x.entries {
			if j > 0 && x.entries[j-1].key >= e.key {
				t.Fatalf("step %d: %q follows %q", i, e.key, x.entries[j-1].key)
			}
			got[e.key] = e
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(indexed{})); diff != "" {
			t.Fatalf("step %d (-map +index):\n%s", i, diff)
		}
		for _, k := range keys {
			if x.get(k) != want[k] {
				t.Fatalf("step %d: get(%q) = %v, want %v", i, k, x.get(k), want[k])
			}
		}
	}
	// Built at once from entries in any order, with repeated keys.
	entries := []*indexed{{"c", "1"}, {"a", "1"}, {"c", "2"}, {"b", "1"}}
	y := newSortedIndex(key, slices.Clone(entries))
	var gotKeys []string
	for _, e := range y.entries {
		gotKeys = append(gotKeys, e.key)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, gotKeys); diff != "" {
		t.Errorf("keys of a built index (-want +got):\n%s", diff)
	}
}
