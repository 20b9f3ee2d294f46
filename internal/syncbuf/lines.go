package syncbuf

import (
	"strings"
	"sync"
)

// Lines is a writer that hands each whole line written to it, without its
// newline, to C; a partial line waits for the rest. It is what a test
// reads a running command's output or log through, line by line. With
// Drop, a line C has no room for is dropped instead of blocking the writer
// (a log the test reads only part of). Writes may come from several
// goroutines.
type Lines struct {
	C    chan string
	Drop bool

	mu      sync.Mutex
	partial string
}

// Write hands on the whole lines of what was written so far; it never
// fails.
func (l *Lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial += string(p)
	for {
		line, rest, ok := strings.Cut(l.partial, "\n")
		if !ok {
			return len(p), nil
		}
		l.partial = rest
		if !l.Drop {
			l.C <- line
			continue
		}
		select {
		case l.C <- line:
		default:
		}
	}
}
