package statedbtest

import (
	"errors"
	"sync/atomic"

	"github.com/fleetd-dev/fleetd/internal/statedb"
)

// ErrDiskFull is the error of every write a [FailingWrites] file fails.
var ErrDiskFull = errors.New("disk full")

// FailingWrites is a statedb.Options.Wrap whose files fail every write
// with [ErrDiskFull] while fail is set, and write through otherwise.
func FailingWrites(fail *atomic.Bool) func(statedb.File) statedb.File {
	return func(f statedb.File) statedb.File { return &failingFile{File: f, fail: fail} }
}

type failingFile struct {
	statedb.File
	fail *atomic.Bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fail.Load() {
		return 0, ErrDiskFull
	}
	return f.File.Write(p)
}
