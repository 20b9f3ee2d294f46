package dirstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetd-dev/fleetd/internal/store"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/syncbuf"
)

const profileDoc = `apiVersion: fleetd.dev/v1alpha1
kind: Profile
metadata: {name: codex-fast}
spec:
  harness: codex
  args: ["-m", "gpt-5.4"]
`

func memberDoc(name, profile string) string {
	return "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: " + name + "}\nspec:\n  profile: " + profile + "\n"
}

// harness runs a Directory on real files in a temporary directory, in one
// of two ways:
//
//   - newHarness, inside a testing/synctest bubble: the directory is read
//     on Options.Rescan nudges instead of fsnotify, on the bubble's
//     virtual time. until and settle nudge, let the debounce pass and wait
//     for the bubble to settle, so every check is made at one exact moment.
//   - newWatchedHarness, for the tests whose point is the fsnotify watch:
//     the wall clock, a short debounce and no periodic retry within the
//     test, so every read follows an fsnotify event. until waits for
//     completed reads (a channel, no polling) under one generous deadline
//     for the whole test.
type harness struct {
	t     testing.TB
	dir   string
	state string
	d     *Directory
	watch <-chan struct{}

	written  int             // reads completed when write last wrote
	nudge    chan struct{}   // newHarness: the running Directory's Rescan
	deadline <-chan struct{} // newWatchedHarness: closed when the test has waited too long
	logs     syncbuf.Buffer  // what the Directories logged
}

// debounce is the Directories' debounce in virtual time (newHarness).
const debounce = time.Second

func newHarness(t *testing.T, files map[string]string) *harness {
	t.Helper()
	h := newFiles(t, files)
	h.start()
	return h
}

func newWatchedHarness(t *testing.T, files map[string]string) *harness {
	t.Helper()
	h := newFiles(t, files)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	h.deadline = ctx.Done()
	h.start()
	return h
}

func newFiles(t testing.TB, files map[string]string) *harness {
	t.Helper()
	root := t.TempDir()
	h := &harness{t: t, dir: filepath.Join(root, "manifests"), state: filepath.Join(root, "state")}
	for _, d := range []string{h.dir, h.state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
		h.write(name, content)
	}
	return h
}

// start runs a new Directory on the harness's files and waits for Run's own
// first read.
func (h *harness) start() {
	h.t.Helper()
	opts := &Options{StateDir: h.state, Logger: slog.New(slog.NewTextHandler(&h.logs, nil))}
	if h.deadline == nil {
		h.nudge = make(chan struct{}, 1)
		opts.Rescan, opts.Debounce = h.nudge, debounce
	} else {
		opts.Debounce, opts.RetryInterval = 10*time.Millisecond, time.Hour
	}
	d, err := New(h.dir, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	d.scanned = make(chan struct{}, 1)
	h.d = d
	ctx, cancel := context.WithCancel(context.Background())
	h.watch = d.Watch(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
	h.waitScans(1)
}

func (h *harness) write(name, content string) {
	h.t.Helper()
	if h.d != nil {
		h.written = h.scans()
	}
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) scans() int {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.d.scans
}

// rescan (newHarness) nudges the Directory and returns once the read that
// follows the debounce is done.
func (h *harness) rescan() {
	h.t.Helper()
	n := h.scans()
	h.nudge <- struct{}{}
	time.Sleep(debounce)
	synctest.Wait()
	if got := h.scans(); got != n+1 {
		h.t.Fatalf("a nudge and the debounce made %d reads, want 1", got-n)
	}
}

// until returns once cond holds. Under newHarness it must hold after one
// rescan; under newWatchedHarness it is checked after every completed read
// until the test's deadline.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	if h.deadline == nil {
		h.rescan()
		if !cond() {
			h.t.Fatalf("not %s after a rescan", what)
		}
		return
	}
	for !cond() {
		select {
		case <-h.d.scanned:
		case <-h.deadline:
			h.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func (h *harness) waitScans(n int) {
	h.t.Helper()
	if h.deadline == nil {
		synctest.Wait()
		if got := h.scans(); got < n {
			h.t.Fatalf("%d reads, want %d", got, n)
		}
		return
	}
	h.until("scanned", func() bool { return h.scans() >= n })
}

// settle waits for a read after the last write: counted from before the
// write, since on a busy machine the read the write caused may be over
// before settle is called.
func (h *harness) settle() {
	h.t.Helper()
	if h.deadline == nil {
		h.rescan()
		return
	}
	h.waitScans(h.written + 1)
}

func (h *harness) drainWatch() {
	select {
	case <-h.watch:
	default:
	}
}

func memberNames(s *store.Snapshot) []string {
	var out []string
	for n := range s.Members {
		out = append(out, n)
	}
	if out == nil {
		return []string{}
	}
	slices.Sort(out)
	return out
}

func TestDirectory_ListSortsByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{
			"team.yaml": profileDoc + "---\n" + memberDoc("gamma", "codex-fast") + "---\n" + memberDoc("alpha", "codex-fast"),
			"beta.yaml": memberDoc("beta", "codex-fast"),
		})
		h.start()
		names := func(kind string) []string {
			out := []string{}
			for _, o := range h.d.List(kind) {
				out = append(out, o.GetName())
			}
			return out
		}
		if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, names(v1alpha1.KindMember)); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"codex-fast"}, names(v1alpha1.KindProfile)); diff != "" {
			t.Errorf("profiles (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{}, names(v1alpha1.KindTenant)); diff != "" {
			t.Errorf("tenants (-want +got):\n%s", diff)
		}
	})
}

func TestDirectory_ReadsManifestFilesOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{
			"team.yaml":      profileDoc + "---\n" + memberDoc("alpha", "codex-fast") + "---\n" + memberDoc("beta", "codex-fast"),
			"gamma.yml":      memberDoc("gamma", "codex-fast"),
			".hidden.yaml":   memberDoc("hidden", "codex-fast"),
			"backup.yaml~":   memberDoc("backup", "codex-fast"),
			"notes.txt":      memberDoc("notes", "codex-fast"),
			"#autosave.yaml": memberDoc("autosave", "codex-fast"),
		})
		s := h.d.Snapshot()
		if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, memberNames(s)); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
		if _, ok := s.Profiles["codex-fast"]; !ok {
			t.Error("profile not read")
		}
		if got := s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "gamma"}]; got != filepath.Join(h.dir, "gamma.yml") {
			t.Errorf("source of gamma = %q", got)
		}
		m := s.Members["alpha"]
		if m.UID == "" || m.Generation != 1 || m.CreationTimestamp == nil {
			t.Errorf("metadata not stamped: uid %q generation %d created %v", m.UID, m.Generation, m.CreationTimestamp)
		}
		if len(s.Errors) != 0 || s.Unreadable != nil || !s.Synced {
			t.Errorf("errors %v unreadable %v synced %v", s.Errors, s.Unreadable, s.Synced)
		}
	})
}

func TestDirectory_FollowsEdits(t *testing.T) {
	h := newWatchedHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one"), "beta.yaml": memberDoc("beta", "one")})
	first := h.d.Snapshot().Members["alpha"]

	// An editor's save: write a temporary file, rename it over the original.
	tmp := filepath.Join(h.dir, ".alpha.yaml.swp")
	if err := os.WriteFile(tmp, []byte(memberDoc("alpha", "two")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, "alpha.yaml")); err != nil {
		t.Fatal(err)
	}
	h.until("alpha follows the edit", func() bool { return h.d.Snapshot().Members["alpha"].Spec.Profile == "two" })
	edited := h.d.Snapshot().Members["alpha"]
	if edited.UID != first.UID || edited.Generation != 2 {
		t.Errorf("after edit: uid %q (was %q), generation %d, want same uid and 2", edited.UID, first.UID, edited.Generation)
	}

	// A metadata-only change does not bump the generation.
	h.write("alpha.yaml", strings.Replace(memberDoc("alpha", "two"), "{name: alpha}", "{name: alpha, labels: {team: api}}", 1))
	h.until("label seen", func() bool { return h.d.Snapshot().Members["alpha"].Labels["team"] == "api" })
	if g := h.d.Snapshot().Members["alpha"].Generation; g != 2 {
		t.Errorf("label change bumped generation to %d", g)
	}

	// touch: an event, a read, but no change and no signal.
	h.drainWatch()
	before := h.d.Snapshot()
	now := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(h.dir, "beta.yaml"), now, now); err != nil {
		t.Fatal(err)
	}
	h.write("beta.yaml", memberDoc("beta", "one"))
	h.settle()
	if h.d.Snapshot() != before {
		t.Error("touch changed the snapshot")
	}
	select {
	case <-h.watch:
		t.Error("touch signalled watchers")
	default:
	}

	// mv out, then in again; rm.
	outside := filepath.Join(t.TempDir(), "beta.yaml")
	if err := os.Rename(filepath.Join(h.dir, "beta.yaml"), outside); err != nil {
		t.Fatal(err)
	}
	h.until("beta gone", func() bool { _, ok := h.d.Snapshot().Members["beta"]; return !ok })
	if err := os.Rename(outside, filepath.Join(h.dir, "beta.yaml")); err != nil {
		t.Fatal(err)
	}
	h.until("beta back", func() bool { _, ok := h.d.Snapshot().Members["beta"]; return ok })
	if err := os.Remove(filepath.Join(h.dir, "alpha.yaml")); err != nil {
		t.Fatal(err)
	}
	h.until("alpha removed", func() bool { _, ok := h.d.Snapshot().Members["alpha"]; return !ok })
	select {
	case <-h.watch:
	default:
		t.Error("changes did not signal watchers")
	}
}

func TestDirectory_BrokenFileKeepsLastGoodObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{"team.yaml": profileDoc + "---\n" + memberDoc("alpha", "codex-fast")})
		good := h.d.Snapshot()
		h.write("team.yaml", profileDoc+"---\n"+memberDoc("alpha", "codex-fast")+"  paused: [oops\n")
		h.until("error reported", func() bool { return len(h.d.Snapshot().Errors) > 0 })
		s := h.d.Snapshot()
		if s.Members["alpha"] != good.Members["alpha"] || s.Profiles["codex-fast"] != good.Profiles["codex-fast"] {
			t.Error("a broken file dropped or changed its last good objects")
		}
		e := s.ErrorsIn(filepath.Join(h.dir, "team.yaml"))
		if len(e) == 0 || e[0].Line == 0 {
			t.Fatalf("errors in team.yaml = %v, want a located error", e)
		}
		h.write("team.yaml", profileDoc+"---\n"+memberDoc("alpha", "codex-fast")+"  paused: true\n")
		h.until("error cleared", func() bool { return len(h.d.Snapshot().Errors) == 0 })
		if m := h.d.Snapshot().Members["alpha"]; !m.Spec.Paused || m.Generation != 2 {
			t.Errorf("fixed file not applied: paused %v generation %d", m.Spec.Paused, m.Generation)
		}
		// A new file that never parsed defines nothing but is reported.
		h.write("new.yaml", "kind: Member\nmetadata: {name: x}\nspec: {bogus: 1}\n")
		h.until("new file's error reported", func() bool { return len(h.d.Snapshot().Errors) > 0 })
		if _, ok := h.d.Snapshot().Members["x"]; ok {
			t.Error("invalid new file defined a member")
		}
	})
}

// A broken file keeps its last good objects, where they are written, and
// its error while files are added and removed around it in the same change
// — before it, after it, between — and every file keeps its own: each
// member comes from its file, and the reference it makes to a Profile that
// does not exist is placed on its own file's line (spec.profile, line 5).
func TestDirectory_BrokenFileKeepsItsObjectsAsFilesComeAndGo(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"b", "d", "f"} {
		write(name+".yaml", memberDoc(name, "missing"))
	}
	d, err := New(dir, &Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	good := d.Snapshot().Members["d"]
	write("d.yaml", memberDoc("d", "missing")+"  paused: [oops\n")
	d.rescan(t.Context())
	check := func(when string, want []string) {
		t.Helper()
		s := d.Snapshot()
		if diff := cmp.Diff(want, memberNames(s)); diff != "" {
			t.Errorf("%s: members (-want +got):\n%s", when, diff)
		}
		if s.Members["d"] != good {
			t.Errorf("%s: the broken file lost or changed its last good member", when)
		}
		if len(s.Errors) != 1 || s.Errors[0].File != filepath.Join(dir, "d.yaml") {
			t.Errorf("%s: errors = %v, want d.yaml's one", when, s.Errors)
		}
		var places []string
		for name := range s.Members {
			if src := s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: name}]; src != filepath.Join(dir, name+".yaml") {
				t.Errorf("%s: member %s comes from %s, want its own file", when, name, src)
			}
		}
		for _, e := range s.Unresolved {
			places = append(places, fmt.Sprintf("%s:%d", filepath.Base(e.File), e.Line))
		}
		var wantPlaces []string
		for _, name := range want {
			wantPlaces = append(wantPlaces, name+".yaml:5")
		}
		if diff := cmp.Diff(wantPlaces, places); diff != "" {
			t.Errorf("%s: unresolved references (-want +got):\n%s", when, diff)
		}
	}
	check("broken", []string{"b", "d", "f"})
	for _, name := range []string{"a", "c", "e", "g"} {
		write(name+".yaml", memberDoc(name, "missing"))
	}
	remove("b.yaml")
	remove("f.yaml")
	d.rescan(t.Context())
	check("files added and removed around it", []string{"a", "c", "d", "e", "g"})
	remove("a.yaml")
	remove("c.yaml")
	d.rescan(t.Context())
	check("every file before it removed", []string{"d", "e", "g"})
}

// TestDirectory_DuplicatesAreRejectedLikeTheDecoder: an object defined
// twice — in two files or twice in one — takes effect from neither
// definition when it was never good, and is reported as decode.Dir (and so
// fleetd validate) reports it: on the later definition, naming both lines.
func TestDirectory_DuplicatesAreRejectedLikeTheDecoder(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  string // the one error, with DIR for the directory
	}{
		{"two files", map[string]string{"a.yaml": memberDoc("alpha", "one"), "b.yaml": profileDoc + "---\n" + memberDoc("alpha", "two")},
			`DIR/b.yaml:10: metadata.name: duplicate Member "alpha"; already defined at DIR/a.yaml:3`},
		{"one file", map[string]string{"a.yaml": memberDoc("alpha", "one") + "---\n" + memberDoc("alpha", "two")},
			`DIR/a.yaml:9: metadata.name: duplicate Member "alpha"; already defined at DIR/a.yaml:3`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, tt.files)
				s := h.d.Snapshot()
				if _, ok := s.Members["alpha"]; ok {
					t.Errorf("a duplicated member took effect: %+v", s.Members["alpha"].Spec)
				}
				var got []string
				for _, e := range s.Errors {
					got = append(got, strings.ReplaceAll(e.Error(), h.dir, "DIR"))
				}
				if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestDirectory_DuplicateKeepsTheRunningDefinition: a second definition of
// a member that is in effect is rejected with the first one's new content
// too, whichever file sorts first; the object in effect stays, untouched,
// until one copy goes.
func TestDirectory_DuplicateKeepsTheRunningDefinition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{"b.yaml": profileDoc + "---\n" + memberDoc("alpha", "one")})
		running := h.d.Snapshot().Members["alpha"]
		b := filepath.Join(h.dir, "b.yaml")
		for _, step := range []struct {
			what, file, content string
		}{
			{"a copy in a later file", "c.yaml", memberDoc("alpha", "two")},
			{"a copy in an earlier file", "a.yaml", memberDoc("alpha", "three")},
			{"an edit of the running copy while duplicated", "b.yaml", profileDoc + "---\n" + memberDoc("alpha", "four")},
		} {
			h.write(step.file, step.content)
			h.settle()
			s := h.d.Snapshot()
			if s.Members["alpha"] != running || s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}] != b {
				t.Fatalf("%s: member alpha = %+v from %s, want the running object from %s", step.what,
					s.Members["alpha"], s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}], b)
			}
			if len(s.Errors) == 0 {
				t.Fatalf("%s: no duplicate reported", step.what)
			}
			for _, e := range s.Errors {
				if e.Line == 0 || !strings.Contains(e.Msg, "duplicate Member \"alpha\"; already defined at ") {
					t.Errorf("%s: error %v, want a located duplicate", step.what, e)
				}
			}
		}
		for _, f := range []string{"a.yaml", "c.yaml"} {
			if err := os.Remove(filepath.Join(h.dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		h.until("duplicates resolved", func() bool { return len(h.d.Snapshot().Errors) == 0 })
		got := h.d.Snapshot().Members["alpha"]
		if got.Spec.Profile != "four" || got.UID != running.UID || got.Generation != running.Generation+1 {
			t.Errorf("after the copies went: profile %q uid %q generation %d; want four, %q, %d",
				got.Spec.Profile, got.UID, got.Generation, running.UID, running.Generation+1)
		}
	})
}

// TestDirectory_DuplicateAfterRestartKeepsTheRecordedCopy: a fleetd that
// starts with a member defined twice keeps the copy whose spec its state
// directory recorded last, so a restart does not take the member away.
func TestDirectory_DuplicateAfterRestartKeepsTheRecordedCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{"b.yaml": memberDoc("alpha", "one")})
		was := h.d.Snapshot().Members["alpha"]
		h.write("a.yaml", memberDoc("alpha", "two"))
		h.until("duplicate reported", func() bool { return len(h.d.Snapshot().Errors) > 0 })
		d2, err := New(h.dir, &Options{StateDir: h.state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s := d2.Snapshot()
		got := s.Members["alpha"]
		if got == nil || got.Spec.Profile != "one" || got.UID != was.UID || s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}] != filepath.Join(h.dir, "b.yaml") {
			t.Errorf("after restart alpha = %+v from %s; want b.yaml's copy with uid %q", got, s.Sources[store.Key{Kind: v1alpha1.KindMember, Name: "alpha"}], was.UID)
		}
		if len(s.Errors) != 1 {
			t.Errorf("errors = %v, want the duplicate", s.Errors)
		}
	})
}

// TestDirectory_UnresolvedReferencesAtTheirLines: a Member whose profile or
// tenant is missing stays in the snapshot (it waits at Ready=False) and is
// reported with fleetd validate's error, at the reference's line, until the
// object appears.
func TestDirectory_UnresolvedReferencesAtTheirLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{
			"alpha.yaml": memberDoc("alpha", "codex-fast"),
			"beta.yaml":  memberDoc("beta", "codex-fast") + "  mcpTarget:\n    kind: tenant\n    tenantId: acme\n",
		})
		want := []string{
			`DIR/alpha.yaml:5: spec.profile: no Profile "codex-fast" in DIR; add one, or fix the name`,
			`DIR/beta.yaml:5: spec.profile: no Profile "codex-fast" in DIR; add one, or fix the name`,
			`DIR/beta.yaml:8: spec.mcpTarget.tenantId: no Tenant "acme" in DIR; add one, or fix the name`,
		}
		got := func() []string {
			var out []string
			for _, e := range h.d.Snapshot().Unresolved {
				out = append(out, strings.ReplaceAll(e.Error(), h.dir, "DIR"))
			}
			return out
		}
		if diff := cmp.Diff(want, got()); diff != "" {
			t.Errorf("unresolved (-want +got):\n%s", diff)
		}
		if s := h.d.Snapshot(); len(s.Members) != 2 || len(s.Errors) != 0 {
			t.Errorf("members %v errors %v; want both members and no manifest errors", memberNames(s), s.Errors)
		}
		h.write("profile.yaml", profileDoc)
		h.until("profile seen", func() bool { return len(h.d.Snapshot().Unresolved) == 1 })
		if diff := cmp.Diff(want[2:], got()); diff != "" {
			t.Errorf("unresolved once the Profile exists (-want +got):\n%s", diff)
		}
	})
}

// TestDirectory_SharedWorktreeBranchIsUnresolved: two Members on one
// branch of one repository both stay in the snapshot and the later one is
// reported, as fleetd validate reports it, until one of them moves.
func TestDirectory_SharedWorktreeBranchIsUnresolved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		worktree := func(branch string) string { return "  worktree: {repo: /srv/api, branch: " + branch + "}\n" }
		h := newHarness(t, map[string]string{
			"profile.yaml": profileDoc,
			"alpha.yaml":   memberDoc("alpha", "codex-fast") + worktree("shared"),
			"beta.yaml":    memberDoc("beta", "codex-fast") + worktree("shared"),
		})
		s := h.d.Snapshot()
		if len(s.Unresolved) != 1 || len(s.Members) != 2 ||
			strings.ReplaceAll(s.Unresolved[0].Error(), h.dir, "DIR") != `DIR/beta.yaml:6: spec.worktree.branch: branch "shared" of repository /srv/api is claimed by member "alpha" too (DIR/alpha.yaml:6); two members never share a worktree: give each a branch of its own` {
			t.Errorf("members %v, unresolved %v", memberNames(s), s.Unresolved)
		}
		h.write("beta.yaml", memberDoc("beta", "codex-fast")+worktree("own"))
		h.until("the claim ends", func() bool { return len(h.d.Snapshot().Unresolved) == 0 })
	})
}

func TestDirectory_VanishedDirectoryPrunesNothing(t *testing.T) {
	h := newWatchedHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one")})
	before := h.d.Snapshot()
	away := h.dir + ".away"
	if err := os.Rename(h.dir, away); err != nil {
		t.Fatal(err)
	}
	h.until("directory error reported", func() bool { return h.d.Snapshot().Unreadable != nil })
	if s := h.d.Snapshot(); s.Members["alpha"] != before.Members["alpha"] {
		t.Error("member pruned while the directory was away")
	}
	if err := os.Rename(away, h.dir); err != nil {
		t.Fatal(err)
	}
	h.until("directory readable again", func() bool { return h.d.Snapshot().Unreadable == nil })
	if s := h.d.Snapshot(); s.Members["alpha"] != before.Members["alpha"] {
		t.Error("member churned after the directory came back")
	}
	// Watching resumed on the returned directory.
	h.write("beta.yaml", memberDoc("beta", "one"))
	h.until("beta seen", func() bool { _, ok := h.d.Snapshot().Members["beta"]; return ok })
}

func TestDirectory_MetadataSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one")})
		h.write("alpha.yaml", memberDoc("alpha", "two"))
		h.until("edit seen", func() bool { return h.d.Snapshot().Members["alpha"].Generation == 2 })
		was := h.d.Snapshot().Members["alpha"]
		d2, err := New(h.dir, &Options{StateDir: h.state, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		got := d2.Snapshot().Members["alpha"]
		if got.UID != was.UID || got.Generation != 2 || !got.CreationTimestamp.Equal(*was.CreationTimestamp) {
			t.Errorf("after restart uid %q gen %d created %v; want %q 2 %v", got.UID, got.Generation, got.CreationTimestamp, was.UID, was.CreationTimestamp)
		}
	})
}

func TestDirectory_ApplyAndDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := "# keep this comment\n" + profileDoc
		h := newHarness(t, map[string]string{"team.yaml": other + "---\n" + memberDoc("alpha", "one")})
		ctx := context.Background()

		// New member: its own file, visible on return.
		m := &v1alpha1.Member{TypeMeta: v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
			ObjectMeta: v1alpha1.ObjectMeta{Name: "beta", UID: "ignored", Generation: 9},
			Spec:       v1alpha1.MemberSpec{Profile: "codex-fast"},
			Status:     v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady}}
		m.SetDefaults()
		if err := h.d.Apply(ctx, m); err != nil {
			t.Fatal(err)
		}
		got := h.d.Snapshot().Members["beta"]
		if got == nil || got.UID == "ignored" || got.Generation != 1 {
			t.Fatalf("applied member: %+v", got)
		}
		data, _ := os.ReadFile(filepath.Join(h.dir, "beta.yaml"))
		if strings.Contains(string(data), "status") || strings.Contains(string(data), "uid") {
			t.Errorf("written file carries fleetd-owned fields:\n%s", data)
		}

		// Existing member in a multi-document file: only its document changes.
		alpha := h.d.Snapshot().Members["alpha"].DeepCopy()
		alpha.Spec.Paused = true
		if err := h.d.Apply(ctx, alpha); err != nil {
			t.Fatal(err)
		}
		data, _ = os.ReadFile(filepath.Join(h.dir, "team.yaml"))
		if !strings.HasPrefix(string(data), other+"---\n") {
			t.Errorf("other document not kept byte for byte:\n%s", data)
		}
		if a := h.d.Snapshot().Members["alpha"]; !a.Spec.Paused || a.Generation != 2 {
			t.Errorf("alpha after apply: paused %v generation %d", a.Spec.Paused, a.Generation)
		}

		// An invalid object never reaches the directory.
		bad := m.DeepCopy()
		bad.Name = "Bad Name"
		if err := h.d.Apply(ctx, bad); err == nil {
			t.Error("invalid member applied")
		}

		// Delete a document from a multi-document file, then a whole file.
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "alpha"); err != nil {
			t.Fatal(err)
		}
		data, _ = os.ReadFile(filepath.Join(h.dir, "team.yaml"))
		if string(data) != other {
			t.Errorf("team.yaml after delete:\n%s", data)
		}
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "beta"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.dir, "beta.yaml")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("beta.yaml still there: %v", err)
		}
		if diff := cmp.Diff([]string{}, memberNames(h.d.Snapshot())); diff != "" {
			t.Errorf("members left (-want +got):\n%s", diff)
		}
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "beta"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleting a missing member: %v, want store.ErrNotFound", err)
		}
		if _, ok := h.d.Get(v1alpha1.KindProfile, "codex-fast"); !ok {
			t.Error("profile lost")
		}
	})
}

// A burst of changes is read once, after a debounce without changes: files
// removed one by one, each within a debounce of the last, are one change
// (the prune hold judges them together) however long the burst lasts — up
// to ten debounces, after which a writer that never stops is read anyway.
func TestDirectory_ReadsABurstOnceItIsQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, map[string]string{"alpha.yaml": memberDoc("alpha", "one")})
		n := h.scans()
		for range 5 { // 0, 0.6 s, …, 2.4 s
			h.nudge <- struct{}{}
			time.Sleep(debounce * 6 / 10)
			synctest.Wait()
		}
		if got := h.scans(); got != n {
			t.Fatalf("%d reads during a burst of changes 0.6 debounces apart, want none yet", got-n)
		}
		time.Sleep(debounce*4/10 - time.Nanosecond) // a debounce after the last change
		synctest.Wait()
		if got := h.scans(); got != n {
			t.Fatalf("%d reads before a debounce passed without changes, want none", got-n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := h.scans(); got != n+1 {
			t.Fatalf("%d reads once the burst was quiet, want 1", got-n)
		}

		n = h.scans()
		start := time.Now()
		for h.scans() == n {
			if time.Since(start) > maxBurst*debounce {
				t.Fatalf("no read after %v of changes every half debounce; want one within %d debounces", time.Since(start), maxBurst)
			}
			h.nudge <- struct{}{}
			time.Sleep(debounce / 2)
			synctest.Wait()
		}
		if got := time.Since(start); got < maxBurst*debounce {
			t.Errorf("read %v into a burst that had not been quiet; want it at %d debounces", got, maxBurst)
		}
	})
}

// With Rescan the directory is read on a nudge (after the debounce) and,
// while it is unreadable, every RetryInterval — never by fsnotify, so it
// runs inside a synctest bubble on virtual time.
func TestDirectory_RescanOnNudgeInsteadOfWatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		dir := filepath.Join(root, "manifests")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write := func(name, content string) {
			t.Helper()
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("alpha.yaml", memberDoc("alpha", "one"))
		nudge := make(chan struct{}, 1)
		d, err := New(dir, &Options{Rescan: nudge, Debounce: time.Second, RetryInterval: time.Minute,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		members := func() []string { return memberNames(d.Snapshot()) }
		synctest.Wait() // Run's own first read is done

		write("beta.yaml", memberDoc("beta", "one"))
		time.Sleep(time.Hour)
		synctest.Wait()
		if diff := cmp.Diff([]string{"alpha"}, members()); diff != "" {
			t.Fatalf("a write was seen without a nudge (-want +got):\n%s", diff)
		}
		nudge <- struct{}{}
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if diff := cmp.Diff([]string{"alpha"}, members()); diff != "" {
			t.Fatalf("read before the debounce was over (-want +got):\n%s", diff)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if diff := cmp.Diff([]string{"alpha", "beta"}, members()); diff != "" {
			t.Fatalf("after a nudge and the debounce (-want +got):\n%s", diff)
		}

		away := dir + ".away"
		if err := os.Rename(dir, away); err != nil {
			t.Fatal(err)
		}
		nudge <- struct{}{}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := d.Snapshot(); s.Unreadable == nil || len(s.Members) != 2 {
			t.Fatalf("directory away: Unreadable %v, %d members; want the error and nothing pruned", s.Unreadable, len(s.Members))
		}
		if err := os.Rename(away, dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // the retry needs no nudge
		synctest.Wait()
		if s := d.Snapshot(); s.Unreadable != nil {
			t.Errorf("directory back for a RetryInterval: Unreadable %v", s.Unreadable)
		}
	})
}

// TestDirectory_ApplyEditsInPlace: an applied object already defined in a
// file is edited in place — only what changes, comments and order kept, a
// duration spelled as written — an equal one leaves the file alone, and a
// document yamledit cannot edit (a flow-style root) is written anew without
// defaults.
func TestDirectory_ApplyEditsInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		profile := "# the fast one\nkind: Profile\napiVersion: fleetd.dev/v1alpha1\nmetadata:\n  name: codex-fast\nspec:\n  harness: codex   # which agent\n  startupTimeout: 60s\n"
		flow := "{apiVersion: fleetd.dev/v1alpha1, kind: Member, metadata: {name: alpha}, spec: {profile: codex-fast}}\n"
		h := newHarness(t, map[string]string{"profile.yaml": profile, "alpha.yaml": flow})
		ctx := context.Background()
		read := func(name string) string {
			data, err := os.ReadFile(filepath.Join(h.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}

		p := h.d.Snapshot().Profiles["codex-fast"].DeepCopy()
		if err := h.d.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got := read("profile.yaml"); got != profile {
			t.Errorf("an equal apply changed the file:\n%s", got)
		}
		p.Spec.Resume = v1alpha1.ResumeNever
		if err := h.d.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(profile+"  resume: Never\n", read("profile.yaml")); diff != "" {
			t.Errorf("profile.yaml (-want +got):\n%s", diff)
		}

		a := h.d.Snapshot().Members["alpha"].DeepCopy()
		a.Spec.Workspace = "api"
		if err := h.d.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
		// What did not change keeps its spelling, the flow-style metadata too.
		want := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: alpha}\nspec:\n  profile: codex-fast\n  workspace: api\n"
		if diff := cmp.Diff(want, read("alpha.yaml")); diff != "" {
			t.Errorf("alpha.yaml (-want +got):\n%s", diff)
		}
	})
}

// A file keeps no versions: a metadata.resourceVersion written in a
// manifest (as `fleetd get -o yaml` of an etcd-backed fleetd shows it) or
// passed to Apply is accepted, never shown and never written.
func TestDirectory_IgnoresResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		doc := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: alpha, resourceVersion: \"41\"}\nspec:\n  profile: codex-fast\n"
		h := newHarness(t, map[string]string{"alpha.yaml": doc, "profile.yaml": profileDoc})
		a := h.d.Snapshot().Members["alpha"]
		if a == nil || a.ResourceVersion != "" {
			t.Fatalf("alpha read from a file with a resourceVersion: %+v, want it with none", a)
		}
		if err := h.d.Apply(context.Background(), &v1alpha1.Member{
			ObjectMeta: v1alpha1.ObjectMeta{Name: "beta", ResourceVersion: "7"},
			Spec:       v1alpha1.MemberSpec{Profile: "codex-fast"}}); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(h.dir, "beta.yaml"))
		if strings.Contains(string(data), "resourceVersion") {
			t.Errorf("written file carries a resourceVersion:\n%s", data)
		}
		if b := h.d.Snapshot().Members["beta"]; b == nil || b.ResourceVersion != "" {
			t.Errorf("beta after apply: %+v", b)
		}
	})
}

// TestDirectory_ProfilesAndTenantsAreWrittenAsMembersAre: a new Profile
// goes to DIR/profile-NAME.yaml and a new Tenant to DIR/tenant-NAME.yaml,
// written without defaults; an existing one is edited in place in the
// operator's file, its comments kept; and a Profile or Tenant a Member
// references is not deleted until that Member is gone.
func TestDirectory_ProfilesAndTenantsAreWrittenAsMembersAre(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tenant := "# the acme gateway\napiVersion: fleetd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: acme}\nspec:\n  url: https://fleet.acme.example/mcp   # public\n  credentialEnv: ACME_TOKEN\n"
		triage := "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: triage}\nspec:\n  profile: claude\n  mcpTarget: {kind: tenant, tenantId: acme}\n"
		h := newHarness(t, map[string]string{"acme.yaml": tenant})
		ctx := context.Background()
		read := func(name string) string {
			t.Helper()
			data, err := os.ReadFile(filepath.Join(h.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}

		p := &v1alpha1.Profile{ObjectMeta: v1alpha1.ObjectMeta{Name: "claude"}, Spec: v1alpha1.ProfileSpec{Harness: "claude", Args: []string{"--model", "sonnet"}}}
		p.SetDefaults()
		if err := h.d.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
		want := "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: claude\nspec:\n  harness: claude\n  args:\n    - --model\n    - sonnet\n"
		if diff := cmp.Diff(want, read("profile-claude.yaml")); diff != "" {
			t.Errorf("a new Profile's file (-want +got):\n%s", diff)
		}
		n := &v1alpha1.Tenant{ObjectMeta: v1alpha1.ObjectMeta{Name: "beta"}, Spec: v1alpha1.TenantSpec{URL: "https://beta.example/mcp", CredentialEnv: "BETA_TOKEN"}}
		if err := h.d.Apply(ctx, n); err != nil {
			t.Fatal(err)
		}
		if got := read("tenant-beta.yaml"); !strings.Contains(got, "kind: Tenant\n") || !strings.Contains(got, "credentialEnv: BETA_TOKEN\n") {
			t.Errorf("a new Tenant's file:\n%s", got)
		}

		acme := h.d.Snapshot().Tenants["acme"].DeepCopy()
		acme.Spec.CredentialEnv = "ACME_FLEETD_TOKEN"
		if err := h.d.Apply(ctx, acme); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(strings.Replace(tenant, "ACME_TOKEN", "ACME_FLEETD_TOKEN", 1), read("acme.yaml")); diff != "" {
			t.Errorf("an edited Tenant's file (-want +got):\n%s", diff)
		}

		h.write("triage.yaml", triage)
		h.settle()
		for _, key := range []store.Key{{Kind: v1alpha1.KindProfile, Name: "claude"}, {Kind: v1alpha1.KindTenant, Name: "acme"}} {
			err := h.d.Delete(ctx, key.Kind, key.Name)
			if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "member/triage (") {
				t.Errorf("delete %s while triage references it: %v, want ErrInUse naming member/triage", key, err)
			}
			if _, ok := h.d.Get(key.Kind, key.Name); !ok {
				t.Errorf("%s is gone after a refused delete", key)
			}
		}
		if err := h.d.Delete(ctx, v1alpha1.KindMember, "triage"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			key  store.Key
			file string
		}{{store.Key{Kind: v1alpha1.KindProfile, Name: "claude"}, "profile-claude.yaml"}, {store.Key{Kind: v1alpha1.KindTenant, Name: "acme"}, "acme.yaml"}} {
			if err := h.d.Delete(ctx, tc.key.Kind, tc.key.Name); err != nil {
				t.Errorf("delete %s once nothing references it: %v", tc.key, err)
			}
			if _, err := os.Stat(filepath.Join(h.dir, tc.file)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after its one object was deleted: %v", tc.file, err)
			}
		}
	})
}

// TestDirectory_UnchangedRescanBuildsNothing: reading a directory whose
// files are as last read (Run's first read, right after New's) only reads
// and hashes the files; it builds no snapshot, which for a large fleet is
// megabytes of garbage at the moment the fleet starts converging.
func TestDirectory_UnchangedRescanBuildsNothing(t *testing.T) {
	dir := t.TempDir()
	const n = 200
	for i := range n {
		name := fmt.Sprintf("m%03d", i)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(memberDoc(name, "one")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := New(dir, &Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	before := d.Snapshot()
	allocs := testing.AllocsPerRun(5, func() { d.rescan(t.Context()) })
	if got := d.Snapshot(); got != before {
		t.Errorf("an unchanged directory published a new snapshot")
	}
	t.Logf("%.0f allocations per rescan of %d files", allocs, n)
	// Reading a file takes a handful of allocations; building the
	// snapshot takes dozens per member.
	if perFile := allocs / n; perFile > 25 {
		t.Errorf("rescan of an unchanged directory: %.1f allocations per file, want at most 25: it rebuilt the snapshot", perFile)
	}
}
