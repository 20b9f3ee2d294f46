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

// Lines hands on whole lines, across writes that split them, and with Drop
// drops the lines its channel has no room for.
func TestLines_HandsOnWholeLines(t *testing.T) {
	l := &Lines{C: make(chan string, 4)}
	for _, w := range []string{"one\ntw", "o", "\nthree\n", "fou"} {
		l.Write([]byte(w))
	}
	close(l.C)
	var got []string
	for line := range l.C {
		got = append(got, line)
	}
	if strings.Join(got, "|") != "one|two|three" {
		t.Errorf("lines %q, want one, two, three (four is not ended)", got)
	}

	d := &Lines{C: make(chan string, 1), Drop: true}
	d.Write([]byte("kept\ndropped\n")) // would block without Drop
	if line := <-d.C; line != "kept" || len(d.C) != 0 {
		t.Errorf("with Drop: %q and %d more, want kept alone", line, len(d.C))
	}
}
