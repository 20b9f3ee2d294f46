package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by Open when a damaged line is followed by intact
// ones, which a torn write cannot produce.
var ErrCorrupt = errors.New("journal corrupt")

// Journal is an open journal file. It is not safe for concurrent use; the
// owner serialises calls.
type Journal struct {
	path string
	f    *os.File
	size int64
}

// Open opens (creating if needed, mode 0600) the journal at path, returns
// every intact record in append order and leaves the file positioned for
// appending. A torn last line is truncated away; Dropped reports its length in
// bytes (0 when the file was clean).
func Open(path string) (j *Journal, records [][]byte, dropped int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, statedir.FileMode)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	records, good, total, err := scan(f, path)
	if err != nil {
		return nil, nil, 0, err
	}
	if good < total {
		if err := f.Truncate(good); err != nil {
			return nil, nil, 0, fmt.Errorf("truncate torn journal tail %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, nil, 0, fmt.Errorf("sync journal %s: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return nil, nil, 0, fmt.Errorf("seek journal %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, nil, 0, err
	}
	return &Journal{path: path, f: f, size: good}, records, total - good, nil
}

// scan reads every line of f. It returns the intact records, the offset just
// past the last intact one and the file size.
func scan(f *os.File, path string) (records [][]byte, good, total int64, err error) {
	r := bufio.NewReader(f)
	var off int64
	badAt := int64(-1)
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, 0, 0, fmt.Errorf("read journal %s: %w", path, err)
		}
		start := off
		off += int64(len(line))
		rec, ok := decode(line)
		switch {
		case !ok && badAt < 0:
			badAt = start
		case ok && badAt >= 0:
			return nil, 0, 0, fmt.Errorf("%w: %s:%d: intact record after a damaged one at byte %d", ErrCorrupt, path, lineNo, badAt)
		case ok:
			records = append(records, rec)
		}
		if err == io.EOF {
			break
		}
	}
	good = off
	if badAt >= 0 {
		good = badAt
	}
	return records, good, off, nil
}

func decode(line []byte) ([]byte, bool) {
	if len(line) < 10 || line[len(line)-1] != '\n' || line[8] != ' ' {
		return nil, false
	}
	sum, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return nil, false
	}
	rec := line[9 : len(line)-1]
	if uint64(crc32.Checksum(rec, castagnoli)) != sum {
		return nil, false
	}
	return bytes.Clone(rec), true
}

func encode(buf *bytes.Buffer, rec []byte) error {
	if bytes.IndexByte(rec, '\n') >= 0 {
		return errors.New("journal record contains a newline")
	}
	fmt.Fprintf(buf, "%08x ", crc32.Checksum(rec, castagnoli))
	buf.Write(rec)
	buf.WriteByte('\n')
	return nil
}

// Append writes recs as one write and fsyncs the file. When it returns nil the
// records survive a crash; on error some prefix of them may have reached the
// disk (a later Open keeps whole ones and drops a torn one).
func (j *Journal) Append(recs ...[]byte) error {
	if len(recs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, r := range recs {
		if err := encode(&buf, r); err != nil {
			return err
		}
	}
	n, err := j.f.Write(buf.Bytes())
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("append to journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	return nil
}

// Size is the journal's length in bytes.
func (j *Journal) Size() int64 { return j.size }

// Rewrite replaces the journal's whole content with recs: they are written to
// a temporary file beside it, fsynced, renamed over the journal and the
// directory is fsynced. A crash at any point leaves either the old or the new
// file, never a mix.
func (j *Journal) Rewrite(recs [][]byte) error {
	var buf bytes.Buffer
	for _, r := range recs {
		if err := encode(&buf, r); err != nil {
			return err
		}
	}
	tmp := j.path + ".compact"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, statedir.FileMode)
	if err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact journal: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact journal: sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact journal: %w", err)
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return fmt.Errorf("compact journal: seek: %w", err)
	}
	old := j.f
	j.f, j.size = f, int64(buf.Len())
	if err := old.Close(); err != nil {
		return fmt.Errorf("compact journal: close old file: %w", err)
	}
	return nil
}

// Close closes the file. Records already appended are durable.
func (j *Journal) Close() error { return j.f.Close() }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync journal directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync journal directory %s: %w", dir, err)
	}
	return nil
}
