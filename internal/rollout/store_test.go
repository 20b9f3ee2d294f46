package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedb/statedbtest"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// openDB opens the state database at path.
func openDB(t *testing.T, path string) *statedb.DB {
	t.Helper()
	db, err := statedb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A history written to the state database is there after a restart, and
// one left with nothing is deleted; a record that does not decode is
// logged and left out, the others read.
func TestDir_KeepsHistoriesAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	db := openDB(t, path)
	d, err := OpenDir(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := record(t, profile("-m", "a"), profile("-m", "b"))
	h.Halt = &Halt{Target: "t", Member: "alpha", Message: "agent exited", Time: t0}
	if err := d.Update(v1alpha1.KindProfile, "codex", func(x *History) bool { *x = h; return true }); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(v1alpha1.KindMember, "alpha", func(x *History) bool { *x = record(t, profile("-m", "z")); return true }); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(v1alpha1.KindMember, "beta", func(x *History) bool { *x = record(t, profile("-m", "y")); return true }); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(v1alpha1.KindMember, "beta", func(x *History) bool { *x = History{}; return true }); err != nil {
		t.Fatal(err)
	}
	db.Close() // as a crash would: Update returned once each change was durable

	db = openDB(t, path)
	d2, err := OpenDir(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, d2.Get(v1alpha1.KindProfile, "codex")); diff != "" {
		t.Errorf("after a restart (-want +got):\n%s", diff)
	}
	if got := d2.Names(v1alpha1.KindMember); !cmp.Equal(got, []string{"alpha"}) {
		t.Errorf("member histories %v, want [alpha] (beta's emptied history deleted)", got)
	}
	if err := db.Write(statedb.Put(statedb.Revisions, "profile/broken", []byte(`{"revisions": 7}`))); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	d3, err := OpenDir(db, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("OpenDir with a history that does not decode: %v; want it started without that history", err)
	}
	if !d3.Get(v1alpha1.KindProfile, "broken").IsZero() || !strings.Contains(logs.String(), "history=profile/broken") {
		t.Errorf("the history that does not decode: %v; logged %q", numbersAndCauses(d3.Get(v1alpha1.KindProfile, "broken")), logs.String())
	}
	if diff := cmp.Diff(h, d3.Get(v1alpha1.KindProfile, "codex")); diff != "" {
		t.Errorf("beside a history that does not decode (-want +got):\n%s", diff)
	}
}

// Updates of one object, however many at once, apply one after another,
// each to the last one's result; a change that could not be written
// changes nothing, and the error says whose history it was.
func TestDir_UpdatesOfOneObjectApplyInTurn(t *testing.T) {
	var fail atomic.Bool
	path := filepath.Join(t.TempDir(), "state.journal")
	db, err := statedb.Open(path, &statedb.Options{Wrap: statedbtest.FailingWrites(&fail)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := OpenDir(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := d.Update(v1alpha1.KindProfile, "codex", func(h *History) bool {
				changed, err := h.Record(profile("-m", strconv.Itoa(i)), t0)
				return err == nil && changed
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	h := d.Get(v1alpha1.KindProfile, "codex")
	if len(h.Revisions) != MaxRevisions || h.Revisions[len(h.Revisions)-1].Number != n {
		t.Fatalf("after %d concurrent updates: %v; want the last %d, numbered up to %d", n, numbersAndCauses(h), MaxRevisions, n)
	}

	fail.Store(true)
	err = d.Update(v1alpha1.KindProfile, "codex", func(h *History) bool { *h = History{}; return true })
	if err == nil || !strings.Contains(err.Error(), "profile/codex") || !errors.Is(err, statedbtest.ErrDiskFull) {
		t.Errorf("Update on a full disk = %v; want the disk's error, naming profile/codex", err)
	}
	if got := d.Get(v1alpha1.KindProfile, "codex"); !cmp.Equal(got, h) {
		t.Errorf("a change that was not written shows: %v", numbersAndCauses(got))
	}
}

// fakeSource is a desired-state store whose snapshot the test publishes.
type fakeSource struct{ store.Published }

func (f *fakeSource) Apply(context.Context, v1alpha1.Object) error { return nil }
func (f *fakeSource) Delete(context.Context, string, string) error { return nil }

func snapshotOf(unreadable error, objs ...v1alpha1.Object) *store.Snapshot {
	s := store.NewSnapshot()
	s.Synced, s.Unreadable = true, unreadable
	for _, o := range objs {
		s.Put(o, "f.yaml")
	}
	return s
}

// The recorder records each change of a Profile or Member, deletes the
// history of one the desired state no longer declares — but not while the
// source is unreadable, nor one the fleet still declares elsewhere — and
// clears a halt once the profile rolls out to another target.
func TestRecorder_FollowsTheDesiredState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{}
		revs, _ := OpenDir(nil, nil)
		elsewhere := map[string]bool{"moved": true}
		r := NewRecorder(src, revs, &RecorderOptions{
			Declared: func(kind, name string) bool { return kind == v1alpha1.KindMember && elsewhere[name] },
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		alpha := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "alpha", UID: "m1", Generation: 1}, Spec: v1alpha1.MemberSpec{Profile: "codex"}}
		moved := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "moved", UID: "m2", Generation: 1}, Spec: v1alpha1.MemberSpec{Profile: "codex"}}
		src.Publish(snapshotOf(nil, profile("-m", "a"), alpha, moved))
		synctest.Wait()
		if got := revs.Names(v1alpha1.KindMember); !cmp.Equal(got, []string{"alpha", "moved"}) {
			t.Fatalf("member histories %v", got)
		}
		if err := revs.Update(v1alpha1.KindProfile, "codex", func(h *History) bool {
			h.Halt = &Halt{Target: Target(profile("-m", "a")), Member: "alpha"}
			return true
		}); err != nil {
			t.Fatal(err)
		}

		src.Publish(snapshotOf(errors.New("manifests directory gone"), profile("-m", "b")))
		synctest.Wait()
		h := revs.Get(v1alpha1.KindProfile, "codex")
		if len(h.Revisions) != 2 || h.Halt != nil {
			t.Errorf("profile history %v, halt %+v; want 2 revisions, the halt of the older target cleared", numbersAndCauses(h), h.Halt)
		}
		if got := revs.Names(v1alpha1.KindMember); len(got) != 2 {
			t.Errorf("member histories %v deleted while the source was unreadable", got)
		}

		src.Publish(snapshotOf(nil, profile("-m", "b")))
		synctest.Wait()
		if got := revs.Names(v1alpha1.KindMember); !cmp.Equal(got, []string{"moved"}) {
			t.Errorf("member histories %v; want alpha's deleted, moved's kept (declared elsewhere)", got)
		}
	})
}

// Histories are named by kind and name only: other keys are not read.
func TestDir_IgnoresKeysNotItsOwn(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "state.journal"))
	for _, k := range []string{"notes", "tenant/acme", "profile/Bad Name", "member/"} {
		// A history that decodes: only its key keeps it out.
		if err := db.Write(statedb.Put(statedb.Revisions, k, []byte(`{"revisions":[{"number":1}]}`))); err != nil {
			t.Fatal(err)
		}
	}
	d, err := OpenDir(db, nil)
	if err != nil {
		t.Fatalf("OpenDir read a key that is not a history: %v", err)
	}
	if got := append(d.Names(v1alpha1.KindProfile), d.Names(v1alpha1.KindMember)...); len(got) != 0 {
		t.Errorf("histories %v, want none", got)
	}
}

// Histories whose current revisions have the same definition keep it once,
// before and after a restart, and each keeps its revisions in an array of
// their own length; a different definition is kept as it is, and what
// every history reads is what was recorded.
func TestDir_KeepsASharedDefinitionOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.journal")
	db := openDB(t, path)
	d, err := OpenDir(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]History{
		"alpha": record(t, profile("-m", "a")),
		"beta":  record(t, profile("-m", "a")),
		"gamma": record(t, profile("-m", "a"), profile("-m", "b"), profile("-m", "c")),
		"delta": record(t, profile("-m", "a")),
	}
	for _, name := range []string{"alpha", "beta", "gamma", "delta"} {
		if err := d.Update(v1alpha1.KindProfile, name, func(x *History) bool { *x = want[name].Clone(); return true }); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, d *Dir) {
		t.Helper()
		for name, h := range want {
			if diff := cmp.Diff(h, d.Get(v1alpha1.KindProfile, name)); diff != "" {
				t.Errorf("%s: %s (-recorded +read):\n%s", when, name, diff)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		kept := d.hist[v1alpha1.KindProfile]
		spec := func(name string) *byte {
			h := kept.Get(name)
			if len(h.Revisions) != cap(h.Revisions) {
				t.Errorf("%s: %s keeps %d revisions in room for %d", when, name, len(h.Revisions), cap(h.Revisions))
			}
			cur, _ := h.Latest()
			return &cur.Spec[0]
		}
		if spec("alpha") != spec("beta") || spec("beta") != spec("delta") {
			t.Errorf("%s: alpha, beta and delta keep copies of one definition", when)
		}
		if spec("gamma") == spec("alpha") {
			t.Errorf("%s: gamma's definition is alpha's", when)
		}
	}
	check("recorded", d)
	db.Close()
	d, err = OpenDir(openDB(t, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	check("after a restart", d)
}

// A Dir answers Get and Names as a map of each kind's histories would,
// whatever the order of the changes and removals of the two kinds'.
func TestDir_AnswersAsAMapOfHistories(t *testing.T) {
	d, err := OpenDir(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 26))
	kinds := []string{v1alpha1.KindProfile, v1alpha1.KindMember}
	names := []string{"a", "b", "c", "d", "e", "f"}
	want := map[string]map[string]string{v1alpha1.KindProfile: {}, v1alpha1.KindMember: {}} // kind → name → UID
	for i := range 2000 {
		kind, name := kinds[r.IntN(len(kinds))], names[r.IntN(len(names))]
		uid := ""
		if r.IntN(3) > 0 {
			uid = fmt.Sprint(i)
		}
		if err := d.Update(kind, name, func(h *History) bool { *h = History{UID: uid}; return true }); err != nil {
			t.Fatal(err)
		}
		if uid == "" {
			delete(want[kind], name)
		} else {
			want[kind][name] = uid
		}
		for _, kind := range kinds {
			for _, name := range names {
				if got := d.Get(kind, name).UID; got != want[kind][name] {
					t.Fatalf("step %d: %s %s has UID %q, want %q", i, kind, name, got, want[kind][name])
				}
			}
			var wantNames []string // nil when there are none, as Names answers
			for _, name := range names {
				if want[kind][name] != "" {
					wantNames = append(wantNames, name)
				}
			}
			if diff := cmp.Diff(wantNames, d.Names(kind)); diff != "" {
				t.Fatalf("step %d: names of %s (-want +got):\n%s", i, kind, diff)
			}
		}
	}
	if got := d.Names("Fleet"); got != nil {
		t.Errorf("names of a kind with no revisions = %v", got)
	}
}
