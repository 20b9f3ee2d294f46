package store

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// fleet is a synced snapshot of the named members, each in its own file and
// all on one profile, which it holds too.
func fleet(names ...string) *Snapshot {
	s := NewSnapshot()
	s.Synced = true
	p := &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude"}}
	s.Put(p, "profiles.yaml")
	for _, n := range names {
		m := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: n, UID: "uid-" + n}, Spec: v1alpha1.MemberSpec{Profile: "claude"}}
		s.Put(m, n+".yaml")
	}
	return s
}

// without is s without the named members (and, with profile, without the
// profile too), every other object the same pointer.
func without(s *Snapshot, profile bool, names ...string) *Snapshot {
	out := NewSnapshot()
	out.Synced = s.Synced
	for _, o := range slices.Concat(s.List(v1alpha1.KindProfile), s.List(v1alpha1.KindMember)) {
		k := Key{Kind: o.GetObjectKind(), Name: o.GetName()}
		if (k.Kind == v1alpha1.KindMember && slices.Contains(names, k.Name)) || (k.Kind == v1alpha1.KindProfile && profile) {
			continue
		}
		out.Put(o, s.Sources[k])
	}
	return out
}

func names(s *Snapshot) []string { return slices.Sorted(maps.Keys(s.Members)) }

func heldNames(s *Snapshot) []string { return slices.Sorted(maps.Keys(s.PruneHeld)) }

// newTestHold is a hold publishing into pub, on the bubble's clock.
func newTestHold(pub *Published, baseline *Snapshot) *Hold {
	return NewHold(pub, &HoldOptions{Duration: 2 * time.Minute, Logger: slog.New(slog.DiscardHandler), Baseline: baseline})
}

// One change that removes more than half of the members (and at least 3)
// without explicit deletes is held: the members stay in the snapshot on
// their last definition, with the profile they reference (gone with them),
// and PruneHeld says why and until when. A smaller removal, or one made of
// explicit deletes, passes at once.
func TestHold_MassRemovalIsHeldOthersPass(t *testing.T) {
	all := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name     string
		remove   []string
		profile  bool
		explicit []string
		held     []string
	}{
		{"three of five, profile too", []string{"a", "b", "c"}, true, nil, []string{"a", "b", "c"}},
		{"all five", all, false, nil, all},
		{"two of five", []string{"a", "b"}, false, nil, nil},
		{"four of five deleted explicitly", []string{"a", "b", "c", "d"}, false, []string{"a", "b", "c", "d"}, nil},
		{"four of five, two of them explicitly", []string{"a", "b", "c", "d"}, false, []string{"a", "b"}, nil},
		{"four of five, one explicitly", []string{"a", "b", "c", "d"}, false, []string{"a"}, []string{"b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var pub Published
				h := newTestHold(&pub, nil)
				defer h.Stop()
				before := fleet(all...)
				h.Publish(before, nil)
				h.Publish(without(before, tc.profile, tc.remove...), func(n string) bool { return slices.Contains(tc.explicit, n) })
				got := pub.Snapshot()
				if diff := cmp.Diff(tc.held, heldNames(got)); diff != "" {
					t.Fatalf("held -want +got:\n%s", diff)
				}
				want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(tc.remove, n) && !slices.Contains(tc.held, n) })
				if diff := cmp.Diff(want, names(got)); diff != "" {
					t.Errorf("members -want +got:\n%s", diff)
				}
				for _, n := range tc.held {
					if got.Members[n] != before.Members[n] || got.Sources[Key{v1alpha1.KindMember, n}] != n+".yaml" {
						t.Errorf("held %s is not its last definition from %s.yaml", n, n)
					}
					ph := got.PruneHeld[n]
					if !ph.Until.Equal(ph.Since.Add(2*time.Minute)) || !strings.Contains(ph.Message, "fleetd prune --confirm") || ph.Source != n+".yaml" {
						t.Errorf("PruneHeld[%s] = %+v", n, ph)
					}
				}
				if len(tc.held) > 0 && got.Profiles["claude"] != before.Profiles["claude"] {
					t.Error("the profile the held members reference is not kept with them")
				}
				if len(tc.held) == 0 && got.PruneHeld != nil {
					t.Errorf("PruneHeld = %v with nothing held", got.PruneHeld)
				}
			})
		})
	}
}

// A held prune ends by itself after the hold's duration: the members go
// then, not before.
func TestHold_ExpiresAfterItsDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pub Published
		h := newTestHold(&pub, nil)
		defer h.Stop()
		before := fleet("a", "b", "c", "d")
		h.Publish(before, nil)
		h.Publish(without(before, false, "a", "b", "c", "d"), nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		changes := pub.Watch(ctx)
		time.Sleep(2*time.Minute - time.Second)
		synctest.Wait()
		if got := names(pub.Snapshot()); len(got) != 4 {
			t.Fatalf("members %v a second before the hold ends; want all 4 still", got)
		}
		start := time.Now()
		<-changes
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("the hold ended %s after the last check; want 1s", waited)
		}
		if got := pub.Snapshot(); len(got.Members) != 0 || got.PruneHeld != nil {
			t.Errorf("after the hold: members %v, held %v; want none", names(got), heldNames(got))
		}
	})
}

// Confirm prunes every held member at once; Release one deleted
// explicitly; a member defined again leaves the hold with its new
// definition.
func TestHold_ConfirmReleaseAndReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pub Published
		h := newTestHold(&pub, nil)
		defer h.Stop()
		before := fleet("a", "b", "c", "d", "e")
		h.Publish(before, nil)
		after := without(before, false, "a", "b", "c", "d")
		h.Publish(after, nil)
		if got := heldNames(pub.Snapshot()); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
			t.Fatalf("held %v", got)
		}

		if !h.Release("a") || h.Release("a") || h.Release("e") {
			t.Error("Release: want true for a held member once, false otherwise")
		}
		back := fleet("b", "e")
		back.Members["b"].Spec.Cwd = "/new" // b defined again, changed
		h.Publish(back, nil)
		got := pub.Snapshot()
		if diff := cmp.Diff([]string{"c", "d"}, heldNames(got)); diff != "" {
			t.Errorf("held after a release and a return -want +got:\n%s", diff)
		}
		if got.Members["b"] != back.Members["b"] {
			t.Error("b, defined again, does not run its new definition")
		}
		if _, ok := got.Members["a"]; ok {
			t.Error("a, released, is still in the snapshot")
		}

		if diff := cmp.Diff([]string{"c", "d"}, h.Confirm()); diff != "" {
			t.Errorf("Confirm -want +got:\n%s", diff)
		}
		if got := pub.Snapshot(); !slices.Equal(names(got), []string{"b", "e"}) || got.PruneHeld != nil || len(h.Held()) != 0 {
			t.Errorf("after Confirm: members %v, held %v", names(got), heldNames(got))
		}
	})
}

// The baseline — what was in effect when fleetd last ran — makes the first
// read after a restart one observed change: most members gone while fleetd
// was stopped are held. An unsynced snapshot before it changes nothing.
func TestHold_BaselineHoldsARemovalWhileStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pub Published
		h := newTestHold(&pub, fleet("a", "b", "c"))
		defer h.Stop()
		h.Publish(NewSnapshot(), nil) // not read yet
		h.Publish(fleet(), nil)
		if got := heldNames(pub.Snapshot()); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("held %v at the first read; want a, b, c", got)
		}
	})
}

// Removals spread over changes each pass on their own: only one change
// that removes most of what is left is held.
func TestHold_EachChangeIsJudgedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pub Published
		h := newTestHold(&pub, nil)
		defer h.Stop()
		var all []string
		for i := range 10 {
			all = append(all, fmt.Sprintf("m%d", i))
		}
		s := fleet(all...)
		h.Publish(s, nil)
		for i := range 6 { // one at a time: never a mass removal
			s = without(s, false, all[i])
			h.Publish(s, nil)
		}
		if got := pub.Snapshot(); len(got.Members) != 4 || got.PruneHeld != nil {
			t.Fatalf("after six single removals: members %v, held %v", names(got), heldNames(got))
		}
		h.Publish(without(s, false, all[6:]...), nil) // the last four at once
		if got := heldNames(pub.Snapshot()); len(got) != 4 {
			t.Errorf("held %v; want the last four", got)
		}
	})
}
