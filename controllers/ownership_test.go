package controllers

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// dotFiles returns the names of owned/'s dot-files (spares, temporaries).
func dotFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// A dropped record's file becomes a spare that no load takes for a record,
// and the next write reuses it — the same file, overwritten and truncated
// to exactly the new record — instead of creating one (a mass repair drops
// and writes one record per replacement). A spare left torn by a crash is
// harmless, and a fleetd started later reuses the spares it finds.
func TestOwnBook_DropLeavesASpareTheNextPutReuses(t *testing.T) {
	state := t.TempDir()
	b, err := loadOwnership(state)
	if err != nil {
		t.Fatal(err)
	}
	dir := statedir.At(state).OwnedDir()
	long := Ownership{Member: "alpha", UID: "u1", PaneID: "w1:p1", TerminalID: "t1", TabID: "w1:t1",
		Token: strings.Repeat("a", 200)}
	if err := b.put(long); err != nil {
		t.Fatal(err)
	}
	if err := b.drop("alpha"); err != nil {
		t.Fatal(err)
	}
	spares := dotFiles(t, dir)
	if len(spares) != 1 || !statedir.IsOwnedSpare(spares[0]) {
		t.Fatalf("owned/ after the drop holds %v; want one spare", spares)
	}
	if _, err := os.Stat(statedir.At(state).Owned("alpha")); !os.IsNotExist(err) {
		t.Fatalf("alpha's record after the drop: %v; want it gone", err)
	}
	reloaded, err := loadOwnership(state)
	if err != nil {
		t.Fatal(err)
	}
	if got := reloaded.all(); len(got) != 0 {
		t.Fatalf("a load after the drop found records %+v; want none (a spare is not a record)", got)
	}
	spare, err := os.Stat(filepath.Join(dir, spares[0]))
	if err != nil {
		t.Fatal(err)
	}

	short := Ownership{Member: "beta", UID: "u2", PaneID: "w1:p2", TerminalID: "t2", TabID: "w1:t2"}
	if err := b.put(short); err != nil {
		t.Fatal(err)
	}
	rec, err := os.Stat(statedir.At(state).Owned("beta"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(spare, rec) {
		t.Error("beta's record is a new file; want the spare reused")
	}
	if left := dotFiles(t, dir); len(left) != 0 {
		t.Errorf("owned/ after the put holds %v; want the spare used up", left)
	}
	reloaded, err = loadOwnership(state)
	if err != nil {
		t.Fatalf("load after a spare was reused: %v", err)
	}
	if diff := cmp.Diff([]Ownership{short}, reloaded.all()); diff != "" {
		t.Errorf("records after a spare was reused (-want +got):\n%s", diff)
	}

	// A crash mid-overwrite leaves a torn spare: loading ignores it, and
	// the fleetd started then reuses it for a whole record.
	torn := statedir.At(state).OwnedSpare("torn")
	if err := os.WriteFile(torn, []byte(`{"member":"gamma","ui`), statedir.FileMode); err != nil {
		t.Fatal(err)
	}
	later, err := loadOwnership(state)
	if err != nil {
		t.Fatalf("load with a torn spare: %v", err)
	}
	gamma := Ownership{Member: "gamma", UID: "u3", PaneID: "w1:p3", TerminalID: "t3", TabID: "w1:t3"}
	if err := later.put(gamma); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Errorf("the torn spare is still there (%v); want it reused", err)
	}
	final, err := loadOwnership(state)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := final.get("gamma"); !ok || !cmp.Equal(got, gamma) {
		t.Errorf("gamma after reusing the torn spare = %+v, %v; want %+v", got, ok, gamma)
	}
}

// At most maxSpares spares are kept: a drop beyond them deletes the file.
func TestOwnBook_SparesAreBounded(t *testing.T) {
	state := t.TempDir()
	b, err := loadOwnership(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.put(Ownership{Member: "alpha", PaneID: "w1:p1"}); err != nil {
		t.Fatal(err)
	}
	for i := range maxSpares {
		b.spares = append(b.spares, statedir.At("/nonexistent").OwnedSpare(strconv.Itoa(i))) // never opened: the pool is full
	}
	if err := b.drop("alpha"); err != nil {
		t.Fatal(err)
	}
	if left := dotFiles(t, statedir.At(state).OwnedDir()); len(left) != 0 || len(b.spares) != maxSpares {
		t.Errorf("after a drop with %d spares kept: owned/ holds %v, %d spares; want nothing more kept", maxSpares, left, len(b.spares))
	}
}
