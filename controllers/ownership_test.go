package controllers

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedb/statedbtest"
)

// openState opens a state database at path, closed when the test ends.
func openState(t *testing.T, path string, opts *statedb.Options) *statedb.DB {
	t.Helper()
	db, err := statedb.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// reloaded closes db, which writes what it staged, and loads the
// ownership records of the database at path again, as a restart does.
func reloaded(t *testing.T, db *statedb.DB, path string) *ownBook {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := loadOwnership(openState(t, path, nil))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openBook opens a state database in a new directory and loads its
// ownership records; it returns the database's path too, for a reload.
func openBook(t *testing.T) (string, *statedb.DB, *ownBook) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := openState(t, path, nil)
	b, err := loadOwnership(db)
	if err != nil {
		t.Fatal(err)
	}
	return path, db, b
}

// A put is durable when it returns and a drop once the database is synced
// (as Run does before it returns): a fleetd started later loads exactly
// the records kept.
func TestOwnBook_RecordsOutliveTheProcess(t *testing.T) {
	t.Parallel()
	path, db, b := openBook(t)
	alpha := Ownership{Member: "alpha", UID: "u1", PaneID: "w1:p1", TerminalID: "t1", TabID: "w1:t1", Token: strings.Repeat("a", 64)}
	beta := Ownership{Member: "beta", UID: "u2", PaneID: "w1:p2", TerminalID: "t2", TabID: "w1:t2",
		CreatedWorkspace: &CreatedWorkspace{Label: "fleetd", RootTabID: "w1:t0"}}
	for _, r := range []Ownership{alpha, beta} {
		if err := b.put(r); err != nil {
			t.Fatal(err)
		}
	}
	b.drop("alpha")
	if _, ok := b.get("alpha"); ok {
		t.Error("a dropped record is still in memory")
	}
	later := reloaded(t, db, path) // the close writes the staged drop
	if diff := cmp.Diff([]Ownership{beta}, later.all(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records after a restart (-want +got):\n%s", diff)
	}
}

// A staged record is in memory at once and in the file once its commit is
// durable; a commit the disk refuses fails, and the caller (launch) closes
// the pane before any agent starts there.
func TestOwnBook_AStagedRecordIsKnownAtOnceAndDurableWithItsCommit(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	path := filepath.Join(t.TempDir(), "state.journal")
	db := openState(t, path, &statedb.Options{Wrap: statedbtest.FailingWrites(&fail)})
	b, err := loadOwnership(db)
	if err != nil {
		t.Fatal(err)
	}
	alpha := Ownership{Member: "alpha", UID: "u1", PaneID: "w1:p1", TerminalID: "t1", TabID: "w1:t1"}
	c, err := b.stage(alpha)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("alpha"); !ok || got != alpha {
		t.Errorf("staged record in memory: %+v (found %v), want %+v", got, ok, alpha)
	}
	if owner, ok := b.ownerOf("w1:p1", ""); !ok || owner != "alpha" {
		t.Errorf("owner of the staged record's pane: %q (found %v), want alpha", owner, ok)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}

	fail.Store(true)
	beta := Ownership{Member: "beta", UID: "u2", PaneID: "w1:p2", TerminalID: "t2", TabID: "w1:t2"}
	c, err = b.stage(beta)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err == nil {
		t.Error("a commit the disk refused reports no error")
	}
	b.drop("beta")
	fail.Store(false)
	later := reloaded(t, db, path)
	if diff := cmp.Diff([]Ownership{alpha}, later.all(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("records after a restart (-want +got):\n%s", diff)
	}
}

// A put the disk refuses returns the error and records nothing, in memory
// either: the caller closes the tab it created rather than run an agent in
// a pane no restart would adopt.
func TestOwnBook_AFailedPutRecordsNothing(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	db := openState(t, filepath.Join(t.TempDir(), "state.journal"), &statedb.Options{Wrap: statedbtest.FailingWrites(&fail)})
	b, err := loadOwnership(db)
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := b.put(Ownership{Member: "alpha", PaneID: "w1:p1"}); err == nil || !strings.Contains(err.Error(), "alpha") {
		t.Fatalf("put on a failing disk = %v, want an error naming the member", err)
	}
	if _, ok := b.get("alpha"); ok {
		t.Error("a failed put is recorded in memory")
	}
}

// A record fleetd cannot read stops the start with an error naming the
// member and the command that shows the damage.
func TestLoadOwnership_RefusesAnUnreadableRecord(t *testing.T) {
	t.Parallel()
	for name, value := range map[string]string{
		"not an object":    `[1]`,
		"another member's": `{"member":"beta","paneId":"w1:p1"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openState(t, filepath.Join(t.TempDir(), "state.journal"), nil)
			if err := db.Write(statedb.Put(statedb.Owned, "alpha", []byte(value))); err != nil {
				t.Fatal(err)
			}
			if _, err := loadOwnership(db); err == nil || !strings.Contains(err.Error(), `"alpha"`) || !strings.Contains(err.Error(), "fleetd journal check") {
				t.Errorf("loadOwnership = %v, want an error naming alpha and fleetd journal check", err)
			}
		})
	}
}

// ownerOf names the member whose record has a pane or tab id, through a
// put that moves the member to a new pane, a drop, and a reload; where two
// records name one pane (nothing fleetd does makes that), dropping one
// leaves the other found.
func TestOwnBook_OwnerOfFollowsPutsAndDrops(t *testing.T) {
	t.Parallel()
	path, db, b := openBook(t)
	owner := func(pane, tab string) string {
		t.Helper()
		name, ok := b.ownerOf(pane, tab)
		if !ok {
			return "-"
		}
		return name
	}
	check := func(when string, want map[[2]string]string) {
		t.Helper()
		for ids, name := range want {
			if got := owner(ids[0], ids[1]); got != name {
				t.Errorf("%s: ownerOf(%q, %q) = %s, want %s", when, ids[0], ids[1], got, name)
			}
		}
	}
	put := func(r Ownership) {
		t.Helper()
		if err := b.put(r); err != nil {
			t.Fatal(err)
		}
	}
	put(Ownership{Member: "alpha", PaneID: "w1:p1", TabID: "w1:t1"})
	put(Ownership{Member: "beta", PaneID: "w1:p2", TabID: "w1:t2"})
	check("two members", map[[2]string]string{
		{"w1:p1", ""}: "alpha", {"", "w1:t1"}: "alpha", {"w1:p2", "w1:t1"}: "beta", {"w9:p9", "w1:t2"}: "beta",
		{"w9:p9", ""}: "-", {"", ""}: "-",
	})

	put(Ownership{Member: "alpha", PaneID: "w1:p3", TabID: "w1:t3", Restarts: 1}) // replaced
	put(Ownership{Member: "beta", PaneID: "w1:p2", TabID: "w1:t2", Restarts: 1})  // same pane
	check("alpha replaced", map[[2]string]string{
		{"w1:p1", ""}: "-", {"", "w1:t1"}: "-", {"w1:p3", ""}: "alpha", {"", "w1:t3"}: "alpha", {"w1:p2", ""}: "beta",
	})
	if b.shared != 0 { // no record shares an id: a drop walks no records
		t.Errorf("shared = %d with no id of two records", b.shared)
	}

	put(Ownership{Member: "gamma", PaneID: "w1:p2", TabID: "w1:t4"})
	b.drop("gamma")
	check("a second record of beta's pane dropped", map[[2]string]string{{"w1:p2", ""}: "beta", {"", "w1:t4"}: "-"})
	put(Ownership{Member: "gamma", PaneID: "w1:p2", TabID: "w1:t4"})
	b.drop("beta")
	check("beta dropped, gamma names its pane too", map[[2]string]string{{"w1:p2", ""}: "gamma", {"", "w1:t2"}: "-"})

	b = reloaded(t, db, path)
	check("reloaded", map[[2]string]string{{"w1:p3", ""}: "alpha", {"w1:p2", ""}: "gamma", {"", "w1:t4"}: "gamma", {"w1:p1", ""}: "-"})
}

// Through any order of puts (new members, new panes or tabs of a member,
// records of one pane or tab for two members) and drops, the book answers
// as its records walked would: get and all give each member's last
// record, and ownerOf finds a member whose record has the pane id, else
// the tab id, whenever one has.
func TestOwnBook_IndexesAnswerAsAWalk(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 26))
	b := newOwnBook(nil)
	want := map[string]Ownership{}
	members := []string{"alpha", "beta", "gamma", "delta"}
	for step := range 3000 {
		name := members[r.IntN(len(members))]
		if r.IntN(4) == 0 {
			b.drop(name)
			delete(want, name)
		} else {
			id := func(kind string) string {
				if n := r.IntN(5); n > 0 {
					return fmt.Sprintf("w1:%s%d", kind, n)
				}
				return "" // never indexed
			}
			rec := Ownership{Member: name, PaneID: id("p"), TabID: id("t"), Restarts: int32(step)}
			if err := b.put(rec); err != nil {
				t.Fatal(err)
			}
			want[name] = rec
		}
		if diff := cmp.Diff(want, maps.Collect(func(yield func(string, Ownership) bool) {
			for _, o := range b.all() {
				yield(o.Member, o)
			}
		}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("step %d: records (-walk +book):\n%s", step, diff)
		}
		for _, pane := range []string{"", "w1:p1", "w1:p2", "w1:p3", "w1:p4"} {
			for _, tab := range []string{"", "w1:t1", "w1:t2", "w1:t3", "w1:t4"} {
				owners := map[string]bool{}
				for _, o := range want {
					if pane != "" && o.PaneID == pane {
						owners[o.Member] = true
					}
				}
				if len(owners) == 0 {
					for _, o := range want {
						if tab != "" && o.TabID == tab {
							owners[o.Member] = true
						}
					}
				}
				got, ok := b.ownerOf(pane, tab)
				if ok != (len(owners) > 0) || (ok && !owners[got]) {
					t.Fatalf("step %d: ownerOf(%q, %q) = %q, %v; want one of %v", step, pane, tab, got, ok, owners)
				}
			}
		}
	}
}

// BenchmarkOwnBook_Panes: the ownership records' panes of a fleet of 1000,
// as the cache asks for them (ownedPanes) each time it resubscribes.
func BenchmarkOwnBook_Panes(b *testing.B) {
	book := newOwnBook(nil)
	for i := range 1000 {
		book.setLocked(Ownership{Member: fmt.Sprintf("m%04d", i), UID: fmt.Sprintf("uid-%d", i),
			PaneID: fmt.Sprintf("w1:p%d", i), TerminalID: fmt.Sprintf("term_%d", i), TabID: fmt.Sprintf("w1:t%d", i),
			Launch: strings.Repeat("a", 24), Refs: strings.Repeat("b", 24), Token: strings.Repeat("c", 64)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := len(book.panes()); got != 1000 {
			b.Fatalf("%d panes, want 1000", got)
		}
	}
}

// BenchmarkOwnBook_OwnerOf: what every herdr event about a pane asks, and
// what a new member's record costs, at 1000 and 10000 records.
func BenchmarkOwnBook_OwnerOf(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		book := newOwnBook(nil)
		rec := func(i int) Ownership {
			return Ownership{Member: fmt.Sprintf("m%05d", i), PaneID: fmt.Sprintf("w1:p%d", i), TabID: fmt.Sprintf("w1:t%d", i)}
		}
		panes := make([]string, n)
		for i := range n {
			r := rec(2 * i)
			book.setLocked(r)
			panes[i] = r.PaneID
		}
		b.Run(fmt.Sprintf("ownerOf/n=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, ok := book.ownerOf(panes[i%n], ""); !ok {
					b.Fatal("no owner")
				}
			}
		})
		b.Run(fmt.Sprintf("put+drop/n=%d", n), func(b *testing.B) {
			r := rec(n - 1) // in the middle of every index
			for b.Loop() {
				book.mu.Lock()
				book.setLocked(r)
				book.mu.Unlock()
				book.drop(r.Member)
			}
		})
	}
}
