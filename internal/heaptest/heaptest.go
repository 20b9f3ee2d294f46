// Package heaptest measures what a structure keeps on the heap, for the
// benchmarks that report the bytes fleetd retains per member: the live
// heap before the structure is built, and again while it is held. It is
// for tests; the fleetd binary never links it (internal/archtest).
package heaptest

import "runtime"

// Live returns the bytes of the live heap: the heap in use once a
// collection has finished, the second one after any the first may have
// found under way.
func Live() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
