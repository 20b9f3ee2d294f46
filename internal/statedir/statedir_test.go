package statedir_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// TestLayout_Paths pins the layout: these names are what an operator finds
// on disk (docs/security.md lists them) and what a restarted fleetd reads,
// so a rename is a migration, not a refactoring.
func TestLayout_Paths(t *testing.T) {
	l := statedir.At("/s")
	got := map[string]string{
		"lock":             l.LockFile(),
		"primary token":    l.PrimaryToken(),
		"state database":   l.StateDB(),
		"objects":          l.Objects(),
		"etcd store":       l.EtcdStore(),
		"harness":          l.Harness("alpha"),
		"messages":         l.Messages(),
		"sim socket":       l.SimSocket(),
		"legacy tokens":    l.LegacyTokens(),
		"legacy owned":     l.LegacyOwnedDir(),
		"legacy memory":    l.LegacyMemoryDir(),
		"legacy prompts":   l.LegacyPrompts(),
		"legacy revisions": l.LegacyRevisionsDir(),
	}
	want := map[string]string{
		"lock":             "/s/fleetd.lock",
		"primary token":    "/s/primary.token",
		"state database":   "/s/state.journal",
		"objects":          "/s/objects.json",
		"etcd store":       "/s/etcd-store.json",
		"harness":          "/s/harness/alpha",
		"messages":         "/s/messages",
		"sim socket":       "/s/sim/herdr.sock",
		"legacy tokens":    "/s/tokens.json",
		"legacy owned":     "/s/owned",
		"legacy memory":    "/s/members",
		"legacy prompts":   "/s/prompts-delivered.json",
		"legacy revisions": "/s/revisions",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

func TestIsLegacyRecord(t *testing.T) {
	for name, want := range map[string]bool{
		"alpha.json":          true,
		".alpha.json.tmp-123": false,
		".alpha.json":         false,
		".spare-X1":           false,
		"alpha.json.tmp":      false,
		"README":              false,
	} {
		if got := statedir.IsLegacyRecord(name); got != want {
			t.Errorf("IsLegacyRecord(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAbs(t *testing.T) {
	t.Chdir(t.TempDir())
	l, err := statedir.Abs("state")
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "state"); l.Root() != want {
		t.Errorf("Abs(state).Root() = %s, want %s", l.Root(), want)
	}
}

// TestLock_CreatesThePrivateRootAndNamesTheHolder: the lock creates a
// missing root 0700, its file is 0600 with the holder's pid, a second
// attempt fails with ErrLocked naming that pid and what to do, and the lock
// can be taken again once released.
func TestLock_CreatesThePrivateRootAndNamesTheHolder(t *testing.T) {
	l := statedir.At(filepath.Join(t.TempDir(), "a", "state"))
	lock, err := l.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if fi, err := os.Stat(l.Root()); err != nil || fi.Mode().Perm() != statedir.DirMode {
		t.Errorf("root: %v, %v; want a directory with mode %#o", fi, err, statedir.DirMode)
	}
	fi, err := os.Stat(l.LockFile())
	if err != nil || fi.Mode().Perm() != statedir.FileMode {
		t.Errorf("lock file: %v, %v; want mode %#o", fi, err, statedir.FileMode)
	}
	pid := fmt.Sprintf("%d", os.Getpid())
	if b, _ := os.ReadFile(l.LockFile()); strings.TrimSpace(string(b)) != pid {
		t.Errorf("lock file holds %q, want the pid %s", b, pid)
	}

	_, err = l.Lock()
	if !errors.Is(err, statedir.ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	for _, want := range []string{"pid " + pid, l.Root(), "stop that fleetd or use another --state-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second Lock error %q does not say %q", err, want)
		}
	}

	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := lock.Unlock(); err != nil {
		t.Errorf("second Unlock = %v, want nil", err)
	}
	again, err := l.Lock()
	if err != nil {
		t.Fatalf("Lock after Unlock = %v", err)
	}
	again.Unlock()
}

func TestLock_UnknownHolder(t *testing.T) {
	l := statedir.At(t.TempDir())
	lock, err := l.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := os.WriteFile(l.LockFile(), []byte("garbage\n"), statedir.FileMode); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(); !errors.Is(err, statedir.ErrLocked) || !strings.Contains(err.Error(), "unknown pid") {
		t.Errorf("Lock with an unreadable pid = %v, want ErrLocked naming an unknown pid", err)
	}
}

func TestCreate_PrivateRoot(t *testing.T) {
	l := statedir.At(filepath.Join(t.TempDir(), "new"))
	if err := l.Create(); err != nil {
		t.Fatal(err)
	}
	if err := l.Create(); err != nil {
		t.Fatalf("Create on an existing root = %v", err)
	}
	if fi, err := os.Stat(l.Root()); err != nil || !fi.IsDir() || fi.Mode().Perm() != statedir.DirMode {
		t.Errorf("root: %v, %v; want a directory with mode %#o", fi, err, statedir.DirMode)
	}
}

func TestLock_NilUnlock(t *testing.T) {
	var k *statedir.Lock
	if err := k.Unlock(); err != nil {
		t.Errorf("nil Unlock = %v", err)
	}
}

// TestLayout_DocumentedForOperators: every path of the layout is a row of
// docs/security.md's table of state-directory files.
func TestLayout_DocumentedForOperators(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	l := statedir.At("STATE_DIR")
	for _, path := range []string{
		l.LockFile(), l.PrimaryToken(), l.StateDB(), l.Objects(),
		l.Harness("NAME") + "/", l.Messages() + "/", l.SimSocket(),
		l.LegacyTokens(), l.LegacyOwnedDir() + "/", l.LegacyMemoryDir() + "/", l.LegacyPrompts(),
	} {
		if !strings.Contains(string(doc), "| `"+path) {
			t.Errorf("docs/security.md has no row for %s", path)
		}
	}
}
