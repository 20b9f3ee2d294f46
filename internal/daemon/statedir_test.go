package daemon

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// TestRun_RefusesAnUnsafeStateDirectory: a state directory others can
// write, or a token file others can read, stops the daemon before it takes
// the lock or opens anything there.
func TestRun_RefusesAnUnsafeStateDirectory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(l statedir.Layout) error
	}{
		{"directory writable by others", func(l statedir.Layout) error { return os.Chmod(l.Root(), 0o777) }},
		{"primary token readable by others", func(l statedir.Layout) error {
			if err := os.WriteFile(l.PrimaryToken(), []byte("planted\n"), 0o600); err != nil {
				return err
			}
			return os.Chmod(l.PrimaryToken(), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := statedir.At(t.TempDir())
			if err := tc.setup(l); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(l.Root(), 0o700) })
			err := Run(context.Background(), Config{ManifestsDir: t.TempDir(), StateDir: l.Root(), Listen: "127.0.0.1:0", Sim: true})
			if !errors.Is(err, statedir.ErrUnsafe) {
				t.Fatalf("Run = %v, want the unsafe state directory refused", err)
			}
			if _, err := os.Stat(l.LockFile()); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the lock file exists (%v): the check must come before the lock", err)
			}
		})
	}
}

// legacyOwned is an ownership record as fleetd kept them before the state
// database, which the migration reads.
func legacyOwned(l statedir.Layout) string { return filepath.Join(l.LegacyOwnedDir(), "a.json") }

// TestRun_RefusesStateFilesThatAreNotRegularFiles: a FIFO or a symbolic
// link (to /dev/zero, say) where fleetd keeps a record, the journal or an
// index stops start-up at once with an error naming the path and what to
// do — it neither hangs on the FIFO nor reads the device without end.
func TestRun_RefusesStateFilesThatAreNotRegularFiles(t *testing.T) {
	t.Parallel()
	fifo := func(path string) error { return syscall.Mkfifo(path, 0o600) }
	zero := func(path string) error { return os.Symlink("/dev/zero", path) }
	for _, tc := range []struct {
		name  string
		path  func(l statedir.Layout) string
		plant func(path string) error
		// refused is the error start-up is refused with: ErrNotRegular
		// when nil; the files with token hashes are refused by the safety
		// check before anything is opened.
		refused error
	}{
		{"a FIFO at the state database", statedir.Layout.StateDB, fifo, statedir.ErrUnsafe},
		{"a FIFO at a legacy ownership record", legacyOwned, fifo, nil},
		{"a FIFO at the journal", func(l statedir.Layout) string { return filepath.Join(l.Messages(), messaging.JournalFile) }, fifo, nil},
		{"a FIFO at objects.json", statedir.Layout.Objects, fifo, nil},
		{"a FIFO at a legacy prompts-delivered.json", statedir.Layout.LegacyPrompts, fifo, nil},
		{"a FIFO at the lock", statedir.Layout.LockFile, fifo, nil},
		{"/dev/zero at the journal", func(l statedir.Layout) string { return filepath.Join(l.Messages(), messaging.JournalFile) }, zero, nil},
		{"/dev/zero at the state database", statedir.Layout.StateDB, zero, statedir.ErrUnsafe},
		{"/dev/zero at objects.json", statedir.Layout.Objects, zero, nil},
		{"/dev/zero at a legacy ownership record", legacyOwned, zero, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := statedir.At(t.TempDir())
			path := tc.path(l)
			if err := os.MkdirAll(filepath.Dir(path), statedir.DirMode); err != nil {
				t.Fatal(err)
			}
			if err := tc.plant(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			// A herdr that is not there, not the simulation: --herdr=sim
			// drops the earlier run's ownership records at start, and the
			// planted one with them.
			herdrSocket := filepath.Join(t.TempDir(), "herdr.sock")
			go func() {
				done <- Run(context.Background(), Config{ManifestsDir: t.TempDir(), StateDir: l.Root(), Listen: "127.0.0.1:0", HerdrSocket: herdrSocket})
			}()
			select {
			case err := <-done:
				refused := cmp.Or(tc.refused, statedir.ErrNotRegular)
				if !errors.Is(err, refused) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
					t.Fatalf("Run = %v, want start-up refused, naming %s and what to do", err, path)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("start-up still runs 10s later: it hangs on %s", path)
			}
		})
	}
}

// TestRun_IgnoresASpareRecordFileThatIsNotARegularFile: a FIFO where an
// older fleetd kept a spare for its next ownership record is not taken for
// one by the migration (reading it would wait for a writer for good): the
// legacy directory is migrated and removed, and the member becomes Ready.
func TestRun_IgnoresASpareRecordFileThatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	l := statedir.At(t.TempDir())
	if err := os.MkdirAll(l.LegacyOwnedDir(), statedir.DirMode); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(l.LegacyOwnedDir(), ".spare-planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(profileOnly+"---\napiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: coder}\nspec: {profile: claude}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, _ := runDaemon(t, Config{ManifestsDir: dir, StateDir: l.Root()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := info.WaitFor(ctx, func(ms []v1alpha1.Member) bool {
		return len(ms) == 1 && ms[0].Status.Phase == v1alpha1.PhaseReady
	}); err != nil {
		t.Fatalf("the member never became Ready with a FIFO among the legacy spare records: %v", err)
	}
	if _, err := os.Stat(l.LegacyOwnedDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the legacy ownership records are still there after the migration: %v", err)
	}
}
