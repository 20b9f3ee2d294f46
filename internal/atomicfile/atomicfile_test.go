package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite_ReplacesContentWithModeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new" {
		t.Fatalf("content %q, %v", b, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(entries))
	}
}

func TestWrite_FailsInMissingDirectory(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "nope", "a"), nil, 0o644); err == nil {
		t.Error("no error writing into a missing directory")
	}
}

func TestWriteThrough_ReplacesThroughTheSpareAndLeavesNoOtherFile(t *testing.T) {
	dir := t.TempDir()
	p, spare := filepath.Join(dir, "rec.json"), filepath.Join(dir, ".spare-1")
	if err := os.WriteFile(p, []byte("old record"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The spare holds a longer old record: what is left past data must go.
	if err := os.WriteFile(spare, []byte("a much longer retired record"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteThrough(spare, p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
		t.Fatalf("content %q, %v; want \"new\"", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1 (the spare became the record)", len(entries))
	}
	// A spare that is gone fails the write and leaves the record alone.
	if err := WriteThrough(filepath.Join(dir, ".spare-2"), p, []byte("newer")); err == nil {
		t.Error("WriteThrough with a missing spare succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("after a failed write the record is %q, want \"new\"", b)
	}
}
