package statedb

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetd-dev/fleetd/internal/atomicfile"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// OpenDir opens the state database of the state directory state
// ([Open] on its Layout.StateDB) and migrates into it, once, the records
// fleetd kept one file each before the database existed (statedir's
// Legacy names): every worker token of tokens.json, every ownership
// record of owned/, every member's memory of members/, every delivered
// prompt of prompts-delivered.json and every revision history of
// revisions/, in one batch; once that batch is durable, the files are
// removed. A crash in between leaves files whose records are in the
// database already: the next start migrates them again, to the same
// records. A legacy file fleetd cannot read is an error that names it and
// what to do, as it was before the migration, and nothing is migrated.
// The caller holds the state directory's lock.
func OpenDir(state statedir.Layout, opts *Options) (*DB, error) {
	db, err := Open(state.StateDB(), opts)
	if err != nil {
		return nil, err
	}
	if err := migrate(db, state); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate to the state database %s: %w", state.StateDB(), err)
	}
	return db, nil
}

// legacy is one kind of legacy file: where it is and how its records
// become changes (none when it does not exist).
type legacy struct {
	path    func(statedir.Layout) string
	records func(path string) ([]Change, error)
}

var legacies = []legacy{
	{statedir.Layout.LegacyTokens, legacyTokens},
	{statedir.Layout.LegacyOwnedDir, legacyOwned},
	{statedir.Layout.LegacyMemoryDir, legacyMemory},
	{statedir.Layout.LegacyPrompts, legacyPrompts},
	{statedir.Layout.LegacyRevisionsDir, legacyRevisions},
}

// migrate moves the legacy files' records into db, then removes the files.
func migrate(db *DB, state statedir.Layout) error {
	var (
		changes []Change
		found   []string // legacy files and directories, to remove
	)
	for _, l := range legacies {
		path := l.path(state)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		c, err := l.records(path)
		if err != nil {
			return err
		}
		changes = append(changes, c...)
		found = append(found, path)
	}
	if len(found) == 0 {
		return nil
	}
	if len(changes) > 0 {
		if err := db.Write(changes...); err != nil {
			return err
		}
	}
	for _, p := range found {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove %s (its records are in the database): %w", p, err)
		}
	}
	return atomicfile.SyncDir(state.Root())
}

// legacyTokens reads tokens.json: {"version": 1, "tokens": [{"sha256": …}, …]}.
func legacyTokens(path string) ([]Change, error) {
	data, err := statedir.ReadFile(path, statedir.MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("token registry: %w", err)
	}
	var f struct {
		Version int               `json:"version"`
		Tokens  []json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("token registry %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("token registry %s: version %d; want 1", path, f.Version)
	}
	changes := make([]Change, 0, len(f.Tokens))
	for i, raw := range f.Tokens {
		var e struct {
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("token registry %s: tokens[%d]: %w", path, i, err)
		}
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != 32 {
			return nil, fmt.Errorf("token registry %s: tokens[%d]: %q is not a SHA-256 hex digest", path, i, e.SHA256)
		}
		changes = append(changes, Put(Tokens, e.SHA256, raw))
	}
	return changes, nil
}

// legacyOwned reads owned/: a record per member, named by its "member".
func legacyOwned(dir string) ([]Change, error) {
	return legacyDir(dir, Owned, "ownership records", statedir.MaxRecordBytes, func(name string, data []byte) (string, error) {
		var r struct {
			Member string `json:"member"`
		}
		if err := json.Unmarshal(data, &r); err != nil || r.Member == "" {
			return "", fmt.Errorf("ownership record %s is corrupt (%v); move it away to let fleetd start",
				filepath.Join(dir, name), err)
		}
		return r.Member, nil
	})
}

// legacyMemory reads members/: a member's memory per NAME.json.
func legacyMemory(dir string) ([]Change, error) {
	return legacyDir(dir, Memory, "member memory", statedir.MaxIndexBytes, func(name string, data []byte) (string, error) {
		if !json.Valid(data) {
			return "", fmt.Errorf("member memory %s is corrupt; move it away to let fleetd start (the member's agent then starts afresh)",
				filepath.Join(dir, name))
		}
		return strings.TrimSuffix(name, ".json"), nil
	})
}

// legacyDir reads the records of a legacy per-member directory (what names
// them in errors) as changes of table; key names each record's key from its
// file name and content ("" for a file that holds none). Temporary files of
// interrupted writes and spares are skipped. Only a directory is listed (a
// FIFO there would block).
func legacyDir(dir, table, what string, max int64, key func(name string, data []byte) (string, error)) ([]Change, error) {
	if fi, err := os.Lstat(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %s is not a directory: fleetd only reads what it wrote there itself; remove it and start fleetd again", what, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var changes []Change
	for _, e := range entries {
		if e.IsDir() || !statedir.IsLegacyRecord(e.Name()) {
			continue
		}
		data, err := statedir.ReadFile(filepath.Join(dir, e.Name()), max)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		k, err := key(e.Name(), data)
		if err != nil {
			return nil, err
		}
		if k == "" {
			continue // not a record of this kind: nothing to keep
		}
		changes = append(changes, Put(table, k, data))
	}
	return changes, nil
}

// legacyPrompts reads prompts-delivered.json: member uid → delivery.
func legacyPrompts(path string) ([]Change, error) {
	data, err := statedir.ReadFile(path, statedir.MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("delivered prompts: %w", err)
	}
	var done map[string]json.RawMessage
	if err := json.Unmarshal(data, &done); err != nil {
		return nil, fmt.Errorf("delivered prompts %s: %w", path, err)
	}
	changes := make([]Change, 0, len(done))
	for uid, d := range done {
		if uid == "" {
			continue
		}
		changes = append(changes, Put(Prompts, uid, d))
	}
	return changes, nil
}

// legacyRevisions reads revisions/: an object's history per
// KIND.NAME.json, KIND profile or member, as key KIND/NAME. Another file
// there was never read, and is not kept.
func legacyRevisions(dir string) ([]Change, error) {
	return legacyDir(dir, Revisions, "revisions", statedir.MaxIndexBytes, func(name string, data []byte) (string, error) {
		kind, obj, ok := strings.Cut(strings.TrimSuffix(name, ".json"), ".")
		if !ok || (kind != "profile" && kind != "member") || obj == "" || strings.ContainsAny(obj, "/.") {
			return "", nil
		}
		if !json.Valid(data) {
			return "", fmt.Errorf("revision history %s is corrupt; move it away to let fleetd start (the object's earlier revisions are then forgotten)",
				filepath.Join(dir, name))
		}
		return kind + "/" + obj, nil
	})
}
