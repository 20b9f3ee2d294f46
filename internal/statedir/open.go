package statedir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/fleetd-dev/fleetd/internal/filekind"
)

// The most fleetd reads of each kind of file in the state directory. Each
// is far above what fleetd writes there; a file over it was not written by
// fleetd (or by a fleet far larger than one machine runs) and is refused
// rather than read into memory.
const (
	// MaxLockBytes bounds fleetd.lock: a pid.
	MaxLockBytes = 4 << 10
	// MaxTokenBytes bounds primary.token: one token.
	MaxTokenBytes = 4 << 10
	// MaxRecordBytes bounds one record of a legacy per-member directory
	// (owned/NAME.json, members/NAME.json), read once by the migration to
	// the state database.
	MaxRecordBytes = 64 << 10
	// MaxIndexBytes bounds the files that list every object or token:
	// objects.json, etcd-store.json, and the legacy tokens.json and
	// prompts-delivered.json.
	MaxIndexBytes = 64 << 20
	// MaxStateDBBytes bounds the state database. It is compacted to its
	// live records (a few hundred bytes per member and token) as it grows;
	// the whole of it is read into memory at start-up.
	MaxStateDBBytes = 256 << 20
	// MaxJournalBytes bounds the message journal. The journal is compacted
	// to its live content (the mailboxes, queues and open turns, each
	// bounded by the messaging core) as it grows; the whole of it is read
	// into memory at start-up.
	MaxJournalBytes = 1 << 30
)

// ErrNotRegular is matched (errors.Is) by the error of [Open] and
// [ReadFile] for anything but a regular file: a symbolic link, a FIFO, a
// device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is matched (errors.Is) by the error of [Open] and [ReadFile]
// for a file larger than the bound it is read with.
var ErrTooLarge = errors.New("larger than fleetd reads")

// Open opens a file of the state directory with flag (os.O_RDONLY, or
// os.O_RDWR with os.O_CREATE to make it with [FileMode]), the one way
// fleetd opens what it keeps there. It refuses anything but a regular
// file, before reading a byte of it: a symbolic link (O_NOFOLLOW: fleetd
// never puts one there), a FIFO (opened with O_NONBLOCK, so that the open
// cannot hang waiting for a writer, then refused by fstat), a device, a
// socket or a directory; and a file larger than max bytes. Its errors
// match fs.ErrNotExist (when there is no file and flag does not create
// one), [ErrNotRegular] or [ErrTooLarge], and name the path and what to do.
//
// O_NONBLOCK changes nothing for a regular file's reads and writes.
func Open(path string, flag int, max int64) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, FileMode)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, notRegular(path, "a symbolic link")
	case errors.Is(err, syscall.ENXIO):
		// A socket, or a FIFO opened for writing with no reader.
		return nil, notRegular(path, "a socket or a FIFO")
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, notRegular(path, filekind.Of(fi.Mode()))
	case fi.Size() > max:
		f.Close()
		return nil, fmt.Errorf("%w: state file %s holds %d bytes, more than fleetd reads of it (%d): it was not written by fleetd; move it aside (mv %s %s.big) and start fleetd again",
			ErrTooLarge, path, fi.Size(), max, shellQuote(path), shellQuote(path))
	}
	return f, nil
}

// ReadFile reads a file of the state directory whole through [Open]: at
// most max bytes, also when the file grows while it is read.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: state file %s grew past %d bytes while fleetd read it; move it aside (mv %s %s.big) and start fleetd again",
			ErrTooLarge, path, max, shellQuote(path), shellQuote(path))
	}
	return b, nil
}

func notRegular(path, what string) error {
	return fmt.Errorf("%w: state file %s is %s: fleetd only reads files it wrote there itself; remove it (rm %s) and start fleetd again",
		ErrNotRegular, path, what, shellQuote(path))
}
