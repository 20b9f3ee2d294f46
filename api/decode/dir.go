package decode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// FileResult is what one manifest file decoded to: its objects, its
// problems and, when [Manifest] or [Dir] decoded it, where each object's
// fields are written.
type FileResult struct {
	Path    string
	Objects []v1alpha1.Object
	Errors  ErrorList

	// positions[i] locates Objects[i]'s fields; empty when the result
	// was put together by hand.
	positions []positions
}

// positions is where one object's document is in its file, and the keys of
// the fields the checks across objects place their errors on (crossPaths):
// the line of each, 0 where the document leaves it out. A directory store
// keeps the positions of every object it holds, for as long as it runs, to
// place the errors a later change of another file may bring; no other
// line is asked of an object once it is decoded.
type positions struct {
	doc   int32 // a manifest's lines are bounded by its size (MaxFileBytes)
	lines [len(crossPaths)]int32
}

// crossPaths are the fields the checks across objects place their errors
// on — metadata.name ([CheckDuplicates]), a Member's references
// (v1alpha1.Member.References: spec.profile, spec.mcpTarget.tenantId, for
// [CheckReferences]) and the field its worktree branch comes from
// (v1alpha1.Member.WorktreeField, for [CheckWorktrees]) — with their
// ancestors, whose line answers for a field the document leaves out.
var crossPaths = [...]string{
	"metadata", "metadata.name",
	"spec", "spec.profile", "spec.mcpTarget", "spec.mcpTarget.tenantId", "spec.worktree", "spec.worktree.branch",
}

// positionsOf is an object's positions: its document's line, and the
// lines of crossPaths, taken from the decoder's field path → line of its
// key.
func positionsOf(doc int, lines map[string]int) positions {
	p := positions{doc: int32(doc)}
	for i, path := range crossPaths {
		p.lines[i] = int32(lines[path])
	}
	return p
}

// line is the line of field's key, if the positions keep it and the
// document writes it.
func (p positions) line(field string) (int, bool) {
	i := slices.Index(crossPaths[:], field)
	if i < 0 || p.lines[i] == 0 {
		return 0, false
	}
	return int(p.lines[i]), true
}

// Line returns the line where field (a field path such as
// spec.mcpTarget.tenantId) of Objects[i] is written; for a field the
// document leaves out, the line of its nearest ancestor that is there, or
// of the document. Only the fields the checks across objects place errors
// on are located, with their ancestors (metadata.name, spec.profile,
// spec.mcpTarget.tenantId, spec.worktree.branch): any other field is
// answered as one left out. It is 0 when the decoder did not locate
// Objects[i].
func (f *FileResult) Line(i int, field string) int {
	if i < 0 || i >= len(f.positions) {
		return 0
	}
	p := f.positions[i]
	for q := field; q != ""; q = parentField(q) {
		if l, ok := p.line(q); ok {
			return l
		}
	}
	return int(p.doc)
}

// Only returns the result of Objects[i] alone, with its positions and
// without the file's errors: one object in effect and where it is written.
func (f *FileResult) Only(i int) FileResult {
	out := FileResult{Path: f.Path, Objects: []v1alpha1.Object{f.Objects[i]}}
	if i < len(f.positions) {
		out.positions = []positions{f.positions[i]}
	}
	return out
}

// objectKey identifies an object across files: names are unique per kind.
func objectKey(o v1alpha1.Object) string { return o.GetObjectKind() + "/" + o.GetName() }

// CheckDuplicates reports every object whose kind and name were already
// defined, in the same file or an earlier one; the error sits on the later
// definition and names the first one's file and line.
func CheckDuplicates(files []FileResult) ErrorList {
	type place struct {
		file string
		line int
	}
	first := map[string]place{}
	var errs ErrorList
	for _, f := range files {
		for i, o := range f.Objects {
			key := objectKey(o)
			here := place{f.Path, f.Line(i, "metadata.name")}
			p, dup := first[key]
			if !dup {
				first[key] = here
				continue
			}
			where := p.file
			if p.line > 0 {
				where = fmt.Sprintf("%s:%d", p.file, p.line)
			}
			errs = append(errs, &Error{
				File:  here.file,
				Line:  here.line,
				Field: "metadata.name",
				Msg:   fmt.Sprintf("duplicate %s %q; already defined at %s", o.GetObjectKind(), o.GetName(), where),
			})
		}
	}
	return errs
}

// DirResult is what one manifests directory decoded to.
type DirResult struct {
	Dir   string
	Files []FileResult
}

// ManifestPaths lists the paths in dir whose names are manifest names (see
// [IsManifestFile]), in name order, whatever kind of file each is: a
// directory, named pipe, device or dangling link named like a manifest is
// listed too, so that reading it ([ReadManifest]) reports the problem
// instead of leaving the file out in silence. The error is non-nil only
// when dir itself cannot be listed.
func ManifestPaths(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read manifests directory: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if IsManifestFile(e.Name()) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}

// DirOptions tune [Dir]; nil means the defaults.
type DirOptions struct {
	// MaxFileBytes is the size limit on one file ([ReadManifest]); 0 means
	// DefaultMaxManifestBytes.
	MaxFileBytes int64
}

// Dir decodes every manifest file [ManifestPaths] lists in dir, each read
// by [ReadManifest] — the files and the limits of fleetd's watcher. A file
// that cannot or may not be read is reported in its FileResult; one that
// vanished since it was listed is left out, as the watcher leaves it out.
// The error is non-nil only when dir itself cannot be listed.
func Dir(dir string, opts *DirOptions) (*DirResult, error) {
	var o DirOptions
	if opts != nil {
		o = *opts
	}
	paths, err := ManifestPaths(dir)
	if err != nil {
		return nil, err
	}
	r := &DirResult{Dir: dir}
	for _, path := range paths {
		data, err := ReadManifest(path, o.MaxFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			r.Files = append(r.Files, FileResult{Path: path, Errors: ErrorList{AsError(path, err)}})
			continue
		}
		r.Files = append(r.Files, Manifest(path, data))
	}
	return r, nil
}

// AsError returns err as the *Error it is (every error [ReadManifest]
// returns is one) or, for any other error, an *Error naming path.
func AsError(path string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{File: path, Msg: err.Error(), cause: err}
}

// Objects returns the objects of every document without errors, in file
// order, except that a kind and name defined more than once is left out
// altogether: fleetd cannot tell which definition the operator meant.
func (r *DirResult) Objects() []v1alpha1.Object {
	count := map[string]int{}
	for _, f := range r.Files {
		for _, o := range f.Objects {
			count[objectKey(o)]++
		}
	}
	var out []v1alpha1.Object
	for _, f := range r.Files {
		for _, o := range f.Objects {
			if count[objectKey(o)] == 1 {
				out = append(out, o)
			}
		}
	}
	return out
}

// Errors returns every file's errors and the duplicate definitions across
// files, sorted by file and line.
func (r *DirResult) Errors() ErrorList {
	var errs ErrorList
	for _, f := range r.Files {
		errs = append(errs, f.Errors...)
	}
	errs = append(errs, CheckDuplicates(r.Files)...)
	errs.Sort()
	return errs
}
