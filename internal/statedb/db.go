package statedb

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/fleetd-dev/fleetd/internal/journal"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// ErrCorrupt is wrapped by [Open]'s error for a file damaged in a way a
// crash cannot explain: [Check] lists the damage, [Repair] keeps every
// intact record.
var ErrCorrupt = journal.ErrCorrupt

// ErrClosed is the error of a [Commit] staged after [DB.Close].
var ErrClosed = errors.New("state database closed")

// File is what the database needs of its open file (an *os.File, or a
// wrapper that injects faults: [Options].Wrap).
type File = journal.File

// Options tune [Open]. nil means defaults.
type Options struct {
	// Logger receives compaction failures (the file then keeps growing
	// until a later compaction succeeds); default discards.
	Logger *slog.Logger
	// Wrap is applied to every file the database opens (now and when it
	// is compacted): tests inject faults and crashes with it.
	Wrap func(File) File
}

// compactSlack is how much larger than twice its live records the file
// grows before it is compacted.
const compactSlack = 1 << 20

// DB is an open state database. Its methods are safe for concurrent use;
// a nil *DB keeps nothing: its commits succeed at once (an owner without a
// state directory keeps its records in memory only).
type DB struct {
	path string
	j    *journal.Journal
	log  *slog.Logger

	mu sync.Mutex
	// tables are the records of the tables no owner has read yet: each
	// key's last committed record (its whole line). Each hands a table to
	// its owner, which keeps it decoded; from then on the table is in the
	// file only (handed).
	tables map[string]map[string][]byte
	handed map[string]bool
	// sizes are the lengths of the live records, by a 32-bit hash of
	// their table and key (seed): what the compaction counts, without the
	// keys, in 8 bytes a record (a longer one than 4 GiB could not be
	// read back: statedir.MaxStateDBBytes).
	// Two live keys with the same hash (about one chance in 400 for five
	// thousand keys) share an entry, the last written one's length: live
	// is then smaller than the truth by a record's length or two, and a
	// compaction comes that much earlier — it never comes later.
	sizes  map[uint32]uint32
	seed   maphash.Seed
	live   int64   // bytes of the live records: the sum of sizes
	next   *Commit // changes staged since the committer took the last
	taken  *Commit // the batch the committer is writing, if any
	closed bool

	// spareRecs and spareChanges are the arrays of the last batch
	// written, empty, for the next commit to stage its changes in.
	spareRecs    [][]byte
	spareChanges []Change

	// compacting is set while a compaction's rewrite runs; after one
	// failed, the next waits until the file is past retryAt.
	compacting bool
	retryAt    int64

	kick chan struct{} // (buffered) something is staged
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the committer has ended
	wg   sync.WaitGroup
}

// Commit is a group of changes staged together: they reach the file in
// one batch, with the other changes staged before the committer took it.
type Commit struct {
	db      *DB // nil for a commit that never reaches the file
	recs    [][]byte
	changes []Change
	done    chan struct{}
	err     error
}

// Wait has the committer write the commit (if nobody has yet) and blocks
// until its changes are in the file and fsynced, and returns nil; or
// returns why they are not (and will not be): the write or the fsync
// failed, or the database was closed before they were staged. It waits
// for two writes and fsyncs of the committer at most: the one under way,
// then its own.
func (c *Commit) Wait() error {
	if c.db != nil {
		c.db.wake()
	}
	<-c.done
	return c.err
}

// Start has the committer write the commit now (if nobody has yet),
// without waiting for it: its changes are durable soon, and [Commit.Wait]
// or [Commit.Durable] says when.
func (c *Commit) Start() {
	if c.db != nil {
		c.db.wake()
	}
}

// Durable reports, without blocking, whether the commit's changes are in
// the file and fsynced: false while they are on their way, and for good
// when they failed.
func (c *Commit) Durable() bool {
	select {
	case <-c.done:
		return c.err == nil
	default:
		return false
	}
}

// failed is a commit that never reaches the file.
func failed(err error) *Commit {
	c := &Commit{done: make(chan struct{}), err: err}
	close(c.done)
	return c
}

// Open opens (creating it, mode 0600) the database at path and reads it
// whole. A write a crash cut short is dropped; any other damage is refused
// with an error wrapping [ErrCorrupt] that names the file and the offset
// or record ([Check] lists it all, [Repair] keeps every intact record). A
// file larger than statedir.MaxStateDBBytes, or not a regular file, is
// refused too.
func Open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	j, recs, _, err := journal.OpenWith(path, &journal.Options{Wrap: o.Wrap, MaxBytes: statedir.MaxStateDBBytes})
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	db := &DB{
		path: path, j: j, log: o.Logger,
		tables: map[string]map[string][]byte{}, handed: map[string]bool{},
		sizes: map[uint32]uint32{}, seed: maphash.MakeSeed(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	for i, raw := range recs {
		c, err := decode(raw)
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("state database: %w: %s: record %d: %v", ErrCorrupt, path, i+1, err)
		}
		db.apply(c, raw)
	}
	go db.commitLoop()
	return db, nil
}

// Each calls fn with every key of table and its value, in key order,
// until fn returns an error, which Each returns. Owners read their table
// with it once, when they start, and keep what they read: the first Each
// of a table hands it over from memory (what Open read and what was
// committed since), and the database keeps no copy of it after that; a
// later Each of the same table reads the file again.
func (db *DB) Each(table string, fn func(key string, value []byte) error) error {
	if db == nil {
		return nil
	}
	db.mu.Lock()
	t, handed := db.tables[table], db.handed[table]
	delete(db.tables, table)
	db.handed[table] = true
	db.mu.Unlock()
	if handed {
		tables, err := db.read()
		if err != nil {
			return err
		}
		t = tables[table]
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		c, err := decode(t[k])
		if err != nil { // decoded once already, by Open or Stage
			return fmt.Errorf("state database %s: %s/%s: %w", db.path, table, k, err)
		}
		if err := fn(k, c.Value); err != nil {
			return err
		}
	}
	return nil
}

// Clear deletes every key of table and waits until that is durable. It
// does not hand the table over: its owner's first Each still reads it
// from memory, empty (the simulated herdr forgets an earlier run's panes
// before the controllers read their records, and start-up reads the file
// once). A table already handed over is read from the file for its keys.
func (db *DB) Clear(table string) error {
	if db == nil {
		return nil
	}
	db.mu.Lock()
	keys, handed := slices.Collect(maps.Keys(db.tables[table])), db.handed[table]
	db.mu.Unlock()
	if handed {
		tables, err := db.read()
		if err != nil {
			return err
		}
		keys = slices.Collect(maps.Keys(tables[table]))
	}
	drop := make([]Change, len(keys))
	for i, k := range keys {
		drop[i] = Delete(table, k)
	}
	return db.Write(drop...)
}

// Stage queues changes to be written together and returns their commit
// without waiting. They are written with the next batch someone waits for
// ([Commit.Wait], [DB.Write], [DB.Sync]) or at [DB.Close] — a change
// nobody waits for costs no write of its own, and no fsync runs beside
// the caller's next steps — or once maxLazy changes are queued. Changes
// staged one after another reach the file in that order.
func (db *DB) Stage(changes ...Change) *Commit {
	if db == nil || len(changes) == 0 {
		return failed(nil)
	}
	var one [1][]byte // most stage one change: no array of their own
	recs := one[:0]
	for _, c := range changes {
		rec, err := encode(c)
		if err != nil {
			return failed(err)
		}
		recs = append(recs, rec)
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return failed(fmt.Errorf("state database %s: %w", db.path, ErrClosed))
	}
	c := db.next
	if c == nil {
		c = &Commit{db: db, recs: db.spareRecs, changes: db.spareChanges, done: make(chan struct{})}
		db.next, db.spareRecs, db.spareChanges = c, nil, nil
	}
	c.recs = append(c.recs, recs...)
	c.changes = append(c.changes, changes...)
	full := len(c.recs) >= maxLazy
	db.mu.Unlock()
	if full {
		db.wake()
	}
	return c
}

// maxLazy bounds the changes staged and not yet written that nobody waits
// for.
const maxLazy = 1024

// maxSpare bounds the arrays of a written batch kept for the next one.
const maxSpare = 2 * maxLazy

// wake has the committer write what is staged.
func (db *DB) wake() {
	select {
	case db.kick <- struct{}{}:
	default: // it is woken already
	}
}

// Write stages changes and waits for them: [DB.Stage] and [Commit.Wait].
func (db *DB) Write(changes ...Change) error {
	return db.Stage(changes...).Wait()
}

// Sync writes every change staged before it and waits until they are
// durable (or failed, which it returns): a drop nobody waited for, say,
// before the owner stops.
func (db *DB) Sync() error {
	if db == nil {
		return nil
	}
	db.mu.Lock()
	c := db.next
	if c == nil {
		c = db.taken
	}
	db.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Wait()
}

// Close writes what is staged, stops the committer, waits for a
// compaction under way and closes the file. Commits staged after it fail
// with [ErrClosed]. It is safe to call more than once, and on nil.
func (db *DB) Close() error {
	if db == nil {
		return nil
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		<-db.done
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	close(db.stop)
	<-db.done
	db.wg.Wait()
	return db.j.Close()
}

// commitLoop is the committer: it writes what is staged, batch after
// batch, until Close.
func (db *DB) commitLoop() {
	defer close(db.done)
	for {
		select {
		case <-db.kick:
			db.commit()
		case <-db.stop:
			db.commit() // what was staged before Close
			return
		}
	}
}

// commit appends everything staged as one batch, applies it to the tables
// once it is durable and tells its waiters; then compacts if it is time.
func (db *DB) commit() {
	db.mu.Lock()
	c := db.next
	db.next, db.taken = nil, c
	db.mu.Unlock()
	if c == nil {
		return
	}
	err := db.j.Append(c.recs...)
	db.mu.Lock()
	if err != nil {
		c.err = fmt.Errorf("state database: %w", err)
	} else {
		for i, ch := range c.changes {
			db.apply(ch, c.recs[i])
		}
	}
	db.taken = nil
	// The tables hold what is kept; a commit a caller still holds (a
	// token minted ahead keeps its own) keeps no copy of its batch. Its
	// arrays, emptied, are the next commit's, unless a burst made them
	// larger than a database needs to keep.
	if cap(c.recs) <= maxSpare && cap(c.changes) <= maxSpare {
		clear(c.recs)
		clear(c.changes)
		db.spareRecs, db.spareChanges = c.recs[:0], c.changes[:0]
	}
	c.recs, c.changes = nil, nil
	db.mu.Unlock()
	close(c.done)
	db.compactIfDue()
}

// apply makes a committed change, rec its record, part of the live
// records' sizes and, while its table is not handed, of the tables; the
// caller holds mu (or is Open, before anything else runs).
func (db *DB) apply(c Change, rec []byte) {
	h := db.keyHash(c)
	db.live -= int64(db.sizes[h])
	delete(db.sizes, h)
	if c.Value != nil {
		db.sizes[h] = uint32(len(rec))
		db.live += int64(len(rec))
	}
	if !db.handed[c.Table] {
		put(db.tables, c, rec)
	}
}

// keyHash is the hash of c's table and key that sizes are kept by.
func (db *DB) keyHash(c Change) uint32 {
	var h maphash.Hash
	h.SetSeed(db.seed)
	h.WriteString(c.Table)
	h.WriteByte(0) // no table name holds one
	h.WriteString(c.Key)
	return uint32(h.Sum64())
}

// put makes a change, rec its record, part of tables.
func put(tables map[string]map[string][]byte, c Change, rec []byte) {
	t := tables[c.Table]
	delete(t, c.Key)
	if c.Value == nil {
		return
	}
	if t == nil {
		t = map[string][]byte{}
		tables[c.Table] = t
	}
	t[c.Key] = rec
}

// read reads the file again and replays it: every table, as committed.
func (db *DB) read() (map[string]map[string][]byte, error) {
	recs, err := db.j.Records()
	if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	tables := map[string]map[string][]byte{}
	for i, raw := range recs {
		c, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("state database: %w: %s: record %d: %v", ErrCorrupt, db.path, i+1, err)
		}
		put(tables, c, raw)
	}
	return tables, nil
}

// compactIfDue starts a compaction when the file holds more than twice its
// live records and compactSlack more. It runs in the committer, between
// two batches: the snapshot it takes is the file's content as of the last
// batch, read again from the file (the database keeps no copy of a handed
// table), and the journal keeps the batches appended while the rewrite
// runs (journal.Rewrite).
func (db *DB) compactIfDue() {
	size := db.j.Size() // not under mu: a rewrite's last step holds the journal
	db.mu.Lock()
	due := !db.compacting && !db.closed && size > 2*db.live+compactSlack && size > db.retryAt
	db.mu.Unlock()
	if !due {
		return
	}
	tables, err := db.read() // no batch is written meanwhile: this is the committer
	var rw *journal.Rewrite
	if err == nil {
		rw, err = db.j.BeginRewrite()
	}
	db.mu.Lock()
	if err != nil {
		db.retryAt = size + compactSlack
		db.mu.Unlock()
		db.log.Warn("could not compact the state database; it is tried again as it grows", "path", db.path, "err", err)
		return
	}
	db.compacting = true
	snapshot := make([][]byte, 0, len(db.sizes))
	db.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		t := tables[name]
		for _, k := range slices.Sorted(maps.Keys(t)) {
			snapshot = append(snapshot, t[k])
		}
	}
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		err := rw.Finish(snapshot)
		size := db.j.Size()
		db.mu.Lock()
		db.compacting = false
		if err != nil {
			db.retryAt = size + compactSlack
		}
		db.mu.Unlock()
		if err != nil {
			db.log.Warn("could not compact the state database; it is tried again as it grows", "path", db.path, "err", err)
		}
	}()
}
