package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once (run with -race): every write is kept,
// whole.
func TestBuffer_ConcurrentWritesAreAllKept(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 {
		t.Errorf("%d lines kept, want 800", n)
	}
}
