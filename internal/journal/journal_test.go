package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func strs(recs [][]byte) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r)
	}
	return out
}

func mustOpen(t *testing.T, path string) (*Journal, []string, int64) {
	t.Helper()
	j, recs, dropped, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j, strs(recs), dropped
}

func TestJournal_AppendThenReopenReplaysInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, recs, _ := mustOpen(t, path)
	if len(recs) != 0 {
		t.Fatalf("fresh journal replayed %q", recs)
	}
	if err := j.Append([]byte(`{"a":1}`), []byte(`{"b":"x\ny"}`)); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte(`{"c":3}`)); err != nil {
		t.Fatal(err)
	}
	// No Close: a crash after Append returned must keep everything.
	_, got, dropped := mustOpen(t, path)
	want := []string{`{"a":1}`, `{"b":"x\ny"}`, `{"c":3}`}
	if diff := cmp.Diff(want, got); diff != "" || dropped != 0 {
		t.Fatalf("replay (-want +got):\n%s dropped=%d", diff, dropped)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestJournal_TornTailIsDroppedAndTruncated(t *testing.T) {
	tests := []struct {
		name string
		tail string
	}{
		{"half a line", "0000"},
		{"line without newline", "1234abcd {\"x\":1}"},
		{"bad checksum", "00000000 {\"x\":1}\n"},
		{"garbage", "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j")
			j, _, _ := mustOpen(t, path)
			if err := j.Append([]byte(`{"ok":1}`)); err != nil {
				t.Fatal(err)
			}
			good := j.Size()
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tt.tail)
			f.Close()

			j2, got, dropped := mustOpen(t, path)
			if diff := cmp.Diff([]string{`{"ok":1}`}, got); diff != "" {
				t.Fatalf("replay (-want +got):\n%s", diff)
			}
			if dropped != int64(len(tt.tail)) {
				t.Errorf("dropped %d bytes, want %d", dropped, len(tt.tail))
			}
			if j2.Size() != good {
				t.Errorf("size after truncation %d, want %d", j2.Size(), good)
			}
			if err := j2.Append([]byte(`{"after":1}`)); err != nil {
				t.Fatal(err)
			}
			_, got, _ = mustOpen(t, path)
			if diff := cmp.Diff([]string{`{"ok":1}`, `{"after":1}`}, got); diff != "" {
				t.Fatalf("replay after append (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJournal_DamageBeforeIntactRecordsIsCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	if err := j.Append([]byte(`{"a":1}`), []byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(headerLine())+12] ^= 0xff // inside the first record
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Open(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a journal damaged in the middle: err = %v, want ErrCorrupt", err)
	}
}

func TestJournal_RewriteReplacesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	for range 100 {
		if err := j.Append([]byte(`{"old":"record"}`)); err != nil {
			t.Fatal(err)
		}
	}
	before := j.Size()
	if err := j.Rewrite([][]byte{[]byte(`{"live":1}`)}); err != nil {
		t.Fatal(err)
	}
	if j.Size() >= before {
		t.Errorf("size after rewrite %d, not below %d", j.Size(), before)
	}
	if err := j.Append([]byte(`{"live":2}`)); err != nil {
		t.Fatal(err)
	}
	_, got, _ := mustOpen(t, path)
	if diff := cmp.Diff([]string{`{"live":1}`, `{"live":2}`}, got); diff != "" {
		t.Fatalf("replay after rewrite (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("temporary compaction file left behind: %v", err)
	}
}

func TestJournal_RejectsRecordWithNewline(t *testing.T) {
	j, _, _ := mustOpen(t, filepath.Join(t.TempDir(), "j"))
	if err := j.Append([]byte("a\nb")); err == nil {
		t.Fatal("Append accepted a record containing a newline")
	}
}

// Records reads back every acknowledged batch, in order, also after a
// rewrite and from a journal opened on an existing file.
func TestJournal_RecordsReadsBackWhatWasAppended(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, _ := mustOpen(t, path)
	records := func(want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		got, err := j.Records()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, strs(got)); diff != "" {
			t.Errorf("Records (-want +got):\n%s", diff)
		}
	}
	records()
	if err := j.Append([]byte(`{"a":1}`), []byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	records(`{"a":1}`, `{"b":2}`)
	if err := j.Rewrite([][]byte{[]byte(`{"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte(`{"c":3}`)); err != nil {
		t.Fatal(err)
	}
	records(`{"b":2}`, `{"c":3}`)
	j.Close()
	j, _, _ = mustOpen(t, path)
	records(`{"b":2}`, `{"c":3}`)
}
