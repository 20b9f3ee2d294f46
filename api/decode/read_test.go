package decode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const refusedTail = "; skipped: fleetd reads only regular files and symbolic links to them"

// readWithin runs ReadManifest and fails the test if it has not returned
// within a generous deadline: a read that blocks (a named pipe opened
// without O_NONBLOCK) never does.
func readWithin(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := ReadManifest(path, limit)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("ReadManifest(%s) blocked", path)
		return nil, nil
	}
}

func TestReadManifest_ReadsOnlyRegularFilesWithinTheLimit(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(at(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, target string) {
		t.Helper()
		if err := os.Symlink(target, at(name)); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.yaml", "0123456789")
	write("big.yaml", "0123456789X")
	link("link.yaml", "ok.yaml")
	link("link-big.yaml", "big.yaml")
	if err := syscall.Mkfifo(at("x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	link("link-fifo.yaml", "x.yaml")
	if err := os.Mkdir(at("dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("link-dir.yaml", "dir.yaml")
	link("z.yaml", "/dev/zero")
	link("dangling.yaml", "missing.yaml")
	link("loop.yaml", "loop.yaml")

	const limit = 10
	for _, tt := range []struct {
		name, want string // want: the data, or the error after "PATH: "
		ok         bool
	}{
		{"ok.yaml", "0123456789", true},
		{"link.yaml", "0123456789", true},
		{"big.yaml", "file is 11 bytes, over the limit of 10 bytes on a manifest file; skipped: split it, or raise --max-manifest-bytes", false},
		{"link-big.yaml", "file is 11 bytes, over the limit of 10 bytes on a manifest file; skipped: split it, or raise --max-manifest-bytes", false},
		{"x.yaml", "not a regular file but a named pipe (FIFO)" + refusedTail, false},
		{"link-fifo.yaml", "a symbolic link to x.yaml, which is a named pipe (FIFO), not a regular file" + refusedTail, false},
		{"dir.yaml", "not a regular file but a directory" + refusedTail, false},
		{"link-dir.yaml", "a symbolic link to dir.yaml, which is a directory, not a regular file" + refusedTail, false},
		{"z.yaml", "a symbolic link to /dev/zero, which is a character device, not a regular file" + refusedTail, false},
		{"dangling.yaml", "a symbolic link to missing.yaml, which does not exist; skipped", false},
		{"loop.yaml", "cannot read: too many levels of symbolic links", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := readWithin(t, at(tt.name), limit)
			if tt.ok {
				if err != nil || string(data) != tt.want {
					t.Errorf("got %q, %v; want %q", data, err, tt.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || data != nil {
				t.Fatalf("got %q, %v; want no data and a *decode.Error", data, err)
			}
			if diff := cmp.Diff(at(tt.name)+": "+tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%v matches fs.ErrNotExist: the store would take the file for removed", err)
			}
		})
	}

	_, err := ReadManifest(at("gone.yaml"), limit)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != at("gone.yaml")+": cannot read: no such file or directory" {
		t.Errorf("a removed file: %v; want a located error matching fs.ErrNotExist", err)
	}
}

// A link to /dev/zero is refused without reading from it: the read costs
// next to nothing, where reading it to the end never ends.
func TestReadManifest_DevZeroCostsNoMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.yaml")
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := readWithin(t, path, 0); err == nil {
		t.Fatal("a link to /dev/zero was read")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing a link to /dev/zero allocated %d bytes", grew)
	}
}

// A regular file that holds more than its size says (as /proc files do:
// they report 0 bytes) is cut off at the limit, not read to its end.
func TestReadManifest_StopsAtTheLimitWhateverTheSizeSays(t *testing.T) {
	const proc = "/proc/self/status" // a regular file of "0 bytes" with about 1 KiB in it
	st, err := os.Stat(proc)
	if err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
		t.Skipf("no /proc file that understates its size here (%v)", err)
	}
	path := filepath.Join(t.TempDir(), "status.yaml")
	if err := os.Symlink(proc, path); err != nil {
		t.Fatal(err)
	}
	_, err = readWithin(t, path, 100)
	if want := path + ": file is more than 100 bytes, over the limit of 100 bytes"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v; want an error starting %q", err, want)
	}
	if data, err := readWithin(t, path, 1<<20); err != nil || !strings.Contains(string(data), "Name:") {
		t.Errorf("within the limit: %q, %v; want the file's content", data, err)
	}
}
