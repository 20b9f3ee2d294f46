package statedb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/internal/statedir"
)

const (
	sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// legacyState writes the files an older fleetd kept in state, as it wrote
// them (indented, a newline at the end), with what such a directory also
// holds: a spare and a temporary file of an interrupted write.
func legacyState(t *testing.T, state statedir.Layout) {
	t.Helper()
	files := map[string]string{
		state.LegacyTokens(): `{
  "version": 1,
  "tokens": [
    {"sha256": "` + sumA + `", "member": "alpha", "memberUid": "u-a", "paneId": "w1:p1", "terminalId": "term_1"},
    {"sha256": "` + sumB + `", "member": "beta", "memberUid": "u-b"}
  ]
}
`,
		filepath.Join(state.LegacyOwnedDir(), "alpha.json"):         "{\n  \"member\": \"alpha\",\n  \"paneId\": \"w1:p1\"\n}\n",
		filepath.Join(state.LegacyOwnedDir(), ".spare-X1"):          "{\"member\": \"stale\"}\n",
		filepath.Join(state.LegacyOwnedDir(), ".alpha.json.tmp-12"): "{\"member\": \"torn",
		filepath.Join(state.LegacyMemoryDir(), "alpha.json"):        "{\n  \"uid\": \"u-a\",\n  \"session\": {\"id\": \"s-1\"}\n}\n",
		state.LegacyPrompts(): `{"u-a": {"turn": "t-1", "prompt": "d1"}, "u-old": "t-0"}` + "\n",
		filepath.Join(state.LegacyRevisionsDir(), "profile.codex.json"):       `{"revisions":[{"number":1}]}` + "\n",
		filepath.Join(state.LegacyRevisionsDir(), "member.alpha.json"):        `{"revisions":[{"number":2}]}` + "\n",
		filepath.Join(state.LegacyRevisionsDir(), ".member.alpha.json.tmp-7"): `{"revis`,
		filepath.Join(state.LegacyRevisionsDir(), "tenant.acme.json"):         `{}`,
	}
	for path, content := range files {
		must(t, os.MkdirAll(filepath.Dir(path), statedir.DirMode))
		must(t, os.WriteFile(path, []byte(content), statedir.FileMode))
	}
}

// The legacy records, as the files hold them (the database holds them
// compacted).
var migrated = map[string]map[string]string{
	Tokens: {
		sumA: `{"sha256": "` + sumA + `", "member": "alpha", "memberUid": "u-a", "paneId": "w1:p1", "terminalId": "term_1"}`,
		sumB: `{"sha256": "` + sumB + `", "member": "beta", "memberUid": "u-b"}`,
	},
	Owned:   {"alpha": "{\n  \"member\": \"alpha\",\n  \"paneId\": \"w1:p1\"\n}\n"},
	Memory:  {"alpha": "{\n  \"uid\": \"u-a\",\n  \"session\": {\"id\": \"s-1\"}\n}\n"},
	Prompts: {"u-a": `{"turn": "t-1", "prompt": "d1"}`, "u-old": `"t-0"`},
	Revisions: {
		"profile/codex": `{"revisions":[{"number":1}]}` + "\n",
		"member/alpha":  `{"revisions":[{"number":2}]}` + "\n",
	},
}

// compacted is want with every value compacted, as the database holds it.
func compacted(t *testing.T, want map[string]map[string]string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for tb, kv := range want {
		out[tb] = map[string]string{}
		for k, v := range kv {
			rec, err := encode(Put(tb, k, []byte(v)))
			must(t, err)
			c, err := decode(rec)
			must(t, err)
			out[tb][k] = string(c.Value)
		}
	}
	return out
}

// The first start moves every legacy record into the database and removes
// the legacy files; the next start reads the database alone.
func TestOpenDir_MigratesTheLegacyFilesOnce(t *testing.T) {
	t.Parallel()
	state := statedir.At(t.TempDir())
	legacyState(t, state)
	db, err := OpenDir(state, nil)
	must(t, err)
	if diff := cmp.Diff(compacted(t, migrated), contents(t, db, Tokens, Owned, Memory, Prompts, Revisions)); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
	for _, p := range []string{state.LegacyTokens(), state.LegacyOwnedDir(), state.LegacyMemoryDir(), state.LegacyPrompts(), state.LegacyRevisionsDir()} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after the migration (%v)", p, err)
		}
	}
	must(t, db.Close())
	again, err := OpenDir(state, nil)
	must(t, err)
	defer again.Close()
	if diff := cmp.Diff(compacted(t, migrated), contents(t, again, Tokens, Owned, Memory, Prompts, Revisions)); diff != "" {
		t.Errorf("tables at the next start (-want +got):\n%s", diff)
	}
}

// A crash after the migrated records were committed and before every
// legacy file was removed migrates the files left again: the same records,
// nothing lost or doubled, and later changes to other keys kept.
func TestOpenDir_AMigrationCutShortIsDoneAgain(t *testing.T) {
	t.Parallel()
	state := statedir.At(t.TempDir())
	legacyState(t, state)
	db, err := OpenDir(state, nil)
	must(t, err)
	must(t, db.Write(Put(Owned, "gamma", []byte(`{"member":"gamma"}`))))
	must(t, db.Close())
	legacyState(t, state) // as if the removal had not happened
	must(t, os.RemoveAll(state.LegacyMemoryDir()))
	must(t, os.Remove(state.LegacyPrompts()))
	db, err = OpenDir(state, nil)
	must(t, err)
	defer db.Close()
	want := compacted(t, migrated)
	want[Owned]["gamma"] = `{"member":"gamma"}`
	if diff := cmp.Diff(want, contents(t, db, Tokens, Owned, Memory, Prompts, Revisions)); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

// A legacy file fleetd cannot read stops the start with an error naming it
// and what to do — a FIFO too, without waiting for a writer — and nothing
// is migrated or removed.
func TestOpenDir_RefusesAnUnreadableLegacyFile(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		plant func(state statedir.Layout) string
		says  string
	}{
		"a corrupt ownership record": {func(s statedir.Layout) string {
			p := filepath.Join(s.LegacyOwnedDir(), "beta.json")
			must(t, os.WriteFile(p, []byte("{not json"), statedir.FileMode))
			return p
		}, "move it away"},
		"a FIFO at an ownership record": {func(s statedir.Layout) string {
			p := filepath.Join(s.LegacyOwnedDir(), "beta.json")
			must(t, syscall.Mkfifo(p, 0o600))
			return p
		}, "FIFO"},
		"a FIFO instead of the members directory": {func(s statedir.Layout) string {
			must(t, os.RemoveAll(s.LegacyMemoryDir()))
			must(t, syscall.Mkfifo(s.LegacyMemoryDir(), 0o600))
			return s.LegacyMemoryDir()
		}, "not a directory"},
		"a corrupt revision history": {func(s statedir.Layout) string {
			p := filepath.Join(s.LegacyRevisionsDir(), "member.beta.json")
			must(t, os.WriteFile(p, []byte(`{"revisions": [`), statedir.FileMode))
			return p
		}, "move it away"},
		"tokens.json of another version": {func(s statedir.Layout) string {
			must(t, os.WriteFile(s.LegacyTokens(), []byte(`{"version": 2, "tokens": []}`), statedir.FileMode))
			return s.LegacyTokens()
		}, "version 2"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			state := statedir.At(t.TempDir())
			legacyState(t, state)
			path := tc.plant(state)
			db, err := OpenDir(state, nil)
			if err == nil {
				db.Close()
				t.Fatal("OpenDir = nil, want the legacy file refused")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not name %s and say %q", err, path, tc.says)
			}
			if _, err := os.Lstat(state.LegacyTokens()); err != nil {
				t.Errorf("legacy files removed after a failed migration: %v", err)
			}
			db, err = Open(state.StateDB(), nil)
			must(t, err)
			defer db.Close()
			if got := contents(t, db, Tokens, Owned, Memory, Prompts, Revisions); len(got) != 0 {
				t.Errorf("a failed migration left records: %v", got)
			}
		})
	}
}
