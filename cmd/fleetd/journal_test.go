package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/statedb"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

type nopPrompter struct{}

func (nopPrompter) Prompt(context.Context, string, string) error { return nil }
func (nopPrompter) ReadTail(context.Context, string, int) (string, error) {
	return "", nil
}

// damagedJournal makes a state directory whose journal holds three
// messages, the second one damaged; it returns the directory and the
// damaged line's byte offset.
func damagedJournal(t *testing.T) (stateDir string, at int) {
	t.Helper()
	stateDir = t.TempDir()
	dir := statedir.At(stateDir).Messages()
	core, err := messaging.New(dir, nopPrompter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one", "two", "three"} {
		if _, err := core.Reply(context.Background(), "w", s, false); err != nil {
			t.Fatal(err)
		}
	}
	core.Close()
	return stateDir, damageLine(t, messaging.JournalPath(dir), `"two"`)
}

// damageLine changes a byte of the first line of the file at path that
// holds marker (the second byte of the marker) and returns the line's
// byte offset.
func damageLine(t *testing.T, path, marker string) (at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), marker)
	if i < 0 {
		t.Fatalf("%s holds no %s", path, marker)
	}
	data[i+1] = 'X'
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.LastIndex(string(data[:i]), "\n") + 1
}

func TestJournal_CheckReportsDamageAndRepairKeepsIntactRecords(t *testing.T) {
	t.Parallel()
	stateDir, at := damagedJournal(t)
	code, out, errOut := runCLI(t, "journal", "check", "--state-dir", stateDir)
	wantLine := "  byte " + strconv.Itoa(at) + " (line 3, "
	if code != 1 || !strings.Contains(out, wantLine) || !strings.Contains(out, "checksum mismatch") ||
		!strings.Contains(out, "2 intact records, 1 damaged") || !strings.Contains(out, "fleetd journal repair") {
		t.Fatalf("journal check = %d\n%s%s\nwant exit 1 naming %q", code, out, errOut, wantLine)
	}

	code, out, errOut = runCLI(t, "journal", "repair", "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "now holds the 2 intact records; the original is ") {
		t.Fatalf("journal repair = %d\n%s%s", code, out, errOut)
	}
	backups, _ := filepath.Glob(filepath.Join(statedir.At(stateDir).Messages(), messaging.JournalFile+".broken-*"))
	if len(backups) != 1 {
		t.Fatalf("backups: %v, want one", backups)
	}
	if code, out, _ := runCLI(t, "journal", "check", "--state-dir", stateDir); code != 0 || !strings.Contains(out, "2 intact records, 0 damaged") {
		t.Fatalf("journal check after repair = %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "journal", "repair", "--state-dir", stateDir); code != 0 || !strings.Contains(out, "nothing to repair") {
		t.Fatalf("journal repair of a clean journal = %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "journal", "check", "--state-dir", t.TempDir()); code != 1 || !strings.Contains(errOut, "no message journal at") {
		t.Fatalf("journal check without a journal = %d %s", code, errOut)
	}
}

// serve does not start on a damaged journal, and says which file and which
// commands to run; the journal is left as it was.
func TestServe_RefusesADamagedJournal(t *testing.T) {
	t.Parallel()
	stateDir, _ := damagedJournal(t)
	path := messaging.JournalPath(statedir.At(stateDir).Messages())
	before, _ := os.ReadFile(path)
	code, _, errOut := runCLI(t, "serve", "--herdr=sim", "--state-dir", stateDir, "--manifests", t.TempDir(), "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "fleetd journal check --state-dir") ||
		!strings.Contains(errOut, "fleetd journal repair --state-dir") {
		t.Fatalf("serve on a damaged journal = %d\n%s", code, errOut)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("serve changed the damaged journal")
	}
}

// damagedStateDB makes a state directory whose state database holds three
// ownership records, the second one damaged; it returns the directory and
// the damaged line's byte offset.
func damagedStateDB(t *testing.T) (stateDir string, at int) {
	t.Helper()
	stateDir = t.TempDir()
	path := statedir.At(stateDir).StateDB()
	db, err := statedb.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two", "three"} {
		if err := db.Write(statedb.Put(statedb.Owned, name, []byte(`{"member":"`+name+`"}`))); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	return stateDir, damageLine(t, path, `"two"`)
}

// fleetd journal covers the state database as it covers the message
// journal: check lists its damage, repair keeps its intact records.
func TestJournal_CoversTheStateDatabase(t *testing.T) {
	t.Parallel()
	stateDir, at := damagedStateDB(t)
	path := statedir.At(stateDir).StateDB()
	code, out, errOut := runCLI(t, "journal", "check", "--state-dir", stateDir)
	wantLine := "  byte " + strconv.Itoa(at) + " (line 3, "
	if code != 1 || !strings.Contains(out, path+": ") || !strings.Contains(out, wantLine) || !strings.Contains(out, "checksum mismatch") ||
		!strings.Contains(out, "2 intact records, 1 damaged") {
		t.Fatalf("journal check = %d\n%s%s\nwant exit 1 naming %s and %q", code, out, errOut, path, wantLine)
	}
	code, out, errOut = runCLI(t, "journal", "repair", "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "repaired: "+path+" now holds the 2 intact records; the original is "+path+".broken-") {
		t.Fatalf("journal repair = %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "journal", "check", "--state-dir", stateDir); code != 0 || !strings.Contains(out, "2 intact records, 0 damaged") {
		t.Fatalf("journal check after repair = %d\n%s", code, out)
	}
}

// serve does not start on a damaged state database, and says which file
// and which commands to run; the file is left as it was.
func TestServe_RefusesADamagedStateDatabase(t *testing.T) {
	t.Parallel()
	stateDir, _ := damagedStateDB(t)
	path := statedir.At(stateDir).StateDB()
	before, _ := os.ReadFile(path)
	code, _, errOut := runCLI(t, "serve", "--herdr=sim", "--state-dir", stateDir, "--manifests", t.TempDir(), "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, path) || !strings.Contains(errOut, "fleetd journal check --state-dir") ||
		!strings.Contains(errOut, "fleetd journal repair --state-dir") {
		t.Fatalf("serve on a damaged state database = %d\n%s", code, errOut)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatal("serve changed the damaged state database")
	}
}
