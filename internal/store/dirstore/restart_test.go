package dirstore

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// A restart that finds every file as the records have it writes no
// records: the objects file stays the one the last run wrote (the same
// inode: the file is replaced whenever it is written). Writing it would
// re-encode every record, for nothing, at every start.
func TestNew_RestartWithNothingChangedWritesNoRecords(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	for f, content := range map[string]string{
		"profile.yaml": profileDoc,
		"alpha.yaml":   memberDoc("alpha", "codex-fast"),
		"team.yaml":    memberDoc("beta", "codex-fast") + "  prompt: \"review <main> & report\"\n---\n" + memberDoc("gamma", "codex-fast"),
	} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := &Options{StateDir: state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := New(dir, opts); err != nil {
		t.Fatal(err)
	}
	objects := statedir.At(state).Objects()
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(objects)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := inode()
	d, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.Snapshot().Members); got != 3 {
		t.Fatalf("%d members after the restart, want 3", got)
	}
	if inode() != first {
		t.Errorf("the restart rewrote %s though no file changed", objects)
	}
}
