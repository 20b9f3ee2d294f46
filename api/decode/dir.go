package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// positions is where one object's document and fields are in its file,
// packed into one string: the line of the document's content, then, in
// path order, each field path kept (its length, then its bytes) with the
// line of its key — every number a uvarint. A directory store keeps the
// positions of every object it holds, for as long as it runs, to place
// the errors a later change of another file may bring; packed, they take
// well under half of what a table of paths and lines took, and hold on
// to none of the strings of the parsed YAML.
type positions string

// crossFields are the fields the checks across objects place their errors
// on: metadata.name ([CheckDuplicates]), a Member's references
// (v1alpha1.Member.References: spec.profile, spec.mcpTarget.tenantId,
// for [CheckReferences]) and the field its worktree branch comes from
// (v1alpha1.Member.WorktreeField, for [CheckWorktrees]). They are the only
// lines asked of an object once it is decoded; its positions keep theirs
// and their ancestors' (the nearest written one answers for a field left
// out), and no other: the line of each label, or of each of a profile's
// env and args, would be kept for as long as a directory store runs, and
// read by nobody.
var crossFields = []string{"metadata.name", "spec.profile", "spec.mcpTarget.tenantId", "spec.worktree.branch"}

// crossField reports whether path is one of crossFields or an ancestor of
// one.
func crossField(path string) bool {
	for _, f := range crossFields {
		if f == path || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}

// positionsOf packs an object's positions: its document's line, and the
// lines of its crossFields and their ancestors, taken from the decoder's
// field path → line of its key.
func positionsOf(doc int, lines map[string]int) positions {
	kept := make(map[string]int, len(crossFields))
	for path, line := range lines {
		if crossField(path) {
			kept[path] = line
		}
	}
	return pack(doc, kept)
}

// pack packs a document's line and the lines of the field paths of lines.
func pack(doc int, lines map[string]int) positions {
	paths := slices.Sorted(maps.Keys(lines))
	size := uvarintLen(doc)
	for _, p := range paths {
		size += uvarintLen(len(p)) + len(p) + uvarintLen(lines[p])
	}
	var b strings.Builder
	b.Grow(size)
	var num [binary.MaxVarintLen64]byte
	put := func(v int) { b.Write(binary.AppendUvarint(num[:0], uint64(v))) }
	put(doc)
	for _, p := range paths {
		put(len(p))
		b.WriteString(p)
		put(lines[p])
	}
	return positions(b.String())
}

// uvarintLen is how many bytes v takes as a uvarint.
func uvarintLen(v int) int {
	var num [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(num[:0], uint64(v)))
}

// doc is the line of the document's content.
func (p positions) doc() int {
	line, _ := uvarint(string(p))
	return line
}

// line is the line of field's key, if the document writes it.
func (p positions) line(field string) (int, bool) {
	_, n := uvarint(string(p))
	for rest := string(p[n:]); rest != ""; {
		size, n := uvarint(rest)
		path := rest[n : n+size]
		line, m := uvarint(rest[n+size:])
		switch {
		case path == field:
			return line, true
		case path > field || m == 0:
			return 0, false // in path order: field is not there
		}
		rest = rest[n+size+m:]
	}
	return 0, false
}

// uvarint reads the uvarint s starts with, as binary.Uvarint reads one
// from bytes, and how many bytes it took (0 for none).
func uvarint(s string) (int, int) {
	var v uint64
	for i, shift := 0, uint(0); i < len(s) && i < binary.MaxVarintLen64; i, shift = i+1, shift+7 {
		if s[i] < 0x80 {
			return int(v | uint64(s[i])<<shift), i + 1
		}
		v |= uint64(s[i]&0x7f) << shift
	}
	return 0, 0
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
	return p.doc()
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
