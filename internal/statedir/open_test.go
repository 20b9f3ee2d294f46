package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Open and ReadFile read regular files within their bound and refuse
// everything else at once — a FIFO without waiting for a writer, a symbolic
// link (even to /dev/zero) without following it — with an error that names
// the path and what to do.
func TestReadFile_ReadsOnlyRegularFilesWithinTheBound(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		name  string
		setup func(path string) error
		want  error  // nil: read
		says  string // in the error
	}{
		{"a regular file", func(p string) error { return os.WriteFile(p, []byte("12345"), FileMode) }, nil, ""},
		{"a regular file at the bound", func(p string) error { return os.WriteFile(p, []byte("1234567890"), FileMode) }, nil, ""},
		{"a regular file over the bound", func(p string) error { return os.WriteFile(p, []byte("12345678901"), FileMode) }, ErrTooLarge, "move it aside"},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, ErrNotRegular, "a named pipe (FIFO)"},
		{"a symbolic link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, ErrNotRegular, "a symbolic link"},
		{"a symbolic link to a regular file", func(p string) error {
			if err := os.WriteFile(p+".real", []byte("x"), FileMode); err != nil {
				return err
			}
			return os.Symlink(p+".real", p)
		}, ErrNotRegular, "a symbolic link"},
		{"a directory", func(p string) error { return os.Mkdir(p, DirMode) }, ErrNotRegular, "a directory"},
		{"a socket", func(p string) error {
			l, err := net.Listen("unix", p)
			if err == nil {
				t.Cleanup(func() { l.Close() })
			}
			return err
		}, ErrNotRegular, "a socket"},
		{"nothing", func(string) error { return nil }, fs.ErrNotExist, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprint("file-", i))
			if err := tc.setup(path); err != nil {
				t.Fatal(err)
			}
			b, err := ReadFile(path, 10)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("ReadFile = %v, want its content", err)
			case tc.want == nil:
				if want, _ := os.ReadFile(path); string(b) != string(want) {
					t.Errorf("ReadFile = %q, want %q", b, want)
				}
			case !errors.Is(err, tc.want):
				t.Fatalf("ReadFile = %q, %v; want an error matching %v", b, err, tc.want)
			case !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.says):
				t.Errorf("error %q does not name the path and say %q", err, tc.says)
			}
		})
	}
}

// A FIFO opened to be written (as the journal is) is refused at once too.
func TestOpen_RefusesAFIFOToWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messaging.journal")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(path, os.O_RDWR|os.O_CREATE, MaxJournalBytes); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
		if f != nil {
			f.Close()
		}
		t.Fatalf("Open = %v, want the FIFO refused", err)
	}
}

// A FIFO or a symbolic link at the lock file is refused too: it neither
// hangs nor locks something else.
func TestLock_RefusesALockFileThatIsNotARegularFile(t *testing.T) {
	for name, setup := range map[string]func(path string) error{
		"FIFO":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"symlink": func(p string) error { return os.Symlink("/dev/zero", p) },
	} {
		t.Run(name, func(t *testing.T) {
			l := At(t.TempDir())
			if err := setup(l.LockFile()); err != nil {
				t.Fatal(err)
			}
			if lk, err := l.Lock(); !errors.Is(err, ErrNotRegular) {
				lk.Unlock()
				t.Fatalf("Lock = %v, want the lock file refused", err)
			}
		})
	}
}
