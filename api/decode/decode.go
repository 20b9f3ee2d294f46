package decode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Limits that keep a hostile file from costing more than a normal one:
// nesting depth, and node visits per document (aliases can make a small
// document expand exponentially).
const (
	maxDepth  = 64
	maxVisits = 100_000
)

// FleetdOwned reports whether field is one fleetd writes itself: status,
// metadata.uid, metadata.generation and metadata.creationTimestamp. Such
// fields are accepted in a file, so that `fleetd get -o yaml` output can be
// applied again, and dropped unread: an operator's file never sets them.
func FleetdOwned(field string) bool {
	switch field {
	case "status", "metadata.uid", "metadata.generation", "metadata.creationTimestamp":
		return true
	}
	return false
}

// File decodes every YAML document in data, which was read from path.
// Each document must be one fleetd object; it is decoded strictly, defaulted
// and validated. Empty documents are skipped. Every problem in every
// document is returned; objects come only from documents without errors,
// in file order.
func File(path string, data []byte) ([]v1alpha1.Object, ErrorList) {
	f := Manifest(path, data)
	return f.Objects, f.Errors
}

// Manifest decodes one manifest file like [File] and keeps where each
// object, and each field the checks across objects ask about, is written,
// as the decoder found them: [FileResult.Line] answers without parsing the
// file again. data was read from path.
func Manifest(path string, data []byte) FileResult {
	var (
		objs []v1alpha1.Object
		pos  []positions
		errs ErrorList
	)
	for _, c := range splitDocuments(data) {
		dec := yaml.NewDecoder(bytes.NewReader(c.data))
		for {
			var root yaml.Node
			err := dec.Decode(&root)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, syntaxError(path, c, err))
				break
			}
			d := &docDecoder{
				file:  path,
				off:   c.line - 1,
				lines: map[string]int{},
				bad:   map[string]bool{},
				skip:  map[*yaml.Node]bool{},
			}
			obj := d.decode(&root)
			if len(d.errs) > 0 {
				kind, name := declared(&root)
				for _, e := range d.errs {
					e.Kind, e.Name = kind, name
				}
			}
			errs = append(errs, d.errs...)
			if obj != nil && len(d.errs) == 0 {
				objs = append(objs, obj)
				pos = append(pos, positionsOf(d.docLine, d.lines))
			}
		}
	}
	errs.Sort()
	return FileResult{Path: path, Objects: objs, Errors: errs, positions: pos}
}

// declared is the kind and metadata.name a document's mapping spells, each
// "" unless written as a plain string.
func declared(root *yaml.Node) (kind, name string) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return "", ""
	}
	str := func(n *yaml.Node) string {
		if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			return n.Value
		}
		return ""
	}
	_, k := lookup(root.Content[0], "kind")
	if _, meta := lookup(root.Content[0], "metadata"); meta != nil && meta.Kind == yaml.MappingNode {
		_, n := lookup(meta, "name")
		name = str(n)
	}
	return str(k), name
}

// IsManifestFile reports whether a directory entry named name is a manifest:
// *.yaml or *.yml, but not a dotfile and not an editor's backup, swap or
// lock file.
func IsManifestFile(name string) bool {
	base := filepath.Base(name)
	if base == "" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "#") ||
		strings.HasSuffix(base, "~") || strings.HasSuffix(base, "#") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(base))
	return (ext == ".yaml" || ext == ".yml") && len(base) > len(ext)
}

type chunk struct {
	line int // file line of the chunk's first line
	data []byte
}

// splitDocuments cuts data at every document-start marker ("---" at the
// start of a line), so that a syntax error in one document does not hide
// the problems of the next. YAML forbids such a line inside a scalar, so
// the cut never splits a value. Directives and comments before the first
// marker stay with the document they precede.
func splitDocuments(data []byte) []chunk {
	var chunks []chunk
	start, startLine, line := 0, 1, 1
	content := false // the current chunk holds more than directives and comments
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		l := data[i:next]
		isStart := bytes.HasPrefix(l, []byte("---")) &&
			(len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r' || l[3] == '\n')
		if isStart && content {
			chunks = append(chunks, chunk{line: startLine, data: data[start:i]})
			start, startLine = i, line
		}
		if t := bytes.TrimSpace(l); isStart || len(t) > 0 && t[0] != '#' && l[0] != '%' {
			content = true
		}
		i = next
		line++
	}
	return append(chunks, chunk{line: startLine, data: data[start:]})
}

// SyntaxError turns the error yaml.v3 returned while parsing data, the
// whole of the file at path, into an Error on the file's line: the line
// yaml.v3 names, corrected for its 0-based parser problems and clamped to
// the file's last line.
func SyntaxError(path string, data []byte, err error) *Error {
	return syntaxError(path, chunk{line: 1, data: data}, err)
}

// syntaxError turns a yaml.v3 parse error into an Error on the file's line.
func syntaxError(path string, c chunk, err error) *Error {
	chunkLine := c.line
	lastLine := max(1, bytes.Count(bytes.TrimRight(c.data, "\n"), []byte("\n"))+1)
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := chunkLine
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = chunkLine+v-1, tail
				if isParserProblem(msg) {
					line++
				}
				// A problem at the end of input is reported past the
				// last line; point at the last line instead.
				line = min(line, chunkLine+lastLine-1)
			}
		}
	}
	return &Error{File: path, Line: line, Msg: "invalid YAML: " + msg}
}

// isParserProblem reports whether msg is one of yaml.v3's parser (not
// scanner) problems. yaml.v3 reports those with a 0-based line number and
// scanner problems with a 1-based one.
func isParserProblem(msg string) bool {
	switch msg {
	case "did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
		"did not find expected '-' indicator",
		"did not find expected <document start>",
		"did not find expected <stream-start>",
		"did not find expected key",
		"did not find expected node content",
		"found duplicate %TAG directive",
		"found duplicate %YAML directive",
		"found incompatible YAML document",
		"found undefined tag handle":
		return true
	}
	return false
}

// docDecoder decodes one document. It walks the yaml.v3 node tree against
// the Go type, by reflection over JSON tags, collecting every problem with
// its line, and sets the typed object's fields that pass as encoding/json
// would decode them. The object is then defaulted and validated;
// validation errors are located through lines, and dropped when they only
// restate a structural error already reported.
//
// Setting the fields directly gives what encoding/json would because the
// walk admits only what decodes: names jsonFields lists, scalars of the
// field's kind, and the API's types that decode JSON themselves —
// v1alpha1.Duration, v1alpha1.IntOrPercent and time.Time — by their own
// rules (TestWalk_DecodesEveryTypeItself keeps it so when a type is added).
type docDecoder struct {
	file     string
	off      int                 // added to a node's line to get the file's line
	docLine  int                 // file line of the document's content
	errs     ErrorList           //
	lines    map[string]int      // field path → file line of its key
	bad      map[string]bool     // field paths that already have a structural error
	skip     map[*yaml.Node]bool // mapping keys already reported (duplicates, closed-shape)
	zeros    []string            // paths of durations written as zero ("0s"), which defaulting must not hide
	visits   int
	stopped  bool  // a limit was hit; the document is abandoned
	internal error // a value the walk admitted did not decode: a bug
}

func (d *docDecoder) errorf(field string, line int, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	if field != "" {
		d.bad[field] = true
	}
}

func (d *docDecoder) line(n *yaml.Node) int { return n.Line + d.off }

// lineFor returns the line of field, or of its nearest ancestor that
// appears in the document, or of the document itself.
func (d *docDecoder) lineFor(field string) int {
	for p := field; p != ""; p = parentField(p) {
		if l, ok := d.lines[p]; ok {
			return l
		}
	}
	return d.docLine
}

// isBad reports whether field or one of its ancestors already has a
// structural error.
func (d *docDecoder) isBad(field string) bool {
	for p := field; p != ""; p = parentField(p) {
		if d.bad[p] {
			return true
		}
	}
	return false
}

// enter counts a node visit and follows an alias; it returns nil once a
// limit is hit, after reporting it once.
func (d *docDecoder) enter(n *yaml.Node, depth int) *yaml.Node {
	if d.stopped {
		return nil
	}
	d.visits++
	for n.Kind == yaml.AliasNode && n.Alias != nil && depth < maxDepth {
		n, depth = n.Alias, depth+1
	}
	if d.visits > maxVisits || depth >= maxDepth || n.Kind == yaml.AliasNode {
		d.stopped = true
		d.errs = append(d.errs, &Error{File: d.file, Line: d.line(n), Msg: "document nests too deeply or its aliases expand too far"})
		return nil
	}
	return n
}

func (d *docDecoder) decode(root *yaml.Node) v1alpha1.Object {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	n := d.enter(root.Content[0], 0)
	if n == nil {
		return nil
	}
	d.docLine = d.line(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // empty document: only "---", comments or "null"
	}
	if n.Kind != yaml.MappingNode {
		d.errorf("", d.docLine, "want a mapping with apiVersion, kind, metadata and spec, got %s", describe(n))
		return nil
	}
	var obj interface {
		v1alpha1.Object
		SetDefaults()
		Validate() v1alpha1.FieldErrors
	}
	kindKey, kindNode := lookup(n, "kind")
	if kindNode != nil && kindNode.Kind == yaml.ScalarNode && kindNode.ShortTag() == "!!str" {
		switch kindNode.Value {
		case v1alpha1.KindMember:
			obj = &v1alpha1.Member{}
		case v1alpha1.KindProfile:
			obj = &v1alpha1.Profile{}
		case v1alpha1.KindTenant:
			obj = &v1alpha1.Tenant{}
		}
	}
	var typ reflect.Type
	if obj != nil {
		typ = reflect.TypeOf(obj).Elem()
	}
	d.checkDuplicates(n, typ, "", 0)
	switch {
	case kindNode == nil:
		d.errorf("", d.docLine, "not a fleetd object: missing kind; every document needs apiVersion: %s and kind: Member, Profile or Tenant", v1alpha1.GroupVersion)
		return nil
	case kindNode.Kind != yaml.ScalarNode || kindNode.ShortTag() != "!!str":
		d.errorf("kind", d.line(kindKey), "want Member, Profile or Tenant, got %s", describe(kindNode))
		return nil
	case obj == nil:
		d.errorf("kind", d.line(kindKey), "unknown value %q; want Member, Profile or Tenant", kindNode.Value)
		return nil
	case obj.GetObjectKind() == v1alpha1.KindMember:
		if _, spec := lookup(n, "spec"); spec != nil {
			d.checkClosed(spec, "spec", 0)
		}
	}

	d.walk(n, reflect.ValueOf(obj).Elem(), "", 0)
	if d.stopped {
		return nil
	}
	if d.internal != nil {
		// The walk admits only values that decode; reaching this is a bug.
		d.errorf("", d.docLine, "internal error: decode checked document: %v", d.internal)
		return nil
	}
	obj.SetDefaults()
	// A duration written as 0s is validated as written: defaulting treats
	// it as absent, and "toolTimeout: 0s" would quietly mean 15m.
	for _, path := range d.zeros {
		zeroDuration(reflect.ValueOf(obj).Elem(), path)
	}
	for _, fe := range obj.Validate() {
		if !d.isBad(fe.Field) {
			d.errs = append(d.errs, &Error{File: d.file, Line: d.lineFor(fe.Field), Field: fe.Field, Msg: fe.Msg})
		}
	}
	shareTypeMeta(obj)
	return obj
}

// shareTypeMeta gives obj the apiVersion and kind strings of the package
// v1alpha1 when it spells them so, instead of the parsed YAML's copies: a
// directory store keeps every object it read for as long as it runs.
func shareTypeMeta(obj v1alpha1.Object) {
	var tm *v1alpha1.TypeMeta
	switch o := obj.(type) {
	case *v1alpha1.Member:
		tm = &o.TypeMeta
	case *v1alpha1.Profile:
		tm = &o.TypeMeta
	case *v1alpha1.Tenant:
		tm = &o.TypeMeta
	default:
		return
	}
	if tm.APIVersion == v1alpha1.GroupVersion && tm.Kind == obj.GetObjectKind() {
		*tm = v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: obj.GetObjectKind()}
	}
}

// checkDuplicates reports every mapping key that repeats an earlier key of
// the same mapping, anywhere in the document; the repeat is then ignored.
// t is the Go type n decodes to, or nil where that is unknown; it only
// shapes field paths (spec.env[A] for a map entry, spec.cwd for a field).
func (d *docDecoder) checkDuplicates(n *yaml.Node, t reflect.Type, path string, depth int) {
	if n = d.enter(n, depth); n == nil {
		return
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		var fields map[string]jsonField
		if t != nil && t.Kind() == reflect.Struct {
			fields, _ = jsonFields(t)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p, vt := joinField(path, k.Value), fields[k.Value].typ
			if t != nil && t.Kind() == reflect.Map {
				p, vt = mapField(path, k.Value), t.Elem()
			}
			if k.Kind == yaml.ScalarNode {
				if first, dup := seen[k.Value]; dup {
					d.skip[k] = true
					d.errorf(p, d.line(k), "duplicate key (first at line %d)", first)
					continue
				}
				seen[k.Value] = d.line(k)
			}
			d.checkDuplicates(v, vt, p, depth+1)
		}
	case yaml.SequenceNode:
		var et reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			et = t.Elem()
		}
		for i, item := range n.Content {
			d.checkDuplicates(item, et, indexField(path, i), depth+1)
		}
	}
}

// checkClosed applies the Member spec's closed shape to every key below n.
func (d *docDecoder) checkClosed(n *yaml.Node, path string, depth int) {
	if n = d.enter(n, depth); n == nil {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if d.skip[k] || k.Kind != yaml.ScalarNode {
				continue
			}
			p := joinField(path, k.Value)
			if msg := closedKey(p, k.Value); msg != "" {
				d.skip[k] = true
				d.errorf(p, d.line(k), "%s", msg)
				continue
			}
			d.checkClosed(v, p, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			d.checkClosed(item, indexField(path, i), depth+1)
		}
	}
}

// walk checks n against v's type and sets v to the parts that fit, as
// encoding/json would decode them: a struct, map or list that is there at
// all is set, with the fields, entries or items that fit; a pointer is set
// to a new value; a scalar only when it fits. ok is false when n
// contributed nothing and v was left as it was.
func (d *docDecoder) walk(n *yaml.Node, v reflect.Value, path string, depth int) (ok bool) {
	if n = d.enter(n, depth); n == nil {
		return false
	}
	return d.walkValue(n, v, path, depth)
}

// walkValue is walk once n is entered.
func (d *docDecoder) walkValue(n *yaml.Node, v reflect.Value, path string, depth int) bool {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if !d.walkValue(n, p.Elem(), path, depth) {
			return false
		}
		v.Set(p)
		return true
	}
	line := d.lineFor(path)
	if path == "" {
		line = d.line(n)
	}
	switch v.Type() {
	case reflect.TypeFor[v1alpha1.Duration]():
		return d.duration(n, v, path, line)
	case reflect.TypeFor[v1alpha1.IntOrPercent]():
		return d.intOrPercent(n, v, path, line)
	case reflect.TypeFor[time.Time]():
		return d.timestamp(n, v, path, line)
	}
	switch v.Kind() {
	case reflect.Slice:
		return d.list(n, v, path, line, depth)
	case reflect.Map:
		return d.mapping(n, v, path, line, depth)
	case reflect.Struct:
		return d.object(n, v, path, line, depth)
	}
	return d.scalar(n, v, path, line)
}

// duration reads a v1alpha1.Duration ("60s"), noting a zero one.
func (d *docDecoder) duration(n *yaml.Node, v reflect.Value, path string, line int) bool {
	scalar, tag := n.Kind == yaml.ScalarNode, n.ShortTag()
	if !scalar || tag != "!!str" {
		d.errorf(path, line, "want a duration such as \"60s\" or \"15m\", got %s", describe(n))
		return false
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.errorf(path, line, "invalid duration %q; want a form such as \"60s\" or \"15m\"", n.Value)
		return false
	}
	if dur == 0 {
		d.zeros = append(d.zeros, path)
	}
	v.Set(reflect.ValueOf(v1alpha1.Duration{Duration: dur}))
	return true
}

// intOrPercent reads a v1alpha1.IntOrPercent (2, or "25%").
func (d *docDecoder) intOrPercent(n *yaml.Node, v reflect.Value, path string, line int) bool {
	scalar, tag := n.Kind == yaml.ScalarNode, n.ShortTag()
	if scalar && tag == "!!int" {
		i, err := strconv.ParseInt(n.Value, 10, 32)
		if err != nil {
			d.errorf(path, line, "invalid count %s; want a count such as 2 or a percent such as \"25%%\"", n.Value)
			return false
		}
		v.Set(reflect.ValueOf(v1alpha1.IntOrPercent{Value: int32(i)}))
		return true
	}
	if !scalar || tag != "!!str" {
		d.errorf(path, line, "want a count such as 2 or a percent such as \"25%%\", got %s", describe(n))
		return false
	}
	p, err := v1alpha1.ParsePercent(n.Value)
	if err != nil {
		d.errorf(path, line, "%v", err)
		return false
	}
	v.Set(reflect.ValueOf(p))
	return true
}

// timestamp reads an RFC 3339 time. time.Parse is more lenient than
// encoding/json's strict RFC 3339; a time only it accepts is an internal
// error, as it was when the walk's output went through encoding/json.
func (d *docDecoder) timestamp(n *yaml.Node, v reflect.Value, path string, line int) bool {
	scalar, tag := n.Kind == yaml.ScalarNode, n.ShortTag()
	if !scalar || (tag != "!!str" && tag != "!!timestamp") {
		d.errorf(path, line, "want an RFC 3339 time, got %s", describe(n))
		return false
	}
	if _, err := time.Parse(time.RFC3339, n.Value); err != nil {
		d.errorf(path, line, "invalid time %q; want RFC 3339 such as 2026-01-02T15:04:05Z", n.Value)
		return false
	}
	if err := v.Addr().Interface().(*time.Time).UnmarshalText([]byte(n.Value)); err != nil && d.internal == nil {
		d.internal = err
	}
	return true
}

// scalar reads a string, a bool or an integer into v.
func (d *docDecoder) scalar(n *yaml.Node, v reflect.Value, path string, line int) bool {
	scalar, tag := n.Kind == yaml.ScalarNode, n.ShortTag()
	switch v.Kind() {
	case reflect.String:
		if !scalar || (tag != "!!str" && tag != "!!timestamp") {
			d.errorf(path, line, "want a string, got %s", describe(n))
			return false
		}
		v.SetString(n.Value)
		return true
	case reflect.Bool:
		var b bool
		if !scalar || tag != "!!bool" || n.Decode(&b) != nil {
			d.errorf(path, line, "want true or false, got %s", describe(n))
			return false
		}
		v.SetBool(b)
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 0, v.Type().Bits())
		if !scalar || tag != "!!int" || err != nil {
			d.errorf(path, line, "want an integer, got %s", describe(n))
			return false
		}
		v.SetInt(i)
		return true
	}
	d.errorf(path, line, "internal error: no decoder for Go type %s", v.Type())
	return false
}

// list reads a sequence of v's elements.
func (d *docDecoder) list(n *yaml.Node, v reflect.Value, path string, line, depth int) bool {
	if n.Kind != yaml.SequenceNode {
		d.errorf(path, line, "want a list, got %s", describe(n))
		return false
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		p := indexField(path, i)
		d.lines[p] = d.line(item)
		elem := reflect.New(v.Type().Elem()).Elem()
		if d.walk(item, elem, p, depth+1) {
			out = reflect.Append(out, elem)
		}
	}
	v.Set(out)
	return true
}

// mapping reads a map with string keys of v's elements.
func (d *docDecoder) mapping(n *yaml.Node, v reflect.Value, path string, line, depth int) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(path, line, "want a mapping, got %s", describe(n))
		return false
	}
	out := reflect.MakeMap(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if d.skip[k] {
			continue
		}
		p := mapField(path, k.Value)
		d.lines[p] = d.line(k)
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			if k.Kind != yaml.ScalarNode {
				p = path
			}
			d.errorf(p, d.line(k), "want a string key, got %s; quote it", describe(k))
			continue
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if d.walk(val, elem, p, depth+1) {
			out.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
		}
	}
	v.Set(out)
	return true
}

// object reads a struct by its JSON field names: an unknown field is an
// error (a legacy one says how to migrate), an explicit null leaves the
// field unset, fleetd-owned fields are skipped.
func (d *docDecoder) object(n *yaml.Node, v reflect.Value, path string, line, depth int) bool {
	if n.Kind != yaml.MappingNode {
		d.errorf(path, line, "want a mapping, got %s", describe(n))
		return false
	}
	t := v.Type()
	fields, names := jsonFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if d.skip[k] {
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			d.errorf(path, d.line(k), "want field names, got key %s", describe(k))
			continue
		}
		p := joinField(path, k.Value)
		d.lines[p] = d.line(k)
		if FleetdOwned(p) {
			continue
		}
		f, known := fields[k.Value]
		switch {
		case !known && p == "spec.mcpTransport" && t == reflect.TypeFor[v1alpha1.MemberSpec]():
			d.errorf(p, d.line(k), "legacy field; run \"fleetd migrate DIR\" to rewrite it as spec.mcpTarget and spec.transport")
		case !known:
			d.errorf(p, d.line(k), "unknown field; want one of %s", strings.Join(names, ", "))
		case val.Kind == yaml.ScalarNode && val.ShortTag() == "!!null":
			// An explicit null leaves the field unset, as in Kubernetes.
		default:
			d.walk(val, v.FieldByIndex(f.index), p, depth+1)
		}
	}
	return true
}

// zeroDuration sets the v1alpha1.Duration at path (JSON field names joined
// by dots, as the walk builds them) inside struct v back to zero.
func zeroDuration(v reflect.Value, path string) {
	for _, name := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return
		}
		fields, _ := jsonFields(v.Type())
		f, ok := fields[name]
		if !ok {
			return
		}
		v = v.FieldByIndex(f.index)
	}
	if dur, ok := v.Addr().Interface().(*v1alpha1.Duration); ok {
		dur.Duration = 0
	}
}

// jsonFields lists the JSON fields of struct type t as encoding/json sees
// them: tag names, with embedded untagged structs flattened, each with its
// type and where it is in t (for reflect.Value.FieldByIndex). The answer is
// listed once per type and shared: callers must not change it. (Listing
// the fields by reflection at every mapping was a third of the time to
// decode a member's manifest, which a restart does for every member.)
func jsonFields(t reflect.Type) (map[string]jsonField, []string) {
	if f, ok := fieldsOf.Load(t); ok {
		sf := f.(structFields)
		return sf.byName, sf.names
	}
	fields, names := listJSONFields(t)
	fieldsOf.Store(t, structFields{byName: fields, names: names})
	return fields, names
}

// structFields is jsonFields' answer for one struct type.
type structFields struct {
	byName map[string]jsonField
	names  []string
}

// jsonField is one JSON field of a struct type.
type jsonField struct {
	typ   reflect.Type
	index []int
}

// fieldsOf holds jsonFields' answers by struct type (reflect.Type →
// structFields); the types are the API's, a fixed few.
var fieldsOf sync.Map

func listJSONFields(t reflect.Type) (map[string]jsonField, []string) {
	fields := map[string]jsonField{}
	var names []string
	var add func(t reflect.Type, index []int)
	add = func(t reflect.Type, index []int) {
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			at := append(slices.Clip(index), f.Index...)
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				add(f.Type, at)
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[name] = jsonField{typ: f.Type, index: at}
			names = append(names, name)
		}
	}
	add(t, nil)
	return fields, names
}

// lookup returns the key and value nodes of key in mapping n.
func lookup(n *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// describe says what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int", "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!timestamp":
		return "timestamp " + v
	}
	return fmt.Sprintf("%s %q", n.ShortTag(), v)
}

// Field paths: "spec.cwd" for struct fields, "metadata.labels[team]" for
// map entries, "spec.args[0]" for list items.

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func mapField(parent, key string) string { return parent + "[" + key + "]" }

func indexField(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// parentField strips the last segment of a field path: spec.env[A] →
// spec.env → spec → "".
func parentField(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i > 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}
