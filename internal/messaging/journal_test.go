package messaging

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/journal"
)

func journalSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(JournalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Once mail is acknowledged the journal shrinks back: it does not keep the
// history of every message ever stored.
func TestJournal_CompactsAfterAcks(t *testing.T) {
	dir := t.TempDir()
	const compactAt = 64 << 10
	c := newCore(t, dir, &fakeHerdr{}, &Options{CompactBytes: compactAt})
	content := strings.Repeat("x", 4<<10)
	for range 100 {
		if _, err := c.Reply(bg, "w", content, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Reply(bg, "w", "keep me", false); err != nil {
		t.Fatal(err)
	}
	full := journalSize(t, dir)
	msgs, _ := c.Poll(bg, "primary", false, 0)
	var ids []string
	for _, m := range msgs[:100] {
		ids = append(ids, m.ID)
	}
	if n, err := c.Ack("primary", ids); n != 100 || err != nil {
		t.Fatalf("Ack = %d, %v", n, err)
	}
	compacted(c) // the ack started it; it runs without the core's locks
	if after := journalSize(t, dir); after >= compactAt {
		t.Fatalf("journal is %d bytes after every large message was acknowledged (%d before); want it compacted below %d", after, full, compactAt)
	}
	crash(c)
	c2 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")})
	left, _ := c2.Poll(bg, "primary", false, 0)
	if diff := cmp.Diff([]string{"keep me"}, contents(left)); diff != "" {
		t.Fatalf("mailbox after compaction and restart (-want +got):\n%s", diff)
	}
}

// A journal damaged beyond a torn tail stops New with an error that names
// the file and the place, and the file is left for check and repair;
// RepairJournal keeps every intact record and the original.
func TestJournal_CorruptJournalStopsNewAndIsRepaired(t *testing.T) {
	dir := t.TempDir()
	c := newCore(t, dir, &fakeHerdr{}, nil)
	for _, s := range []string{"one", "two", "three"} {
		if _, err := c.Reply(bg, "w", s, false); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	path := JournalPath(dir)
	data, _ := os.ReadFile(path)
	at := strings.Index(string(data), `"two"`)
	data[at+2] = 'X' // "tXo": the checksum no longer matches
	os.WriteFile(path, data, 0o600)

	_, err := New(dir, &fakeHerdr{}, testOptions(nil))
	if !errors.Is(err, ErrJournalCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "byte ") {
		t.Fatalf("New on a corrupt journal: err = %v, want ErrJournalCorrupt naming %s and the byte", err, path)
	}
	if after, _ := os.ReadFile(path); string(after) != string(data) {
		t.Fatal("New changed the corrupt journal")
	}
	rep, err := CheckJournal(dir)
	if err != nil || !rep.Refused || len(rep.Damage) != 1 || rep.Damage[0].Reason != "checksum mismatch" {
		t.Fatalf("CheckJournal = %+v, %v; want one checksum mismatch, refused", rep, err)
	}
	now := time.Date(2026, 12, 1, 10, 15, 0, 0, time.UTC)
	_, backup, err := RepairJournal(dir, now)
	if err != nil || backup != path+".broken-20261201T101500Z" {
		t.Fatalf("RepairJournal: backup %q, %v", backup, err)
	}
	if kept, _ := os.ReadFile(backup); string(kept) != string(data) {
		t.Fatal("the backup is not the original")
	}
	c2 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")})
	msgs, _ := c2.Poll(bg, "primary", false, 0)
	if diff := cmp.Diff([]string{"one", "three"}, contents(msgs)); diff != "" {
		t.Fatalf("mailbox after repair (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil {
		t.Fatal(err)
	}
}

// failingFile fails the next write it is told to, after writing half.
type failingFile struct {
	journal.File
	fail bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.fail {
		f.fail = false
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errors.New("injected: no space left on device")
	}
	return f.File.Write(p)
}

// A call whose record did not reach the disk fails with unavailable and
// changes nothing; the next call is recorded after the last good one, and
// a restart replays exactly what was acknowledged.
func TestJournal_FailedWriteFailsTheCallAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	var ff *failingFile
	o := &Options{wrapJournal: func(f journal.File) journal.File { ff = &failingFile{File: f}; return ff }}
	c := newCore(t, dir, &fakeHerdr{}, o)
	if _, err := c.Reply(bg, "w", "one", false); err != nil {
		t.Fatal(err)
	}
	ff.fail = true
	if _, err := c.Reply(bg, "w", "lost", false); CodeOf(err) != CodeUnavailable {
		t.Fatalf("reply whose write failed: err = %v, want unavailable", err)
	}
	if n := c.Pending("primary"); n != 1 {
		t.Fatalf("after a failed write the mailbox holds %d messages, want 1", n)
	}
	if _, err := c.Reply(bg, "w", "three", false); err != nil {
		t.Fatalf("reply after the failure: %v", err)
	}
	crash(c)
	c2 := newCore(t, dir, &fakeHerdr{}, &Options{NewID: idsWithPrefix("b")})
	msgs, _ := c2.Poll(bg, "primary", false, 0)
	if diff := cmp.Diff([]string{"one", "three"}, contents(msgs)); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
}
