package dirstore

import (
	"os"
	"syscall"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// A restart that finds every file as the records have it writes no
// records: the objects file stays the one the last run wrote (the same
// inode: the file is replaced whenever it is written). Writing it would
// re-encode every record, for nothing, at every start.
func TestNew_RestartWithNothingChangedWritesNoRecords(t *testing.T) {
	h := newFiles(t, map[string]string{
		"profile.yaml": profileDoc,
		"alpha.yaml":   memberDoc("alpha", "codex-fast"),
		"team.yaml":    memberDoc("beta", "codex-fast") + "  prompt: \"review <main> & report\"\n---\n" + memberDoc("gamma", "codex-fast"),
	})
	h.restarted() // the first start writes the records
	objects := statedir.At(h.state).Objects()
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(objects)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := inode()
	if got := len(h.restarted().Snapshot().Members); got != 3 {
		t.Fatalf("%d members after the restart, want 3", got)
	}
	if inode() != first {
		t.Errorf("the restart rewrote %s though no file changed", objects)
	}
}
