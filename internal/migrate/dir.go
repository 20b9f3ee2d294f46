package migrate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/atomicfile"
)

// Options tune [Dir]. A nil *Options means the defaults: rewrite files.
type Options struct {
	// DryRun reports the changes without writing anything.
	DryRun bool
}

// Dir migrates every manifest file [decode.ManifestPaths] lists in dir (the
// files fleetd reads, read by [decode.ReadManifest]; no recursion) and
// returns the changes, in file and line order. A name fleetd would refuse
// to read (a directory, a named pipe, a file over the default limit) is a
// problem here too.
//
// When any file cannot be migrated, Dir writes nothing and returns the
// problems as a [decode.ErrorList]. Otherwise, unless opts.DryRun is set, it
// replaces each changed file atomically, keeping its mode. An error while
// writing stops at that file; the returned changes then cover only the
// files already written.
func Dir(dir string, opts *Options) ([]Change, error) {
	if opts == nil {
		opts = &Options{}
	}
	paths, err := decode.ManifestPaths(dir)
	if err != nil {
		return nil, err
	}
	type rewrite struct {
		path    string
		data    []byte
		changes []Change
	}
	var (
		todo []rewrite
		errs decode.ErrorList
	)
	for _, path := range paths {
		data, err := decode.ReadManifest(path, 0) // the files and limit fleetd reads
		if err != nil {
			errs = append(errs, decode.AsError(path, err))
			continue
		}
		out, changes, ferrs := File(path, data)
		errs = append(errs, ferrs...)
		if len(changes) > 0 {
			todo = append(todo, rewrite{path, out, changes})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	var done []Change
	for _, r := range todo {
		if !opts.DryRun {
			if err := writeAtomic(r.path, r.data); err != nil {
				return done, err
			}
		}
		done = append(done, r.changes...)
	}
	return done, nil
}

// writeAtomic replaces the file at path (or, for a symbolic link, the file
// it points to) with data: a temporary dotfile in the same directory,
// written, given the original mode, fsynced and renamed over the
// original, then the directory fsynced. On error the original is intact and
// the temporary file removed.
func writeAtomic(path string, data []byte) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.Write(real, data, info.Mode().Perm()); err != nil {
		return fmt.Errorf("migrate %s: %w", path, err)
	}
	return nil
}
