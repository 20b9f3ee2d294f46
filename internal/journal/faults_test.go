package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// faultyFile fails the next writes, syncs or truncates it is told to; a
// failing write first writes half of what it was given, as a full disk
// does.
type faultyFile struct {
	*os.File
	writes, syncs, truncates int
}

var errInjected = errors.New("injected fault")

func (f *faultyFile) Write(p []byte) (int, error) {
	if f.writes > 0 {
		f.writes--
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.syncs > 0 {
		f.syncs--
		return errInjected
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(n int64) error {
	if f.truncates > 0 {
		f.truncates--
		return errInjected
	}
	return f.File.Truncate(n)
}

// After a failed or partial append the call fails, the file is cut back to
// its last whole batch, and the next record does not follow a torn line.
func TestJournal_FailedAppendIsCutBackBeforeTheNextWrite(t *testing.T) {
	tests := []struct {
		name  string
		fault faultyFile
	}{
		{"write cut short", faultyFile{writes: 1}},
		{"fsync fails", faultyFile{syncs: 1}},
		{"cut back fails once, retried before the next write", faultyFile{writes: 1, truncates: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j")
			j, _, _ := mustOpen(t, path)
			if err := j.Append([]byte(`{"a":1}`)); err != nil {
				t.Fatal(err)
			}
			ff := tt.fault
			ff.File = j.f.(*os.File)
			j.f = &ff
			if err := j.Append([]byte(`{"lost":1}`), []byte(`{"lost":2}`)); !errors.Is(err, errInjected) {
				t.Fatalf("Append with a fault: err = %v, want the fault", err)
			}
			if err := j.Append([]byte(`{"c":3}`)); err != nil {
				t.Fatalf("Append after the fault: %v", err)
			}
			_, got, dropped := mustOpen(t, path)
			if diff := cmp.Diff([]string{`{"a":1}`, `{"c":3}`}, got); diff != "" || dropped != 0 {
				t.Fatalf("replay (-want +got):\n%s dropped=%d", diff, dropped)
			}
		})
	}
}

// While the cut back keeps failing nothing more is written: every Append
// fails, and the file still replays what was acknowledged.
func TestJournal_AppendRefusesWhileTheCutBackFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	if err := j.Append([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	ff := &faultyFile{File: j.f.(*os.File), writes: 1, truncates: 3}
	j.f = ff
	for i := range 3 {
		err := j.Append([]byte(`{"b":2}`))
		if err == nil || !strings.Contains(err.Error(), "could not be cut back") {
			t.Fatalf("Append %d while the file cannot be cut back: err = %v", i, err)
		}
	}
	if err := j.Append([]byte(`{"c":3}`)); err != nil {
		t.Fatalf("Append once the cut back works: %v", err)
	}
	_, got, _ := mustOpen(t, path)
	if diff := cmp.Diff([]string{`{"a":1}`, `{"c":3}`}, got); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
}

// A batch a crash cut short is dropped whole: its first records, though
// intact, were never acknowledged.
func TestJournal_TornBatchIsDroppedWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	if err := j.Append([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	var batch bytes.Buffer
	encodeBatch(&batch, [][]byte{[]byte(`{"b":1}`), []byte(`{"b":2}`), []byte(`{"b":3}`)})
	for _, cut := range []int{batch.Len() - 3, batch.Len() - len(`{"b":3}`) - 10} {
		t.Run("", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "j")
			data, _ := os.ReadFile(path)
			os.WriteFile(p, append(data, batch.Bytes()[:cut]...), 0o600)
			_, got, dropped := mustOpen(t, p)
			if diff := cmp.Diff([]string{`{"a":1}`}, got); diff != "" || dropped != int64(cut) {
				t.Fatalf("replay (-want +got):\n%s dropped=%d, want %d", diff, dropped, cut)
			}
		})
	}
}

// A journal damaged beyond what a torn write leaves is refused and left
// exactly as it was, never emptied.
func TestJournal_UnreadableJournalIsRefusedAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	j.Append([]byte(`{"a":1}`))
	intact, _ := os.ReadFile(path)
	for _, tc := range []struct{ name, content string }{
		{"garbage", "this is not a journal\nat all\n"},
		{"one garbage line", "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"},
		{"two damaged lines at the end", string(intact) + "00000000 {\"x\":1}\n0000"},
		{"damage then an intact batch", string(intact) + "0000\n" + headerLine()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "j")
			os.WriteFile(p, []byte(tc.content), 0o600)
			if _, _, _, err := Open(p); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Open: err = %v, want ErrCorrupt naming the file", err)
			}
			if after, _ := os.ReadFile(p); string(after) != tc.content {
				t.Fatalf("the refused journal was changed: %q", after)
			}
		})
	}
	// A creation cut short (part of the header) is a fresh journal.
	p := filepath.Join(t.TempDir(), "j")
	os.WriteFile(p, []byte(headerLine()[:5]), 0o600)
	j2, got, _ := mustOpen(t, p)
	if len(got) != 0 || j2.Size() != int64(len(headerLine())) {
		t.Fatalf("half a header: records %q, size %d; want a fresh journal", got, j2.Size())
	}
}

// Journals written before the header existed are read as they are.
func TestJournal_ReadsAJournalWithoutHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	var old bytes.Buffer
	encode(&old, []byte(`{"old":1}`), sepEnd)
	encode(&old, []byte(`{"old":2}`), sepEnd)
	os.WriteFile(path, old.Bytes(), 0o600)
	j, got, _ := mustOpen(t, path)
	if diff := cmp.Diff([]string{`{"old":1}`, `{"old":2}`}, got); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
	j.Append([]byte(`{"new":3}`))
	_, got, _ = mustOpen(t, path)
	if len(got) != 3 {
		t.Fatalf("after an append: %q", got)
	}
}

func TestCheckAndRepair_KeepEveryIntactRecordAndTheOriginal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	j.Append([]byte(`{"a":1}`))
	bAt := j.Size()
	j.Append([]byte(`{"b":2}`))
	j.Append([]byte(`{"c":3}`), []byte(`{"d":4}`))
	j.Append([]byte(`not json`))
	j.Close()
	data, _ := os.ReadFile(path)
	data[bAt+10] ^= 0xff // inside b's record
	os.WriteFile(path, data, 0o600)
	valid := func(rec []byte) error {
		if rec[0] != '{' {
			return errors.New("not JSON")
		}
		return nil
	}

	rep, err := Check(path, 0, valid)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Path: path, Size: int64(len(data)), Records: 3, Refused: true, Damage: []Damage{
		{Offset: bAt, Line: 3, Bytes: int64(len(`00000000 {"b":2}` + "\n")), Reason: "checksum mismatch"},
		{Offset: int64(len(data)) - int64(len("00000000 not json\n")), Line: 6, Bytes: int64(len("00000000 not json\n")),
			Reason: "intact line, but not a record fleetd can replay: not JSON"},
	}}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Fatalf("Check (-want +got):\n%s", diff)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
		t.Fatal("Check changed the file")
	}

	backup := path + ".broken"
	if _, err := Repair(path, backup, 0, valid); err != nil {
		t.Fatal(err)
	}
	if kept, _ := os.ReadFile(backup); !bytes.Equal(kept, data) {
		t.Fatal("the backup is not the original")
	}
	_, got, _ := mustOpen(t, path)
	if diff := cmp.Diff([]string{`{"a":1}`, `{"c":3}`, `{"d":4}`}, got); diff != "" {
		t.Fatalf("repaired journal (-want +got):\n%s", diff)
	}
	if rep, _ := Check(path, 0, valid); len(rep.Damage) != 0 || rep.Refused {
		t.Fatalf("Check after Repair: %+v", rep)
	}
	// A clean journal is left alone.
	if _, err := Repair(path, path+".again", 0, valid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".again"); !os.IsNotExist(err) {
		t.Fatalf("Repair of a clean journal made a backup: %v", err)
	}
}
