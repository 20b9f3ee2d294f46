package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// onCompactFile wraps only the rewrite's temporary file in wrap.
func onCompactFile(wrap func(*os.File) File) func(File) File {
	return func(f File) File {
		if osf, ok := f.(*os.File); ok && strings.HasSuffix(osf.Name(), ".compact") {
			return wrap(osf)
		}
		return f
	}
}

// gatedFile holds its first Write until release is closed, after telling
// entered: a rewrite stalled in the middle of writing its new file.
type gatedFile struct {
	*os.File
	once             sync.Once
	entered, release chan struct{}
}

func (f *gatedFile) Write(p []byte) (int, error) {
	f.once.Do(func() {
		n, _ := f.File.Write(p[:len(p)/2]) // half of it is on disk
		close(f.entered)
		<-f.release
		p = p[n:]
	})
	return f.File.Write(p)
}

func openWith(t *testing.T, path string, wrap func(File) File) *Journal {
	t.Helper()
	j, _, _, err := OpenWith(path, &Options{Wrap: wrap})
	if err != nil {
		t.Fatalf("OpenWith: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// replayCopy opens a copy of the file at path as it is on disk now: what a
// process killed at this instant would find.
func replayCopy(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "j")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, got, _ := mustOpen(t, p)
	return got
}

func recsOf(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, r := range s {
		out[i] = []byte(r)
	}
	return out
}

// Batches appended while a rewrite writes its new file follow the snapshot
// in it, in order; Appends do not wait for the rewrite's write; and at every
// instant the file at the journal's path replays every acknowledged record.
func TestRewrite_KeepsWhatIsAppendedWhileItWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	gate := &gatedFile{entered: make(chan struct{}), release: make(chan struct{})}
	j := openWith(t, path, onCompactFile(func(f *os.File) File { gate.File = f; return gate }))
	for i := range 10 {
		if err := j.Append([]byte(fmt.Sprintf(`{"old":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	rw, err := j.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.BeginRewrite(); !errors.Is(err, ErrRewriteUnderWay) {
		t.Fatalf("a second BeginRewrite: err = %v, want ErrRewriteUnderWay", err)
	}
	finished := make(chan error, 1)
	go func() { finished <- rw.Finish(recsOf(`{"live":"snapshot"}`)) }()
	<-gate.entered

	// The rewrite is stalled mid-write: appends go on, and a crash now
	// finds the old file with all of them.
	want := []string{}
	for i := range 10 {
		want = append(want, fmt.Sprintf(`{"old":%d}`, i))
	}
	var during []string
	for i := range 5 {
		a, b := fmt.Sprintf(`{"during":%d}`, i), fmt.Sprintf(`{"during":%d,"b":1}`, i)
		if err := j.Append([]byte(a), []byte(b)); err != nil {
			t.Fatalf("Append while the rewrite is stalled: %v", err)
		}
		during = append(during, a, b)
	}
	if diff := cmp.Diff(append(want, during...), replayCopy(t, path)); diff != "" {
		t.Fatalf("journal on disk while the rewrite is stalled (-want +got):\n%s", diff)
	}

	// Appends racing the switch-over are kept too.
	var wg sync.WaitGroup
	wg.Add(1)
	var racing []string
	go func() {
		defer wg.Done()
		for i := range 20 {
			r := fmt.Sprintf(`{"racing":%d}`, i)
			if err := j.Append([]byte(r)); err != nil {
				t.Error(err)
				return
			}
			racing = append(racing, r)
		}
	}()
	close(gate.release)
	if err := <-finished; err != nil {
		t.Fatalf("Finish: %v", err)
	}
	wg.Wait()
	if err := j.Append([]byte(`{"after":1}`)); err != nil {
		t.Fatal(err)
	}
	got := replayCopy(t, path)
	wantAfter := append(append([]string{`{"live":"snapshot"}`}, during...), racing...)
	wantAfter = append(wantAfter, `{"after":1}`)
	if diff := cmp.Diff(wantAfter, got); diff != "" {
		t.Fatalf("journal after the rewrite (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	if _, err := j.BeginRewrite(); err != nil {
		t.Fatalf("BeginRewrite after one finished: %v", err)
	}
}

// A rewrite that fails before its rename (a write cut short, an fsync
// failing, of the snapshot or of the batches appended meanwhile) leaves the
// old file as the journal, with everything appended meanwhile, removes its
// temporary file, and Appends go on.
func TestRewrite_FailureKeepsTheOldJournal(t *testing.T) {
	tests := []struct {
		name            string
		writeAt, syncAt int // which write or fsync of the temporary file fails
	}{
		{"snapshot write cut short", 1, 0},
		{"snapshot fsync fails", 0, 1},
		{"tail write cut short", 2, 0},
		{"tail fsync fails", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j")
			j := openWith(t, path, onCompactFile(func(f *os.File) File {
				return &nthFault{File: f, writeAt: tt.writeAt, syncAt: tt.syncAt}
			}))
			if err := j.Append([]byte(`{"a":1}`)); err != nil {
				t.Fatal(err)
			}
			rw, err := j.BeginRewrite()
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Append([]byte(`{"b":2}`)); err != nil {
				t.Fatal(err)
			}
			if err := rw.Finish(recsOf(`{"a":1}`)); !errors.Is(err, errInjected) {
				t.Fatalf("Finish with a fault: err = %v, want the fault", err)
			}
			if err := j.Append([]byte(`{"c":3}`)); err != nil {
				t.Fatalf("Append after the failed rewrite: %v", err)
			}
			if diff := cmp.Diff([]string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, replayCopy(t, path)); diff != "" {
				t.Fatalf("journal after a failed rewrite (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
				t.Errorf("temporary file left behind: %v", err)
			}
			// The next rewrite, without the fault, works.
			j.wrap = func(f File) File { return f }
			if err := j.Rewrite(recsOf(`{"live":1}`)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{`{"live":1}`}, replayCopy(t, path)); diff != "" {
				t.Fatalf("journal after the next rewrite (-want +got):\n%s", diff)
			}
		})
	}
}

// nthFault fails only the writeAt-th write (after writing half of it) or
// the syncAt-th fsync.
type nthFault struct {
	*os.File
	writeAt, syncAt int
	writes, syncs   int
}

func (f *nthFault) Write(p []byte) (int, error) {
	f.writes++
	if f.writes == f.writeAt {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errInjected
	}
	return f.File.Write(p)
}

func (f *nthFault) Sync() error {
	f.syncs++
	if f.syncs == f.syncAt {
		return errInjected
	}
	return f.File.Sync()
}

// Once the new file is renamed over the journal it is the journal, even
// when the directory fsync that follows fails: later Appends go to it, not
// to the old file, which no longer has a name.
func TestRewrite_DirectorySyncFailureStillSwitchesFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := openWith(t, path, nil)
	if err := j.Append([]byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	rw, err := j.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte(`{"b":2}`)); err != nil {
		t.Fatal(err)
	}
	j.syncDir = func(string) error { return errInjected }
	if err := rw.Finish(recsOf(`{"live":1}`)); !errors.Is(err, errInjected) {
		t.Fatalf("Finish whose directory fsync fails: err = %v, want the fault", err)
	}
	if err := j.Append([]byte(`{"c":3}`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{`{"live":1}`, `{"b":2}`, `{"c":3}`}, replayCopy(t, path)); diff != "" {
		t.Fatalf("journal after a rewrite whose directory fsync failed (-want +got):\n%s", diff)
	}
}

// A rewrite during which more was appended than it may hold in memory is
// abandoned; the old file, with everything, stays the journal.
func TestRewrite_AbandonedWhenTooMuchIsAppendedMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := openWith(t, path, nil)
	j.maxTail = 64
	rw, err := j.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		r := fmt.Sprintf(`{"during":%d}`, i)
		if err := j.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := rw.Finish(recsOf(`{"live":1}`)); err == nil || !strings.Contains(err.Error(), "abandoned") {
		t.Fatalf("Finish after more than maxTail was appended: err = %v, want it abandoned", err)
	}
	if diff := cmp.Diff(want, replayCopy(t, path)); diff != "" {
		t.Fatalf("journal after an abandoned rewrite (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
}
