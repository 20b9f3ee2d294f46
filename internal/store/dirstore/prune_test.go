package dirstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
)

// restarted is a new Directory on the harness's files and state directory,
// as the next fleetd start reads them.
func (h *harness) restarted() *Directory {
	h.t.Helper()
	d, err := New(h.dir, &Options{StateDir: h.state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// A file that stops decoding, or is replaced by something that is not a
// regular file, while fleetd is stopped keeps the objects it last defined
// at the next start — the state directory recorded them, with their uid
// and generation — and its error is reported. A file removed meanwhile is
// gone (a single member: no mass removal).
func TestDirectory_BrokenFileAtStartKeepsItsRecordedObjects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"a typo", func(p string) error {
			return os.WriteFile(p, []byte(profileDoc+"---\n"+memberDoc("alpha", "codex-fast")+"  paused: [oops\n"), 0o644)
		}},
		{"a directory in its place", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, map[string]string{"team.yaml": profileDoc + "---\n" + memberDoc("alpha", "codex-fast"),
					"beta.yaml": memberDoc("beta", "codex-fast")})
				h.write("team.yaml", profileDoc+"---\n"+memberDoc("alpha", "codex-fast")+"  cwd: /srv\n")
				h.until("alpha at generation 2", func() bool { return h.d.Snapshot().Members["alpha"].Generation == 2 })
				was := h.d.Snapshot().Members["alpha"]

				path := filepath.Join(h.dir, "team.yaml")
				if err := tc.damage(path); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(h.dir, "beta.yaml")); err != nil {
					t.Fatal(err)
				}
				s := h.restarted().Snapshot()
				got := s.Members["alpha"]
				if got == nil || got.UID != was.UID || got.Generation != 2 || got.Spec.Cwd != "/srv" || s.Profiles["codex-fast"] == nil {
					t.Fatalf("after the restart alpha = %+v, profile %v; want its last good definition (uid %s, generation 2, cwd /srv) and its profile",
						got, s.Profiles["codex-fast"], was.UID)
				}
				if src := s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}]; src != path {
					t.Errorf("alpha defined at %s, want %s", src, path)
				}
				if len(s.ErrorsIn(path)) == 0 {
					t.Errorf("no error reported for %s", path)
				}
				if _, ok := s.Members["beta"]; ok || s.PruneHeld != nil {
					t.Errorf("beta, removed while stopped, is %v (held %v); want it gone", s.Members["beta"], s.PruneHeld)
				}
			})
		})
	}
}

// A member the hold keeps, which no file defines any more: Delete prunes
// it at once (an explicit delete), and Apply defines it again, in a new
// file, with its uid — the hold then ends and it runs its definition.
func TestDirectory_HeldMemberIsDeletedOrAppliedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		files := map[string]string{"profile.yaml": profileDoc}
		for _, n := range []string{"a", "b", "c"} {
			files[n+".yaml"] = memberDoc(n, "codex-fast")
		}
		h := newHarness(t, files)
		uid := h.d.Snapshot().Members["b"].UID
		for _, n := range []string{"a", "b", "c"} {
			if err := os.Remove(filepath.Join(h.dir, n+".yaml")); err != nil {
				t.Fatal(err)
			}
		}
		h.until("all three held", func() bool { return len(h.d.Snapshot().PruneHeld) == 3 })

		ctx := context.Background()
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "a"); err != nil {
			t.Fatalf("Delete of held a: %v", err)
		}
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Delete of a again: %v, want ErrNotFound", err)
		}
		b := h.d.Snapshot().Members["b"].DeepCopy()
		b.Spec.Cwd = "/srv"
		if err := h.d.Apply(ctx, b); err != nil {
			t.Fatalf("Apply of held b: %v", err)
		}
		s := h.d.Snapshot()
		if diff := cmp.Diff([]string{"b", "c"}, memberNames(s)); diff != "" {
			t.Errorf("members -want +got:\n%s", diff)
		}
		if held := slices.Sorted(maps.Keys(s.PruneHeld)); !slices.Equal(held, []string{"c"}) {
			t.Errorf("held %v, want c only", held)
		}
		if got := s.Members["b"]; got.UID != uid || got.Spec.Cwd != "/srv" {
			t.Errorf("b applied again: uid %s cwd %q; want uid %s, cwd /srv", got.UID, got.Spec.Cwd, uid)
		}
		if _, err := os.Stat(filepath.Join(h.dir, "b.yaml")); err != nil {
			t.Errorf("b applied again: %v", err)
		}
	})
}
