package dirstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/heaptest"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// BenchmarkNew_Restart: New over n members' files whose records an earlier
// New left in the state directory — the directory store's part of a
// `fleetd serve` restart, which reads every file it has not read before
// and seeds each with the objects recorded for it.
func BenchmarkNew_Restart(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			h := newFiles(b, fleetFiles(n))
			h.restarted() // the first start writes the records
			for b.Loop() {
				if got := len(h.restarted().Snapshot().Members); got != n {
					b.Fatalf("%d members after the restart, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkNew_FirstStart: New over n members' files with an empty state
// directory — the first `fleetd serve` on a fleet: every file is read and
// decoded, every object stamped, and the objects file written once.
func BenchmarkNew_FirstStart(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			h := newFiles(b, fleetFiles(n))
			objects := statedir.At(h.state).Objects()
			for b.Loop() {
				b.StopTimer()
				if err := os.Remove(objects); err != nil && !errors.Is(err, fs.ErrNotExist) {
					b.Fatal(err)
				}
				b.StartTimer()
				if got := len(h.restarted().Snapshot().Members); got != n {
					b.Fatalf("%d members after the first start, want %d", got, n)
				}
			}
		})
	}
}

// fleetFiles are a profile's file and n members' files of it, one member
// each.
func fleetFiles(n int) map[string]string {
	files := map[string]string{"profile.yaml": profileDoc}
	for i := range n {
		name := fmt.Sprintf("m%04d", i)
		files[name+".yaml"] = memberDoc(name, "codex-fast")
	}
	return files
}

// BenchmarkMetaBook_Encode: the objects file of n members, as a save
// encodes it (the first of a process: no size of an earlier file to start
// from).
func BenchmarkMetaBook_Encode(b *testing.B) {
	d := newFiles(b, fleetFiles(1000)).restarted()
	b.ReportAllocs()
	for b.Loop() {
		book := &metaBook{recs: d.meta.recs, live: d.meta.live}
		if _, err := book.encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirectory_RetainedPerMember reports the heap a Directory keeps
// for a fleet of 1000 members' files once it has read them (a first
// start: every file decoded, every object stamped, the records saved),
// per member: B/member.
func BenchmarkDirectory_RetainedPerMember(b *testing.B) {
	const members = 1000
	h := newFiles(b, fleetFiles(members))
	objects := statedir.At(h.state).Objects()
	var retained uint64
	for b.Loop() {
		if err := os.Remove(objects); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
		before := heaptest.Live()
		d := h.restarted()
		after := heaptest.Live()
		if got := len(d.Snapshot().Members); got != members {
			b.Fatalf("%d members, want %d", got, members)
		}
		retained += after - before
	}
	b.ReportMetric(float64(retained)/float64(b.N)/members, "B/member")
}
