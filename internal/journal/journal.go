package journal

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by Open when the file is damaged in a way a torn
// write cannot explain: a damaged line followed by more lines, or no intact
// line at its start. Check lists the damage; Repair keeps what is intact.
var ErrCorrupt = errors.New("journal corrupt")

// header is the first line of every journal this package creates. Journals
// written before it existed start with a record; both are read.
const header = "#fleetd-journal 1"

// Separators between a line's checksum and its record: the last record of
// a batch ends the batch; one with more of its batch after it says so.
const (
	sepEnd  = ' '
	sepMore = '+'
)

// File is what a Journal needs of its open file: an *os.File, or a
// wrapper around one that injects faults ([OpenWith]).
type File interface {
	io.Writer
	io.Seeker
	Truncate(size int64) error
	Sync() error
	Close() error
}

// Journal is an open journal file. Its methods are safe for concurrent use:
// Appends are serialised among themselves, and a [Rewrite] writes its new
// file while Appends go on (it takes the journal's lock only to append what
// they added meanwhile and to switch files).
type Journal struct {
	path string
	wrap func(File) File // applied to every file the journal opens
	// syncDir and maxTail are the package's, held here so that a test
	// can change them for one journal.
	syncDir func(dir string) error
	maxTail int

	mu   sync.Mutex
	f    File
	size int64 // offset just past the last whole, synced batch
	// broken is set when a failed append could not be cut back to size;
	// nothing is written until a retry of the cut succeeds.
	broken error
	// tail, while a Rewrite is under way, holds every batch appended since
	// it began, framed as in the file; nil otherwise. tailOver is set when
	// it outgrew maxTail: that rewrite then fails and the old file stays.
	tail     *bytes.Buffer
	tailOver bool
}

// maxTail bounds what a Rewrite holds in memory of the batches appended
// while it writes (a rewrite that takes that long is abandoned and retried
// by the owner later).
const maxTail = 64 << 20

// Options tune [OpenWith]. nil means defaults.
type Options struct {
	// Wrap is applied to every file the journal opens (now and when it is
	// rewritten); tests use it to inject failing writes. nil: none.
	Wrap func(File) File
	// MaxBytes bounds the file: a larger one is refused before a byte of
	// it is read (statedir.Open), since Open reads it whole. 0 means
	// statedir.MaxJournalBytes.
	MaxBytes int64
}

// Open opens (creating if needed, mode 0600) the journal at path, returns
// every intact record in append order and leaves the file positioned for
// appending. A torn last batch is truncated away; dropped reports its length
// in bytes (0 when the file was clean). A file damaged any other way is
// refused with ErrCorrupt, naming the byte offset, and left as it is.
func Open(path string) (j *Journal, records [][]byte, dropped int64, err error) {
	return OpenWith(path, nil)
}

// OpenWith is Open with opts. A nil opts is Open.
func OpenWith(path string, opts *Options) (j *Journal, records [][]byte, dropped int64, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	wrap, max := o.Wrap, maxBytes(o.MaxBytes)
	if wrap == nil {
		wrap = func(f File) File { return f }
	}
	osf, err := statedir.Open(path, os.O_RDWR|os.O_CREATE, max)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	f := wrap(osf)
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	s, err := scan(osf)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read journal %s: %w", path, err)
	}
	if err := s.refusal(path); err != nil {
		return nil, nil, 0, err
	}
	good, dropped := s.good, s.total-s.good
	if s.fresh() {
		// A new file, or one whose header write was cut short: start it.
		good, dropped = 0, 0
	}
	if good < s.total {
		if err := f.Truncate(good); err != nil {
			return nil, nil, 0, fmt.Errorf("truncate torn journal tail %s: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return nil, nil, 0, fmt.Errorf("seek journal %s: %w", path, err)
	}
	if good == 0 {
		h := headerLine()
		if _, err := f.Write([]byte(h)); err != nil {
			return nil, nil, 0, fmt.Errorf("start journal %s: %w", path, err)
		}
		good = int64(len(h))
	}
	if err := f.Sync(); err != nil {
		return nil, nil, 0, fmt.Errorf("sync journal %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, nil, 0, err
	}
	return &Journal{path: path, f: f, wrap: wrap, size: good, syncDir: syncDir, maxTail: maxTail}, s.records, dropped, nil
}

// maxBytes is the bound of a file: max, or statedir.MaxJournalBytes for 0.
func maxBytes(max int64) int64 {
	if max <= 0 {
		return statedir.MaxJournalBytes
	}
	return max
}

// Damage is one damaged stretch of a journal.
type Damage struct {
	Offset int64  // byte offset of its first byte
	Line   int    // 1-based line number
	Bytes  int64  // its length
	Reason string // what is wrong with it
	// Torn is true for the damage a write cut short leaves (the last line,
	// or the unfinished last batch): Open drops it. Any other damage makes
	// Open refuse the file.
	Torn bool
}

// scanned is what a scan found.
type scanned struct {
	records  [][]byte // intact records of the complete batches before any damage
	intact   [][]byte // intact records of every complete batch, after damage too
	intactAt []Damage // where each of them is (Offset, Line, Bytes)
	good     int64    // offset just past the last complete batch before any damage
	total    int64    // file size
	damage   []Damage // every damaged line and unfinished batch, in file order
	headered bool
	// startsHeader: the whole file is a prefix of the header line (a
	// creation cut short).
	startsHeader bool
}

// fresh reports a file with nothing in it yet.
func (s *scanned) fresh() bool { return s.total == 0 || s.startsHeader }

// refusal is Open's judgement: nil when every damage is a torn tail.
func (s *scanned) refusal(path string) error {
	if s.fresh() {
		return nil
	}
	for _, d := range s.damage {
		if !d.Torn {
			return fmt.Errorf("%w: %s: byte %d (line %d): %s", ErrCorrupt, path, d.Offset, d.Line, d.Reason)
		}
	}
	return nil
}

// scan reads every line of r and sorts it into intact records and damage.
func scan(r io.Reader) (*scanned, error) {
	br := bufio.NewReader(r)
	s := &scanned{}
	var (
		off         int64
		batch       [][]byte // records of the batch being read
		batchPos    []Damage // where its records are
		batchAt     int64    // its first line's offset
		batchLine   int
		damaged     int  // damaged lines seen
		lastBad     bool // the last line read was damaged
		afterDamage bool // a complete batch follows a damaged line
	)
	unfinished := func(end int64, why string) {
		s.damage = append(s.damage, Damage{Offset: batchAt, Line: batchLine, Bytes: end - batchAt,
			Reason: fmt.Sprintf("unfinished batch of %d records %s", len(batch), why)})
		batch, batchPos = nil, nil
	}
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		start := off
		off += int64(len(line))
		if lineNo == 1 && string(line) == headerLine() {
			s.headered, s.good = true, off
			continue
		}
		if lineNo == 1 && err == io.EOF && strings.HasPrefix(headerLine(), string(line)) {
			s.startsHeader = true
		}
		rec, sep, reason := decode(line)
		lastBad = reason != ""
		if lastBad {
			if len(batch) > 0 {
				unfinished(start, "cut by a damaged line")
			}
			s.damage = append(s.damage, Damage{Offset: start, Line: lineNo, Bytes: int64(len(line)), Reason: reason})
			damaged++
			continue
		}
		if len(batch) == 0 {
			batchAt, batchLine = start, lineNo
		}
		batch = append(batch, rec)
		batchPos = append(batchPos, Damage{Offset: start, Line: lineNo, Bytes: int64(len(line))})
		if sep == sepEnd {
			s.intact = append(s.intact, batch...)
			s.intactAt = append(s.intactAt, batchPos...)
			if damaged == 0 {
				s.records = append(s.records, batch...)
				s.good = off
			} else {
				afterDamage = true
			}
			batch, batchPos = nil, nil
		}
	}
	s.total = off
	if len(batch) > 0 {
		unfinished(off, "at the end")
	}
	// A torn write leaves, after the last whole batch, the unfinished start
	// of its own batch and at most one damaged last line — in a journal
	// that had started (a header or a whole batch before it).
	torn := (s.headered || s.good > 0) && damaged <= 1 && !afterDamage && (damaged == 0 || lastBad)
	for i := range s.damage {
		s.damage[i].Torn = torn
	}
	if !torn && !s.headered && s.good == 0 && len(s.damage) > 0 && s.damage[0].Offset == 0 {
		s.damage[0].Reason += "; no intact record at the start: not a fleetd journal, or wholly damaged"
	}
	return s, nil
}

func headerLine() string {
	var buf bytes.Buffer
	encode(&buf, []byte(header), sepEnd)
	return buf.String()
}

// decode checks one line; reason is "" for an intact one.
func decode(line []byte) (rec []byte, sep byte, reason string) {
	switch {
	case len(line) == 0 || line[len(line)-1] != '\n':
		return nil, 0, "line without its newline (a write cut short)"
	case len(line) < 10 || (line[8] != sepEnd && line[8] != sepMore):
		return nil, 0, "not a journal line (want 8 hex digits of checksum, a space, a record)"
	}
	sum, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return nil, 0, "not a journal line (want 8 hex digits of checksum, a space, a record)"
	}
	rec = line[9 : len(line)-1]
	if uint64(crc32.Checksum(rec, castagnoli)) != sum {
		return nil, 0, "checksum mismatch"
	}
	return bytes.Clone(rec), line[8], ""
}

// lineOverhead is what encode adds to a record: its checksum, separator
// and newline.
const lineOverhead = 8 + 1 + 1

func encode(buf *bytes.Buffer, rec []byte, sep byte) error {
	if bytes.IndexByte(rec, '\n') >= 0 {
		return errors.New("journal record contains a newline")
	}
	fmt.Fprintf(buf, "%08x%c", crc32.Checksum(rec, castagnoli), sep)
	buf.Write(rec)
	buf.WriteByte('\n')
	return nil
}

func encodeBatch(buf *bytes.Buffer, recs [][]byte) error {
	n := 0
	for _, r := range recs {
		n += lineOverhead + len(r)
	}
	buf.Grow(n) // one allocation for the batch, not a doubling per growth
	for i, r := range recs {
		sep := byte(sepMore)
		if i == len(recs)-1 {
			sep = sepEnd
		}
		if err := encode(buf, r, sep); err != nil {
			return err
		}
	}
	return nil
}

// Append writes recs as one batch in one write and fsyncs the file. When it
// returns nil the records survive a crash; a batch cut short by a crash is
// dropped whole by the next Open. When the write or the fsync fails, the
// file is cut back to its last whole batch before Append returns the error,
// so the next record never follows a torn line; if even that fails, every
// later Append tries the cut again first and fails until it succeeds.
func (j *Journal) Append(recs ...[]byte) error {
	if len(recs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := encodeBatch(&buf, recs); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		if err := j.cutBack(); err != nil {
			return err
		}
	}
	_, err := j.f.Write(buf.Bytes())
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		err = fmt.Errorf("append to journal %s: %w", j.path, err)
		if cerr := j.cutBack(); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	j.size += int64(buf.Len())
	if j.tail != nil && !j.tailOver {
		if j.tail.Len()+buf.Len() > j.maxTail {
			j.tailOver, j.tail = true, &bytes.Buffer{}
		} else {
			j.tail.Write(buf.Bytes())
		}
	}
	return nil
}

// cutBack truncates the file to the end of its last whole batch and syncs
// it, recording in j.broken whether that worked.
func (j *Journal) cutBack() error {
	err := j.f.Truncate(j.size)
	if err == nil {
		_, err = j.f.Seek(j.size, io.SeekStart)
	}
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.broken = fmt.Errorf("journal %s: a failed append could not be cut back to byte %d, so nothing more is written: %w", j.path, j.size, err)
		return j.broken
	}
	j.broken = nil
	return nil
}

// Size is the journal's length in bytes.
func (j *Journal) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// ErrRewriteUnderWay is returned by BeginRewrite while another rewrite of
// the same journal has not finished.
var ErrRewriteUnderWay = errors.New("a rewrite of the journal is under way")

// Rewrite is a replacement of the journal's content that began at one point
// of its history: the owner took a snapshot of its state as of that point
// (every batch appended before BeginRewrite returned, none after) and hands
// it to Finish. Batches appended in between are kept and follow the
// snapshot in the new file.
type Rewrite struct {
	j    *Journal
	done bool
}

// BeginRewrite marks the point a snapshot is taken at. The caller must make
// sure no Append runs between the snapshot and this call (the messaging
// core holds its commit lock across both). Every Rewrite must end with
// Finish or Abort.
func (j *Journal) BeginRewrite() (*Rewrite, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.tail != nil {
		return nil, ErrRewriteUnderWay
	}
	j.tail, j.tailOver = &bytes.Buffer{}, false
	return &Rewrite{j: j}, nil
}

// Records reads the file again and returns its records, in append order:
// every batch acknowledged so far, for an owner that keeps no copy of what
// it appended (the state database). Appends wait until it is done.
func (j *Journal) Records() ([][]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return readRecords(j.path, j.size)
}

// readRecords returns the records of the first size bytes of the journal
// file at path, which must be whole batches of intact records.
func readRecords(path string, size int64) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	s, err := scan(io.LimitReader(f, size))
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	if len(s.damage) > 0 || s.total != size {
		return nil, fmt.Errorf("read journal %s: %w: %d bytes read of %d, %d damaged stretches", path, ErrCorrupt, s.total, size, len(s.damage))
	}
	return s.records, nil
}

// Abort ends the rewrite without changing the journal.
func (r *Rewrite) Abort() {
	if r.done {
		return
	}
	r.done = true
	r.j.mu.Lock()
	r.j.tail, r.j.tailOver = nil, false
	r.j.mu.Unlock()
}

// Finish replaces the journal's content with recs, the snapshot as of
// BeginRewrite, followed by every batch appended since. recs are written to
// a temporary file beside the journal and fsynced while Appends go on; then,
// under the journal's lock, the batches appended meanwhile are written after
// them, the file is fsynced again, renamed over the journal and the
// directory is fsynced, and Appends continue in the new file. At every
// instant the file at the journal's path holds every batch Append
// acknowledged: the old file until the rename, the new one (complete and
// fsynced) after it. On error before the rename the old file stays the
// journal and the temporary file is removed.
func (r *Rewrite) Finish(recs [][]byte) error {
	if r.done {
		return errors.New("journal rewrite already finished")
	}
	defer r.Abort()
	j := r.j
	buf, err := content(recs)
	if err != nil {
		return err
	}
	tmp := j.path + ".compact"
	osf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, statedir.FileMode)
	if err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	f := j.wrap(osf)
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("compact journal: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("compact journal: sync %s: %w", tmp, err)
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.tailOver {
		return fmt.Errorf("compact journal: more than %d bytes were appended while the rewrite ran; it is abandoned", j.maxTail)
	}
	tail := j.tail.Bytes()
	if len(tail) > 0 {
		if _, err := f.Write(tail); err != nil {
			return fmt.Errorf("compact journal: write %s: %w", tmp, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("compact journal: sync %s: %w", tmp, err)
		}
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("compact journal: %w", err)
	}
	// From here the new file is the journal, whatever else fails: the old
	// one has no name any more, and an append to it would be lost. A cut
	// back the old file still owed is moot: the new one holds whole
	// batches only.
	renamed = true
	old := j.f
	j.f, j.size, j.broken = f, int64(len(buf)+len(tail)), nil
	errs := []error{j.syncDir(filepath.Dir(j.path))}
	if err := old.Close(); err != nil {
		errs = append(errs, fmt.Errorf("compact journal: close old file: %w", err))
	}
	return errors.Join(errs...)
}

// Rewrite replaces the journal's whole content with recs at once: a
// [Journal.BeginRewrite] and [Rewrite.Finish] with nothing in between.
func (j *Journal) Rewrite(recs [][]byte) error {
	r, err := j.BeginRewrite()
	if err != nil {
		return err
	}
	return r.Finish(recs)
}

// content is a whole journal holding recs.
func content(recs [][]byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(headerLine())
	for _, r := range recs {
		if err := encode(&buf, r, sepEnd); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// replace writes data to a temporary file beside path, fsyncs it, renames
// it over path and fsyncs the directory. It returns the new file, open.
func replace(path string, data []byte) (*os.File, error) {
	tmp := path + ".compact"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, statedir.FileMode)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return fail(fmt.Errorf("write %s: %w", tmp, err))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("sync %s: %w", tmp, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Report is what Check found in a journal.
type Report struct {
	Path    string
	Size    int64
	Records int      // intact records (in whole batches, accepted by the owner's check)
	Damage  []Damage // in file order; empty for a clean journal
	// Refused: Open refuses this file (damage a torn write cannot explain).
	Refused bool
}

// Check reads the journal at path without changing it and reports every
// damaged line and unfinished batch with its offset. max bounds the file
// as [Options.MaxBytes] does. valid, if not nil, is the owner's check of
// one intact record; a record it refuses is damage too (and makes the file
// one the owner cannot replay).
func Check(path string, max int64, valid func([]byte) error) (Report, error) {
	rep, _, err := check(path, max, valid)
	return rep, err
}

func check(path string, max int64, valid func([]byte) error) (Report, [][]byte, error) {
	f, err := statedir.Open(path, os.O_RDONLY, maxBytes(max))
	if err != nil {
		return Report{}, nil, fmt.Errorf("check journal: %w", err)
	}
	defer f.Close()
	s, err := scan(f)
	if err != nil {
		return Report{}, nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	rep := Report{Path: path, Size: s.total, Damage: s.damage, Refused: s.refusal(path) != nil}
	var keep [][]byte
	for i, rec := range s.intact {
		if valid != nil {
			if err := valid(rec); err != nil {
				d := s.intactAt[i]
				d.Reason = "intact line, but not a record fleetd can replay: " + err.Error()
				rep.Damage = append(rep.Damage, d)
				rep.Refused = true
				continue
			}
		}
		keep = append(keep, rec)
	}
	rep.Records = len(keep)
	slices.SortStableFunc(rep.Damage, func(a, b Damage) int { return cmp.Compare(a.Offset, b.Offset) })
	return rep, keep, nil
}

// Repair rewrites the journal at path with every intact record Check
// accepts, in order, and keeps the original, unchanged, at backup. The
// original is linked (or, where links fail, copied and fsynced) to backup
// first; the repaired file replaces it by rename, so a crash at any point
// leaves the original or the repaired journal at path and the original at
// backup. A clean journal is left alone (backup is not created). The caller
// must make sure nothing has the journal open (fleetd's state-directory
// lock). max bounds the file as [Options.MaxBytes] does.
func Repair(path, backup string, max int64, valid func([]byte) error) (Report, error) {
	rep, keep, err := check(path, max, valid)
	if err != nil {
		return Report{}, err
	}
	if len(rep.Damage) == 0 {
		return rep, nil
	}
	data, err := content(keep)
	if err != nil {
		return Report{}, err
	}
	if err := preserve(path, backup, maxBytes(max)); err != nil {
		return Report{}, fmt.Errorf("repair journal: keep the original: %w", err)
	}
	f, err := replace(path, data)
	if err != nil {
		return Report{}, fmt.Errorf("repair journal: %w", err)
	}
	return rep, f.Close()
}

// preserve makes backup a second name (or a synced copy) of path, a file
// of at most max bytes.
func preserve(path, backup string, max int64) error {
	if err := os.Link(path, backup); err == nil {
		return syncDir(filepath.Dir(backup))
	} else if errors.Is(err, os.ErrExist) {
		return err
	}
	src, err := statedir.Open(path, os.O_RDONLY, max)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, statedir.FileMode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(backup))
}

// Close closes the file. Records already appended are durable.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

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
