package dirstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
)

// fileKinds are what FuzzDirectory_ReadsFilesAsValidate makes of f.yaml.
var fileKinds = []struct {
	name string
	make func(dir, path string, data []byte) error
}{
	{"regular file", func(_, path string, data []byte) error { return os.WriteFile(path, data, 0o644) }},
	{"link to a regular file", func(dir, path string, data []byte) error {
		if err := os.WriteFile(filepath.Join(dir, "data.txt"), data, 0o644); err != nil {
			return err
		}
		return os.Symlink("data.txt", path)
	}},
	{"directory", func(_, path string, _ []byte) error { return os.Mkdir(path, 0o755) }},
	{"named pipe", func(_, path string, _ []byte) error { return syscall.Mkfifo(path, 0o644) }},
	{"link to a named pipe", func(dir, path string, _ []byte) error {
		if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
			return err
		}
		return os.Symlink("pipe", path)
	}},
	{"link to /dev/zero", func(_, path string, _ []byte) error { return os.Symlink("/dev/zero", path) }},
	{"dangling link", func(_, path string, _ []byte) error { return os.Symlink("gone.yaml", path) }},
}

// FuzzDirectory_ReadsFilesAsValidate makes f.yaml a file of any kind (a
// regular file or a link to one holding any bytes, a directory, a named
// pipe, a link to /dev/zero, …) next to a good file, under any size limit,
// and reads the directory as the watcher does and as `fleetd validate`
// does. Whatever the input, neither blocks, both report the same errors
// and objects, the good file is unaffected, and f.yaml is read exactly when
// it is a regular file within the limit.
func FuzzDirectory_ReadsFilesAsValidate(f *testing.F) {
	for kind := range fileKinds {
		f.Add(uint8(kind), uint16(200), []byte(memberDoc("alpha", "codex-fast")))
	}
	f.Add(uint8(0), uint16(10), []byte(memberDoc("alpha", "codex-fast")))
	f.Add(uint8(0), uint16(0), []byte("kind: [\n"))
	f.Add(uint8(1), uint16(64), []byte(profileDoc))
	// One directory for the whole run (inputs run one at a time in each
	// process): a fresh one per input would spend most of the run in mkdir
	// and rm -r.
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(profileDoc), 0o644); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, "f.yaml")
	f.Fuzz(func(t *testing.T, kind uint8, limit uint16, data []byte) {
		for _, name := range []string{"f.yaml", "data.txt", "pipe"} {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
		k := fileKinds[int(kind)%len(fileKinds)]
		max := int64(limit) + 1
		if err := k.make(dir, path, data); err != nil {
			t.Fatal(err)
		}
		if int64(len(profileDoc)) > max {
			max = int64(len(profileDoc)) // the good file stays within every limit
		}

		var d *Directory
		within(t, "New", func() {
			var err error
			if d, err = New(dir, &Options{MaxFileBytes: max, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Error(err)
			}
		})
		var r *decode.DirResult
		within(t, "decode.Dir", func() {
			var err error
			if r, err = decode.Dir(dir, &decode.DirOptions{MaxFileBytes: max}); err != nil {
				t.Error(err)
			}
		})
		if d == nil || r == nil {
			t.FailNow()
		}
		s := d.Snapshot()
		if diff := cmp.Diff(errStrings(r.Errors()), errStrings(s.Errors)); diff != "" {
			t.Errorf("%s: the watcher's errors (+) differ from validate's (-):\n%s", k.name, diff)
		}
		var want, got []string
		for _, o := range r.Objects() {
			want = append(want, o.GetObjectKind()+"/"+o.GetName())
		}
		for key := range s.Sources {
			got = append(got, key.String())
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the watcher's objects (+) differ from validate's (-):\n%s", k.name, diff)
		}
		if _, ok := s.Profiles["codex-fast"]; !ok && !strings.Contains(string(data), "codex-fast") {
			t.Errorf("%s: the good file's profile is missing; errors:\n%v", k.name, s.Errors)
		}

		errs := s.ErrorsIn(path)
		regular := k.name == "regular file" || k.name == "link to a regular file"
		switch {
		case !regular:
			if len(errs) != 1 || !strings.HasSuffix(errs[0].Msg, "skipped") && !strings.Contains(errs[0].Msg, "; skipped: ") {
				t.Errorf("%s: errors %v; want one saying it was skipped", k.name, errs)
			}
		case int64(len(data)) > max:
			want := fmt.Sprintf("file is %d bytes, over the limit of %d bytes", len(data), max)
			if len(errs) != 1 || !strings.HasPrefix(errs[0].Msg, want) {
				t.Errorf("%s of %d bytes: errors %v; want one starting %q", k.name, len(data), errs, want)
			}
		default:
			res := decode.Manifest(path, data)
			if diff := cmp.Diff(errStrings(res.Errors), errStrings(errs)); diff != "" {
				t.Errorf("%s within the limit: errors differ from decoding its bytes (-decode +watcher):\n%s", k.name, diff)
			}
		}
	})
}
