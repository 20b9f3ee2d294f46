package sortedindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type indexed struct{ key, val string }

// An Index answers as a map of its keys would: put replaces the entry
// with the same key, remove drops only the entry indexed, get finds what
// was put last, whatever the order of the changes.
func TestIndex_AnswersAsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 26))
	key := func(e *indexed) string { return e.key }
	keys := []string{"", "a", "b", "c", "d", "e"}
	x, want := New(key, nil), map[string]*indexed{}
	for i := range 2000 {
		k := keys[r.IntN(len(keys))]
		switch r.IntN(3) {
		case 0, 1:
			e := &indexed{k, string(rune('0' + i%10))}
			x.Put(e)
			want[k] = e
		case 2:
			// An entry not indexed (one put before, since replaced, or
			// never put) leaves the index be.
			e := &indexed{k, "other"}
			if r.IntN(2) == 0 && want[k] != nil {
				e = want[k]
				delete(want, k)
			}
			x.Remove(e)
		}
		got := map[string]*indexed{}
		for j, e := range x.Entries() {
			if j > 0 && x.Entries()[j-1].key >= e.key {
				t.Fatalf("step %d: %q follows %q", i, e.key, x.Entries()[j-1].key)
			}
			got[e.key] = e
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(indexed{})); diff != "" {
			t.Fatalf("step %d (-map +index):\n%s", i, diff)
		}
		for _, k := range keys {
			if x.Get(k) != want[k] {
				t.Fatalf("step %d: get(%q) = %v, want %v", i, k, x.Get(k), want[k])
			}
		}
	}
	// Built at once from entries in any order, with repeated keys.
	entries := []*indexed{{"c", "1"}, {"a", "1"}, {"c", "2"}, {"b", "1"}}
	y := New(key, slices.Clone(entries))
	var gotKeys []string
	for _, e := range y.Entries() {
		gotKeys = append(gotKeys, e.key)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, gotKeys); diff != "" {
		t.Errorf("keys of a built index (-want +got):\n%s", diff)
	}
}

// What a lookup, and a put and a removal of a new key, cost in an index of
// a fleet's members, against a map of the same keys.
func BenchmarkIndex(b *testing.B) {
	key := func(e *indexed) string { return e.key }
	for _, n := range []int{1000, 10000} {
		entries := make([]*indexed, n)
		m := make(map[string]*indexed, n)
		for i := range entries {
			entries[i] = &indexed{key: fmt.Sprintf("member-%05d", i*2)}
			m[entries[i].key] = entries[i]
		}
		x := New(key, slices.Clone(entries))
		b.Run(fmt.Sprintf("get/n=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if x.Get(entries[i%n].key) == nil {
					b.Fatal("not found")
				}
			}
		})
		b.Run(fmt.Sprintf("mapget/n=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if m[entries[i%n].key] == nil {
					b.Fatal("not found")
				}
			}
		})
		// A key in the middle: half the entries move, twice.
		e := &indexed{key: fmt.Sprintf("member-%05d", n-1)}
		b.Run(fmt.Sprintf("put+remove/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				x.Put(e)
				x.Remove(e)
			}
		})
	}
}
