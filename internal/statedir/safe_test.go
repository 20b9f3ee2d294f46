package statedir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

func TestCheckSafe(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes the state directory root unsafe (or not) and returns
		// the path the error must name.
		setup func(t *testing.T, l statedir.Layout) string
		want  []string // in the error; none: the directory is safe
	}{
		{"fresh 0700 directory", func(*testing.T, statedir.Layout) string { return "" }, nil},
		{"missing directory", func(t *testing.T, l statedir.Layout) string { must(t, os.Remove(l.Root())); return "" }, nil},
		{"readable by others but written only by its owner", func(t *testing.T, l statedir.Layout) string {
			must(t, os.Chmod(l.Root(), 0o755))
			return ""
		}, nil},
		{"token files 0600", func(t *testing.T, l statedir.Layout) string {
			must(t, os.WriteFile(l.PrimaryToken(), []byte("t\n"), 0o600))
			must(t, os.WriteFile(l.StateDB(), nil, 0o600))
			must(t, os.WriteFile(l.LegacyTokens(), []byte("{}"), 0o600))
			return ""
		}, nil},
		{"directory writable by others", func(t *testing.T, l statedir.Layout) string {
			must(t, os.Chmod(l.Root(), 0o777))
			return l.Root()
		}, []string{"mode 0777", "writable by group or others", "chmod 700"}},
		{"directory writable by group", func(t *testing.T, l statedir.Layout) string {
			must(t, os.Chmod(l.Root(), 0o770))
			return l.Root()
		}, []string{"mode 0770", "chmod 700"}},
		{"not a directory", func(t *testing.T, l statedir.Layout) string {
			must(t, os.Remove(l.Root()))
			must(t, os.WriteFile(l.Root(), nil, 0o600))
			return l.Root()
		}, []string{"is not a directory"}},
		{"primary token readable by others", func(t *testing.T, l statedir.Layout) string {
			must(t, os.WriteFile(l.PrimaryToken(), []byte("t\n"), 0o644))
			must(t, os.Chmod(l.PrimaryToken(), 0o644))
			return l.PrimaryToken()
		}, []string{"mode 0644", "chmod 600", "rotate the token"}},
		{"legacy token registry writable by group", func(t *testing.T, l statedir.Layout) string {
			must(t, os.WriteFile(l.LegacyTokens(), []byte("{}"), 0o620))
			must(t, os.Chmod(l.LegacyTokens(), 0o620))
			return l.LegacyTokens()
		}, []string{"mode 0620", "chmod 600"}},
		{"state database readable by others", func(t *testing.T, l statedir.Layout) string {
			must(t, os.WriteFile(l.StateDB(), nil, 0o644))
			must(t, os.Chmod(l.StateDB(), 0o644))
			return l.StateDB()
		}, []string{"mode 0644", "chmod 600"}},
		{"state database a symlink", func(t *testing.T, l statedir.Layout) string {
			target := filepath.Join(t.TempDir(), "planted")
			must(t, os.WriteFile(target, nil, 0o600))
			must(t, os.Symlink(target, l.StateDB()))
			return l.StateDB()
		}, []string{"not a regular file", "rm ", "starts their members afresh"}},
		{"primary token a symlink", func(t *testing.T, l statedir.Layout) string {
			target := filepath.Join(t.TempDir(), "planted")
			must(t, os.WriteFile(target, []byte("attacker\n"), 0o600))
			must(t, os.Symlink(target, l.PrimaryToken()))
			return l.PrimaryToken()
		}, []string{"not a regular file", "rm "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := statedir.At(filepath.Join(t.TempDir(), "state"))
			must(t, l.Create())
			path := tc.setup(t, l)
			t.Cleanup(func() { os.Chmod(l.Root(), 0o700) }) // so TempDir can clean up
			err := l.CheckSafe()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckSafe = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, statedir.ErrUnsafe) {
				t.Fatalf("CheckSafe = %v, want ErrUnsafe", err)
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("CheckSafe = %q, want it to say %q", err, w)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
