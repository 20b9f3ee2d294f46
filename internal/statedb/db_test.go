package statedb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// open opens a database at path and closes it when the test ends.
func open(t *testing.T, path string, opts *Options) *DB {
	t.Helper()
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// contents is every table of db as key → value strings.
func contents(t *testing.T, db *DB, tables ...string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, tb := range tables {
		err := db.Each(tb, func(k string, v []byte) error {
			if out[tb] == nil {
				out[tb] = map[string]string{}
			}
			out[tb][k] = string(v)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// reopened closes db and returns the contents of the file, read again.
func reopened(t *testing.T, db *DB, path string, tables ...string) map[string]map[string]string {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := open(t, path, nil)
	return contents(t, again, tables...)
}

// Puts and deletes that Wait returned for are in the file: a database
// opened again has the same tables.
func TestDB_CommittedChangesSurviveAReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	must(t, db.Write(Put(Owned, "alpha", []byte(`{"paneId":"w1:p1"}`)), Put(Owned, "beta", []byte(`{"paneId":"w1:p2"}`))))
	must(t, db.Write(Put(Tokens, "ab12", []byte(`{"member":"alpha"}`))))
	must(t, db.Write(Delete(Owned, "beta"), Put(Owned, "alpha", []byte(`{"paneId":"w1:p3"}`))))
	must(t, db.Write(Delete(Owned, "never-there")))
	want := map[string]map[string]string{
		Owned:  {"alpha": `{"paneId":"w1:p3"}`},
		Tokens: {"ab12": `{"member":"alpha"}`},
	}
	if diff := cmp.Diff(want, contents(t, db, Owned, Tokens)); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, reopened(t, db, path, Owned, Tokens)); diff != "" {
		t.Errorf("tables read again (-want +got):\n%s", diff)
	}
}

// The first Each of a table is what Open read with what was committed
// since, from memory: start-up reads the file once (here it is gone by
// then). The database keeps no copy after it; a later Each reads the file
// again and sees every change committed meanwhile.
func TestDB_EachHandsATableOverOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	must(t, db.Write(Put(Owned, "alpha", []byte(`{"paneId":"w1:p1"}`))))
	must(t, db.Close())
	db = open(t, path, nil)
	must(t, db.Write(Put(Owned, "beta", []byte(`{"paneId":"w1:p2"}`))))
	must(t, os.Rename(path, path+".away"))
	want := map[string]map[string]string{Owned: {"alpha": `{"paneId":"w1:p1"}`, "beta": `{"paneId":"w1:p2"}`}}
	if diff := cmp.Diff(want, contents(t, db, Owned)); diff != "" {
		t.Errorf("first read (-want +got):\n%s", diff)
	}
	must(t, os.Rename(path+".away", path))
	must(t, db.Write(Delete(Owned, "alpha"), Put(Owned, "gamma", []byte(`{"paneId":"w1:p3"}`))))
	want = map[string]map[string]string{Owned: {"beta": `{"paneId":"w1:p2"}`, "gamma": `{"paneId":"w1:p3"}`}}
	if diff := cmp.Diff(want, contents(t, db, Owned)); diff != "" {
		t.Errorf("read again (-want +got):\n%s", diff)
	}
}

// Clear deletes every key of a table, durably, without handing it over:
// the owner's first Each after it still reads from memory (the file is
// away by then) and finds the table empty; other tables are untouched,
// and the deletes are in the file for the next Open.
func TestDB_ClearEmptiesATableAndKeepsItsHandover(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	must(t, db.Write(Put(Owned, "alpha", []byte(`{"paneId":"w1:p1"}`)), Put(Owned, "beta", []byte(`{"paneId":"w1:p2"}`)),
		Put(Memory, "alpha", []byte(`{"restarts":1}`))))
	must(t, db.Clear(Owned))
	must(t, os.Rename(path, path+".away"))
	if diff := cmp.Diff(map[string]map[string]string{}, contents(t, db, Owned)); diff != "" {
		t.Errorf("the first read after Clear (-want +got):\n%s", diff)
	}
	must(t, os.Rename(path+".away", path))
	must(t, db.Close())
	db = open(t, path, nil)
	want := map[string]map[string]string{Memory: {"alpha": `{"restarts":1}`}}
	if diff := cmp.Diff(want, contents(t, db, Owned, Memory)); diff != "" {
		t.Errorf("reopened (-want +got):\n%s", diff)
	}
}

// heldFile counts writes and fsyncs, and holds an fsync while hold is
// set, saying so on entered.
type heldFile struct {
	File
	hold          *atomic.Pointer[chan struct{}]
	entered       chan<- struct{}
	writes, syncs *atomic.Int32
}

func (f *heldFile) Write(p []byte) (int, error) {
	f.writes.Add(1)
	return f.File.Write(p)
}

func (f *heldFile) Sync() error {
	if h := f.hold.Load(); h != nil {
		f.entered <- struct{}{}
		<-*h
	}
	f.syncs.Add(1)
	return f.File.Sync()
}

// Changes staged while a batch is being written go out together in the
// next one: a hundred commits staged meanwhile cost one more write and one
// more fsync, not a hundred, and none of them is acknowledged before its
// fsync.
func TestDB_CommitsStagedMeanwhileShareOneWriteAndFsync(t *testing.T) {
	t.Parallel()
	var (
		hold          atomic.Pointer[chan struct{}]
		writes, syncs atomic.Int32
		entered       = make(chan struct{}, 1)
	)
	db := open(t, filepath.Join(t.TempDir(), "state.journal"), &Options{Wrap: func(f File) File {
		return &heldFile{File: f, hold: &hold, entered: entered, writes: &writes, syncs: &syncs}
	}})
	writes.Store(0)
	syncs.Store(0)
	release := make(chan struct{})
	hold.Store(&release)

	first := db.Stage(Put(Owned, "m000", []byte(`{}`)))
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Wait() }() // has the committer write it
	<-entered                                 // the committer is in the first batch's fsync
	var later []*Commit
	for i := 1; i <= 100; i++ {
		later = append(later, db.Stage(Put(Owned, fmt.Sprintf("m%03d", i), []byte(`{}`))))
	}
	for i, c := range append([]*Commit{first}, later...) {
		select {
		case <-c.done:
			t.Fatalf("commit %d acknowledged before its fsync", i)
		default:
		}
	}
	hold.Store(nil)
	close(release)
	must(t, <-firstDone)
	for _, c := range later {
		must(t, c.Wait())
	}
	if w, s := writes.Load(), syncs.Load(); w != 2 || s != 2 {
		t.Errorf("101 commits took %d writes and %d fsyncs; want 2 and 2 (the first batch, then the other 100 together)", w, s)
	}
	if n := len(contents(t, db, Owned)[Owned]); n != 101 {
		t.Errorf("%d records, want 101", n)
	}
}

// openCounting opens a database in a new directory whose writes and
// fsyncs from now on are counted.
func openCounting(t *testing.T) (path string, db *DB, writes, syncs *atomic.Int32) {
	t.Helper()
	var hold atomic.Pointer[chan struct{}]
	writes, syncs = new(atomic.Int32), new(atomic.Int32)
	path = filepath.Join(t.TempDir(), "state.journal")
	db = open(t, path, &Options{Wrap: func(f File) File {
		return &heldFile{File: f, hold: &hold, writes: writes, syncs: syncs}
	}})
	writes.Store(0)
	syncs.Store(0)
	return path, db, writes, syncs
}

// A change nobody waits for costs no write of its own: it goes out with
// the next batch someone waits for (or at Sync, or once maxLazy changes
// are queued), in one write and one fsync with it.
func TestDB_AChangeNobodyWaitsForGoesOutWithTheNextWaitedBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		path, db, writes, syncs := openCounting(t)

		db.Stage(Delete(Owned, "gone"), Put(Tokens, "ab12", []byte(`{}`)))
		synctest.Wait() // the committer is idle: nothing woke it
		if w, s := writes.Load(), syncs.Load(); w != 0 || s != 0 {
			t.Fatalf("a change nobody waits for took %d writes and %d fsyncs of its own; want 0 and 0", w, s)
		}
		must(t, db.Write(Put(Owned, "alpha", []byte(`{}`))))
		if w, s := writes.Load(), syncs.Load(); w != 1 || s != 1 {
			t.Errorf("the unwaited change and the waited one took %d writes and %d fsyncs; want 1 and 1", w, s)
		}

		for i := range maxLazy {
			db.Stage(Put(Memory, fmt.Sprintf("m%04d", i), []byte(`{}`)))
		}
		synctest.Wait()
		if w := writes.Load(); w != 2 {
			t.Errorf("%d changes queued with nobody waiting: %d writes in all; want 2 (they are written once that many are queued)", maxLazy, w)
		}
		want := map[string]map[string]string{Owned: {"alpha": `{}`}, Tokens: {"ab12": `{}`}}
		got := reopened(t, db, path, Owned, Tokens)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tables read again (-want +got):\n%s", diff)
		}
	})
}

// A started commit is written without anyone waiting for it: it is
// durable once the committer is idle again, in one write and fsync, and
// Wait then returns at once.
func TestDB_AStartedCommitIsWrittenWithoutAWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		path, db, writes, syncs := openCounting(t)

		c := db.Stage(Put(Owned, "alpha", []byte(`{}`)))
		if c.Durable() {
			t.Fatal("a staged commit is durable before anything was written")
		}
		c.Start()
		synctest.Wait() // the committer wrote it and is idle again
		if !c.Durable() {
			t.Fatal("a started commit is not durable once the committer is idle")
		}
		if w, s := writes.Load(), syncs.Load(); w != 1 || s != 1 {
			t.Errorf("a started commit took %d writes and %d fsyncs; want 1 and 1", w, s)
		}
		must(t, c.Wait())
		if diff := cmp.Diff(map[string]map[string]string{Owned: {"alpha": `{}`}}, reopened(t, db, path, Owned)); diff != "" {
			t.Errorf("tables read again (-want +got):\n%s", diff)
		}
	})
}

// Changes staged one after another reach the file in that order: the last
// put of a key wins, also when both are in one batch.
func TestDB_ChangesReachTheFileInTheOrderStaged(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	var cs []*Commit
	for i := range 50 {
		cs = append(cs, db.Stage(Put(Memory, "alpha", []byte(fmt.Sprint(i)))))
		if i%7 == 3 {
			cs = append(cs, db.Stage(Delete(Memory, "alpha")))
		}
	}
	for _, c := range cs {
		must(t, c.Wait())
	}
	want := map[string]map[string]string{Memory: {"alpha": "49"}}
	if diff := cmp.Diff(want, reopened(t, db, path, Memory)); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

// failingFile fails writes while fail is set, writing half of what it was
// given first (a full disk).
type failingFile struct {
	File
	fail *atomic.Bool
}

var errInjected = errors.New("injected fault")

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fail.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

// A batch whose write fails fails every commit in it, changes nothing —
// neither the tables nor the file — and the next batch is written whole.
func TestDB_AFailedWriteFailsItsCommitsAndChangesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	var fail atomic.Bool
	db := open(t, path, &Options{Wrap: func(f File) File { return &failingFile{File: f, fail: &fail} }})
	must(t, db.Write(Put(Tokens, "aa", []byte(`{"member":"alpha"}`))))
	fail.Store(true)
	if err := db.Write(Put(Tokens, "bb", []byte(`{"member":"beta"}`)), Delete(Tokens, "aa")); !errors.Is(err, errInjected) {
		t.Fatalf("Write on a failing disk = %v, want the fault", err)
	}
	want := map[string]map[string]string{Tokens: {"aa": `{"member":"alpha"}`}}
	if diff := cmp.Diff(want, contents(t, db, Tokens)); diff != "" {
		t.Errorf("tables after the failed write (-want +got):\n%s", diff)
	}
	fail.Store(false)
	must(t, db.Write(Put(Tokens, "cc", []byte(`{"member":"gamma"}`))))
	want[Tokens]["cc"] = `{"member":"gamma"}`
	if diff := cmp.Diff(want, reopened(t, db, path, Tokens)); diff != "" {
		t.Errorf("tables read again (-want +got):\n%s", diff)
	}
}

// What was staged and never waited for is written by Close; what is staged
// after Close fails.
func TestDB_CloseWritesWhatIsStaged(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	db.Stage(Delete(Owned, "gone"), Put(Owned, "kept", []byte(`{"paneId":"w1:p1"}`)))
	must(t, db.Close())
	if err := db.Write(Put(Owned, "late", []byte(`{}`))); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	again := open(t, path, nil)
	want := map[string]map[string]string{Owned: {"kept": `{"paneId":"w1:p1"}`}}
	if diff := cmp.Diff(want, contents(t, again, Owned)); diff != "" {
		t.Errorf("tables read again (-want +got):\n%s", diff)
	}
}

// The file is compacted as it grows: rewriting a thousand records again
// and again keeps it within a few times its live size, and the database
// read again holds exactly the last value of every key.
func TestDB_CompactsToItsLiveRecords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	value := []byte(`{"paneId":"w1:p1","terminalId":"term_0123456789abcdef","padding":"` + strings.Repeat("x", 200) + `"}`)
	for range 20 {
		var cs []*Commit
		for i := range 1000 {
			cs = append(cs, db.Stage(Put(Owned, fmt.Sprintf("m%04d", i), value)))
		}
		for _, c := range cs {
			must(t, c.Wait())
		}
	}
	for i := range 10 {
		must(t, db.Write(Delete(Owned, fmt.Sprintf("m%04d", i))))
	}
	got := reopened(t, db, path, Owned)[Owned]
	if len(got) != 990 {
		t.Errorf("%d records, want 990", len(got))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	live := int64(1000 * (len(value) + 40))
	if fi.Size() > 3*live+compactSlack {
		t.Errorf("file of %d bytes for %d live bytes: not compacted", fi.Size(), live)
	}
}

// A damaged record is refused at Open, naming the file; Check lists the
// damage and Repair keeps every intact record.
func TestOpen_RefusesDamageACrashCannotExplain(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := open(t, path, nil)
	must(t, db.Write(Put(Owned, "alpha", []byte(`{"a":1}`))))
	must(t, db.Write(Put(Owned, "beta", []byte(`{"b":2}`))))
	must(t, db.Close())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := strings.Replace(string(data), `"alpha"`, `"alphX"`, 1) // its checksum no longer matches
	must(t, os.WriteFile(path, []byte(damaged), 0o600))
	if _, err := Open(path, nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a damaged file = %v, want ErrCorrupt naming the file", err)
	}
	rep, err := Check(path)
	if err != nil || len(rep.Damage) != 1 || !rep.Refused {
		t.Fatalf("Check = %+v, %v; want one damaged line that Open refuses", rep, err)
	}
	rep, backup, err := Repair(path, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	if err != nil || backup != path+".broken-20261202T100000Z" {
		t.Fatalf("Repair = %+v, %q, %v", rep, backup, err)
	}
	if kept, _ := os.ReadFile(backup); string(kept) != damaged {
		t.Error("the backup is not the original")
	}
	want := map[string]map[string]string{Owned: {"beta": `{"b":2}`}}
	if diff := cmp.Diff(want, contents(t, open(t, path, nil), Owned)); diff != "" {
		t.Errorf("tables after the repair (-want +got):\n%s", diff)
	}
}

// A nil database keeps nothing and fails nothing: owners without a state
// directory run on it.
func TestDB_NilKeepsNothing(t *testing.T) {
	t.Parallel()
	var db *DB
	must(t, db.Write(Put(Owned, "alpha", []byte(`{}`))))
	if n := len(contents(t, db, Owned)); n != 0 {
		t.Errorf("nil database holds %d tables", n)
	}
	must(t, db.Close())
}

// A change without a key or with a value that is not JSON is refused
// before anything is written; the other commits go on.
func TestDB_RefusesMalformedChanges(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "state.journal"), nil)
	for name, c := range map[string]Change{
		"no key":      Put(Owned, "", []byte(`{}`)),
		"no table":    Put("", "alpha", []byte(`{}`)),
		"not JSON":    Put(Owned, "alpha", []byte("{\n")),
		"empty value": Put(Owned, "alpha", nil),
	} {
		if err := db.Write(c); err == nil {
			t.Errorf("%s: Write = nil, want an error", name)
		}
	}
	must(t, db.Write(Put(Owned, "alpha", []byte(`{}`))))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Sync returns once every change staged before it is committed: the
// tables then hold them.
func TestDB_SyncWaitsForWhatWasStaged(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "state.journal"), nil)
	must(t, db.Sync()) // nothing staged
	for i := range 200 {
		db.Stage(Put(Owned, fmt.Sprintf("m%03d", i), []byte(`{}`)))
		if i%50 == 49 {
			must(t, db.Sync())
			if n := len(contents(t, db, Owned)[Owned]); n != i+1 {
				t.Fatalf("after Sync: %d records, want %d", n, i+1)
			}
		}
	}
}

// BenchmarkStage_ThenWait: a batch of changes staged one at a time, as a
// fleet starting stages its token and ownership records, then waited for.
func BenchmarkStage_ThenWait(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "state.journal"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := []byte(`{"member":"m0001","uid":"5d0b9f0e-2c4a-4f7e-9a51-3b1c2d4e5f60","paneId":"w1:p12"}`)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("m%04d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		var c *Commit
		for _, k := range keys {
			c = db.Stage(Put("owned", k, value))
		}
		if err := c.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}
