package rollout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/statedir"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// A history written to a state directory is there after a restart, in
// revisions/KIND.NAME.json, and one left with nothing is removed; a
// corrupt file stops the start with its path and what to do.
func TestDir_KeepsHistoriesAcrossRestarts(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root)
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
	if _, err := os.Stat(statedir.At(root).Revisions("profile", "codex")); err != nil {
		t.Fatalf("no file for profile/codex: %v", err)
	}

	d2, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, d2.Get(v1alpha1.KindProfile, "codex")); diff != "" {
		t.Errorf("after a restart (-want +got):\n%s", diff)
	}
	if got := d2.Names(v1alpha1.KindMember); !cmp.Equal(got, []string{"alpha"}) {
		t.Errorf("member histories %v, want [alpha]", got)
	}
	if err := d2.Update(v1alpha1.KindMember, "alpha", func(x *History) bool { *x = History{}; return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(statedir.At(root).Revisions("member", "alpha")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the emptied history's file is still there: %v", err)
	}

	bad := statedir.At(root).Revisions("profile", "broken")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(root); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "move it away") {
		t.Errorf("OpenDir with a corrupt file: %v; want its path and what to do", err)
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
		revs, _ := OpenDir("")
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

// Histories are named by kind and name only: other files are not read.
func TestDir_IgnoresFilesNotItsOwn(t *testing.T) {
	root := t.TempDir()
	dir := statedir.At(root).RevisionsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".tmp-123", "notes.txt", "tenant.acme.json", "profile.Bad Name.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenDir(root); err != nil {
		t.Errorf("OpenDir read a file that is not a history: %v", err)
	}
}
