package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
)

// fiveRanThenStopped runs the five members m1 … m5 of fleet.yaml (its
// content) until Ready, as they were, then stops fleetd.
func fiveRanThenStopped(t *testing.T) (e *env, fleet string, names []string, before map[string]v1alpha1.Member) {
	t.Helper()
	var docs []string
	for i := 1; i <= 5; i++ {
		names = append(names, fmt.Sprintf("m%d", i))
		docs = append(docs, memberYAML(names[i-1]))
	}
	fleet = strings.Join(docs, "---\n")
	e = newEnv(t, map[string]string{"profile.yaml": testProfile, "fleet.yaml": fleet})
	e.start()
	before = e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
	e.stop()
	return e, fleet, names, before
}

// manifestValid holds when each named member's ManifestValid condition
// has reason.
func manifestValid(reason string, names ...string) func(map[string]v1alpha1.Member) bool {
	return func(ms map[string]v1alpha1.Member) bool {
		for _, n := range names {
			if condition(ms[n], v1alpha1.ConditionManifestValid).Reason != reason {
				return false
			}
		}
		return true
	}
}

// closedOf counts the members of before whose pane is gone.
func (e *env) closedOf(before map[string]v1alpha1.Member, names ...string) int {
	closed := 0
	for _, n := range names {
		if !e.paneAlive(before[n].Status.PaneID) {
			closed++
		}
	}
	return closed
}

// A manifest holding five running members gets a typo while fleetd is
// stopped: at the next start the five keep running on the file's last good
// definitions — which the state directory kept — with the error shown, and
// nothing is closed or created. (Issue 21: every one of them was closed,
// right after the log said the last good objects stay in effect.)
func TestManager_TypoWrittenWhileStoppedKeepsTheFileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, fleet, names, before := fiveRanThenStopped(t)
		e.write("fleet.yaml", fleet+"  cwd: [unclosed\n")
		calls := e.fake.Calls()
		e.start()
		e.waitFor("the error shown on all five", manifestValid(v1alpha1.ReasonManifestError, names...))
		ms := e.idleMembers()
		if n := e.closedOf(before, names...); n != 0 {
			t.Errorf("%d of 5 panes closed at the start after a typo", n)
		}
		for _, n := range names {
			if m := ms[n]; m.Status.Phase != v1alpha1.PhaseReady || m.UID != before[n].UID || m.Generation != before[n].Generation {
				t.Errorf("%s: phase %s, uid %s gen %d; want Ready on its last good definition (uid %s gen %d)",
					n, m.Status.Phase, m.UID, m.Generation, before[n].UID, before[n].Generation)
			}
		}
		now := e.fake.Calls()
		for _, m := range []string{"tab.create", "agent.start", "tab.close"} {
			if now[m] != calls[m] {
				t.Errorf("%s called %d times at the start after a typo", m, now[m]-calls[m])
			}
		}
	})
}

// holdOf is the prune hold of the env's directory store.
func (e *env) holdOf() *store.Hold { return e.mgr.Store().(*dirstore.Directory).PruneHold() }

// Most members' files removed at once: they keep running, ManifestValid
// False (PruneHeld) and a Warning event say why and how to confirm, and
// nothing is closed until the prune is confirmed or the hold ends by
// itself. A removal of fewer members, and deletes through the store, pass
// at once.
func TestManager_MassRemovalIsHeld(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(e *env)
		held   bool
		end    func(e *env) // ends the hold
	}{
		{"three of four files removed, then confirmed", removeFiles("m1", "m2", "m3"), true, func(e *env) {
			if got := e.holdOf().Confirm(); len(got) != 3 {
				e.t.Errorf("Confirm = %v, want the three", got)
			}
		}},
		{"three of four files removed, the hold expires", removeFiles("m1", "m2", "m3"), true, func(*env) { time.Sleep(store.DefaultPruneHold) }},
		{"two of four files removed", removeFiles("m1", "m2"), false, nil},
		{"three of four deleted through the store", func(e *env) {
			for _, n := range []string{"m1", "m2", "m3"} {
				if err := e.mgr.Store().Delete(context.Background(), v1alpha1.KindMember, n); err != nil {
					e.t.Fatal(err)
				}
			}
		}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				names := []string{"m1", "m2", "m3", "m4"}
				files := map[string]string{"profile.yaml": testProfile}
				for _, n := range names {
					files[n+".yaml"] = memberYAML(n)
				}
				e := newEnv(t, files)
				e.start()
				before := e.waitFor("all Ready", allPhase(v1alpha1.PhaseReady, names...))
				tc.remove(e)
				if !tc.held {
					e.waitForHerdr("the removed members closed", func() bool { return e.closedOf(before, "m1", "m2") == 2 })
					return
				}
				e.waitFor("three held", manifestValid(v1alpha1.ReasonPruneHeld, names[:3]...))
				ms := e.idleMembers()
				for _, n := range names[:3] {
					c := condition(ms[n], v1alpha1.ConditionManifestValid)
					if c.Status != v1alpha1.ConditionFalse || !strings.Contains(c.Message, "fleetd prune --confirm") || !strings.Contains(c.Message, n+".yaml") {
						t.Errorf("%s: ManifestValid %+v", n, c)
					}
					if ms[n].Status.Phase != v1alpha1.PhaseReady {
						t.Errorf("%s held is %s, want Ready", n, ms[n].Status.Phase)
					}
					events := e.mgr.MemberEvents(n)
					if last := events[len(events)-1]; last.Reason != v1alpha1.ReasonPruneHeld || last.Type != v1alpha1.EventWarning {
						t.Errorf("%s: last event %+v, want a PruneHeld warning", n, last)
					}
				}
				if n := e.closedOf(before, names...); n != 0 {
					t.Fatalf("%d panes closed while the prune is held", n)
				}
				tc.end(e)
				e.waitFor("the held members pruned", func(ms map[string]v1alpha1.Member) bool { return len(ms) == 1 })
				e.waitForHerdr("their panes closed", func() bool { return e.closedOf(before, names[:3]...) == 3 })
				if !e.paneAlive(before["m4"].Status.PaneID) {
					t.Error("m4, still defined, was closed")
				}
			})
		})
	}
}

func removeFiles(names ...string) func(*env) {
	return func(e *env) {
		for _, n := range names {
			if err := removeQuiet(e, n+".yaml"); err != nil {
				e.t.Fatal(err)
			}
		}
		e.changedDir() // one scan: one change
	}
}

// The manifests directory emptied while fleetd was stopped: at the next
// start the members are held (the state directory recorded what was in
// effect), and a held member whose pane is gone gets no new one.
func TestManager_DirectoryEmptiedWhileStoppedIsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, names, before := fiveRanThenStopped(t)
		for _, f := range []string{"fleet.yaml", "profile.yaml"} {
			if err := removeQuiet(e, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.fake.KillPane(before["m5"].Status.PaneID); err != nil {
			t.Fatal(err)
		}
		calls := e.fake.Calls()
		logs := &logBuffer{}
		e.logTo(logs)
		e.start()
		e.waitFor("all held", manifestValid(v1alpha1.ReasonPruneHeld, names...))
		ms := e.idleMembers()
		// m5's lost pane is counted, but no status or event of it says
		// it is being recreated: it is held from the start.
		if n := logs.count(`msg="member phase changed" member=m5 from="" to=Starting`); n != 0 {
			t.Errorf("m5 was shown Starting %d times before it was shown held", n)
		}
		if evs := e.mgr.MemberEvents("m5"); slices.ContainsFunc(evs, func(ev v1alpha1.Event) bool { return strings.Contains(ev.Message, "recreating") }) {
			t.Errorf("m5's events say it is recreated: %+v", evs)
		}
		if !hasEvent(e.mgr.MemberEvents("m5"), v1alpha1.ReasonBackOff, "pane "+before["m5"].Status.PaneID+" closed; not recreated while its prune is held") {
			t.Errorf("m5's events do not count its lost pane: %+v", e.mgr.MemberEvents("m5"))
		}
		if n := e.closedOf(before, names[:4]...); n != 0 {
			t.Errorf("%d panes closed at the start after the directory was emptied", n)
		}
		if c := condition(ms["m5"], v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonPruneHeld || ms["m5"].Status.PaneID != "" {
			t.Errorf("m5 (held, its pane gone): Ready %+v, pane %q; want PruneHeld and no pane", c, ms["m5"].Status.PaneID)
		}
		if now := e.fake.Calls(); now["tab.create"] != calls["tab.create"] || now["tab.close"] != calls["tab.close"] {
			t.Errorf("tab.create +%d, tab.close +%d while held; want none", now["tab.create"]-calls["tab.create"], now["tab.close"]-calls["tab.close"])
		}
	})
}

// removeQuiet removes a manifest without nudging the store: several
// removals are then one change when it is nudged.
func removeQuiet(e *env, name string) error { return os.Remove(filepath.Join(e.dir, name)) }
