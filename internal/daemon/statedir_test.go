package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// TestRun_RefusesAnUnsafeStateDirectory: a state directory others can
// write, or a token file others can read, stops the daemon before it takes
// the lock or opens anything there.
func TestRun_RefusesAnUnsafeStateDirectory(t *testing.T) {
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
