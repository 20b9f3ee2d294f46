package dirstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

const refusedTail = "; skipped: fleetd reads only regular files and symbolic links to them"

// within runs f and fails the test if it has not returned after a generous
// deadline: what it checks must not wait on the disk at all.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// releaseFIFO opens the write end of the named pipe at path without
// blocking and closes it, so that a reader stuck opening it (the watcher
// before it checked what it opens) sees an empty file and goes on.
func releaseFIFO(path string) {
	if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		_ = syscall.Close(fd)
	}
}

// A named pipe x.yaml used to freeze fleetd: the watcher blocked in open
// holding the lock every reader takes, so /members, /readyz and every MCP
// tool hung. Now it is skipped with an error, and readers never wait.
func TestDirectory_NamedPipeBlocksNothing(t *testing.T) {
	h := newWatchedHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one")})
	fifo := filepath.Join(h.dir, "x.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseFIFO(fifo) }) // before the harness stops Run

	want := fifo + ": not a regular file but a named pipe (FIFO)" + refusedTail
	deadline := time.After(10 * time.Second)
	for {
		var errs decode.ErrorList
		within(t, "Snapshot while a named pipe is in the directory", func() { errs = h.d.Snapshot().ErrorsIn(fifo) })
		if len(errs) > 0 {
			if diff := cmp.Diff([]string{want}, errStrings(errs)); diff != "" {
				t.Errorf("errors of x.yaml (-want +got):\n%s", diff)
			}
			break
		}
		select {
		case <-h.d.scanned:
		case <-deadline:
			t.Fatal("no read of the directory finished after a named pipe appeared in it")
		}
	}
	within(t, "List and Get", func() {
		if got := len(h.d.List(v1alpha1.KindMember)); got != 1 {
			t.Errorf("%d members, want alpha", got)
		}
		if _, ok := h.d.Get(v1alpha1.KindMember, "alpha"); !ok {
			t.Error("alpha lost")
		}
	})
	if !strings.Contains(h.logs.String(), "named pipe") {
		t.Errorf("the named pipe was not logged:\n%s", h.logs.String())
	}
}

// While a scan reads a file, everything a request handler calls returns at
// once: only the swap of the snapshot is under the lock they share.
func TestDirectory_ReadersNeverWaitForAScan(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alpha.yaml"), []byte(memberDoc("alpha", "one")), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := New(dir, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	d.read = func(path string, limit int64) ([]byte, error) {
		close(entered) // one read only: alpha.yaml
		<-release
		return decode.ReadManifest(path, limit)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		d.rescan(t.Context())
	}()
	<-entered
	within(t, "Snapshot, Get, List and Watch during a scan", func() {
		if _, ok := d.Snapshot().Members["alpha"]; !ok {
			t.Error("Snapshot lost alpha")
		}
		if _, ok := d.Get(v1alpha1.KindMember, "alpha"); !ok {
			t.Error("Get lost alpha")
		}
		if got := len(d.List(v1alpha1.KindMember)); got != 1 {
			t.Errorf("List: %d members, want 1", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		d.Watch(ctx)
		cancel()
	})
	// A writer waits for the scan, but gives up when its context ends.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Delete(ctx, v1alpha1.KindMember, "alpha"); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with an ended context during a scan: %v, want context.Canceled", err)
	}
	close(release)
	<-scanned
}

// What the watcher refuses to read keeps the file's last good objects, like
// a file that stops parsing, and says what the file is and where: on the
// snapshot's errors for that file (which the member's ManifestValid
// condition carries) and in the log.
func TestDirectory_SkipsWhatIsNotARegularFileWithinTheLimit(t *testing.T) {
	oversize := memberDoc("alpha", "two") + "#" + strings.Repeat("x", decode.DefaultMaxManifestBytes) + "\n"
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
		want string // after "PATH: "
	}{
		{"a directory named like a manifest", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file but a directory" + refusedTail},
		{"a link to /dev/zero", func(t *testing.T, path string) {
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link to /dev/zero, which is a character device, not a regular file" + refusedTail},
		{"a link to a directory", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Dir(path), path); err != nil {
				t.Fatal(err)
			}
		}, fmt.Sprintf("a symbolic link to %s, which is a directory, not a regular file", "DIR") + refusedTail},
		{"a dangling link", func(t *testing.T, path string) {
			if err := os.Symlink("gone.yaml", path); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link to gone.yaml, which does not exist; skipped"},
		{"a file over the limit", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(oversize), 0o644); err != nil {
				t.Fatal(err)
			}
		}, fmt.Sprintf("file is %d bytes, over the limit of %d bytes on a manifest file; skipped: split it, or raise --max-manifest-bytes",
			len(oversize), decode.DefaultMaxManifestBytes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one")})
				path := filepath.Join(h.dir, "alpha.yaml")
				was := h.d.Snapshot().Members["alpha"]
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				tt.make(t, path)
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				h.rescan()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
					t.Errorf("a rescan allocated %d MiB", grew>>20)
				}
				s := h.d.Snapshot()
				if s.Members["alpha"] != was {
					t.Error("the member's last good definition was not kept")
				}
				want := path + ": " + strings.Replace(tt.want, "DIR", h.dir, 1)
				if diff := cmp.Diff([]string{want}, errStrings(s.ErrorsIn(path))); diff != "" {
					t.Errorf("errors of the file (-want +got):\n%s", diff)
				}
				if logs := h.logs.String(); !strings.Contains(logs, "alpha.yaml") || !strings.Contains(logs, "skipped") {
					t.Errorf("not logged:\n%s", logs)
				}
			})
		})
	}
}

// The watcher and `fleetd validate` (decode.Dir) read one directory alike:
// the same files refused with the same errors, at the same limit.
func TestDirectory_ReadsFilesAsValidateDoes(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	for name, content := range map[string]string{
		"alpha.yaml": memberDoc("alpha", "one"),
		"big.yaml":   memberDoc("big", "one") + "# " + strings.Repeat("x", 200) + "\n",
		"bad.yaml":   memberDoc("bad", "one") + "  colour: blue\n",
	} {
		if err := os.WriteFile(at(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(at("x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseFIFO(at("x.yaml")) })
	if err := os.Mkdir(at("sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"z.yaml": "/dev/zero", "dangling.yaml": "gone.yaml"} {
		if err := os.Symlink(target, at(name)); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 150
	var d *Directory
	within(t, "New", func() {
		var err error
		if d, err = New(dir, &Options{MaxFileBytes: limit, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Error(err)
		}
	})
	if d == nil {
		t.FailNow()
	}
	var r *decode.DirResult
	within(t, "decode.Dir", func() {
		var err error
		if r, err = decode.Dir(dir, &decode.DirOptions{MaxFileBytes: limit}); err != nil {
			t.Error(err)
		}
	})
	if r == nil {
		t.FailNow()
	}
	got, want := errStrings(d.Snapshot().Errors), errStrings(r.Errors())
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the watcher's errors (+) differ from validate's (-):\n%s", diff)
	}
	if len(got) != 6 {
		t.Errorf("%d errors, want one for each of bad, big, dangling, sub, x and z:\n%s", len(got), strings.Join(got, "\n"))
	}
	if diff := cmp.Diff([]string{"alpha"}, memberNames(d.Snapshot())); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
}

// Apply refuses to write a file the watcher would then refuse to read.
func TestDirectory_ApplyStaysWithinTheLimit(t *testing.T) {
	dir := t.TempDir()
	d, err := New(dir, &Options{MaxFileBytes: 200, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m := &v1alpha1.Member{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: "alpha"},
		Spec:       v1alpha1.MemberSpec{Profile: "one", Prompt: strings.Repeat("p", 300)},
	}
	err = d.Apply(t.Context(), m)
	want := "apply Member/alpha: " + filepath.Join(dir, "alpha.yaml") + " would be "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "over the limit of 200 bytes on a manifest file") {
		t.Errorf("Apply: %v; want an error starting %q naming the limit", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "alpha.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file was written (stat: %v)", err)
	}
}

func errStrings(l decode.ErrorList) []string {
	out := []string{}
	for _, e := range l {
		out = append(out, e.Error())
	}
	return out
}

// The files of a scan are read and decoded on several goroutines, and what
// the scan makes of them is in the files' order: a fleet's good files are
// its members, and each broken one is its own error, where it is, in file
// order — whichever file a goroutine finished first.
func TestNew_ManyFilesKeepTheirOrderAndTheirErrors(t *testing.T) {
	files := fleetFiles(60)
	var broken []string
	for i := 0; i < 60; i += 7 {
		name := fmt.Sprintf("m%04d", i)
		files[name+".yaml"] = "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: [not, a, name]\n"
		broken = append(broken, name+".yaml")
	}
	d := newFiles(t, files).restarted()
	snap := d.Snapshot()
	if got, want := len(snap.Members), 60-len(broken); got != want {
		t.Errorf("%d members, want %d (60 files, %d broken)", got, want, len(broken))
	}
	for name := range snap.Members {
		key := store.Key{Kind: v1alpha1.KindMember, Name: name}
		if src := filepath.Base(snap.Sources[key]); src != name+".yaml" {
			t.Errorf("member %s comes from %s, want %s.yaml", name, src, name)
		}
	}
	var got []string
	for _, e := range snap.Errors {
		got = append(got, filepath.Base(e.File))
	}
	if diff := cmp.Diff(broken, got); diff != "" {
		t.Errorf("the errors' files, in order (-want +got):\n%s", diff)
	}
}
