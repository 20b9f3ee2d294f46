package controllers

import (
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

// A put is durable when it returns and a drop once the database is synced
// (as Run does before it returns): a fleetd started later loads exactly
// the records kept.
func TestOwnBook_RecordsOutliveTheProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.journal")
	db := openState(t, path, nil)
	b, err := loadOwnership(db)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := db.Close(); err != nil { // writes the staged drop
		t.Fatal(err)
	}
	later, err := loadOwnership(openState(t, path, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ownership{beta}, later.all(), cmpopts.EquateEmpty()); diff != "" {
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
