package migrate

import (
	"errors"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/yamledit"
)

// The legacy vocabulary. These spellings exist only in this package.
const (
	legacyField      = "mcpTransport"
	legacyMode       = "mode"
	legacyRemoteMode = "remote-http"
	legacyResident   = "resident"
	legacyTenantID   = "tenantId"
)

// The steady-state vocabulary the migration writes.
const (
	targetField        = "mcpTarget"
	targetKind         = "kind"
	targetTenant       = "tenant"
	transportField     = "transport"
	transportStreaming = "streamable-http"
)

// Change is one rewritten Member: where its legacy field was and what it
// became.
type Change struct {
	// File is the path of the manifest file, as passed to [File] or joined
	// from the directory given to [Dir].
	File string
	// Line is the line of spec.mcpTransport in the original file.
	Line int
	// Member is the member's metadata.name.
	Member string
	// Before and After describe the spec fields, e.g.
	// "spec.mcpTransport {mode: …, tenantId: acme}" and
	// "spec.mcpTarget {kind: tenant, tenantId: acme}, spec.transport streamable-http".
	Before, After string
}

// String formats the change as "FILE:LINE: member NAME: BEFORE → AFTER".
func (c Change) String() string {
	return fmt.Sprintf("%s:%d: member %s: %s → %s", c.File, c.Line, c.Member, c.Before, c.After)
}

// File migrates the contents of one manifest file. name is used only in
// changes and errors. It returns the rewritten contents and the changes
// made; when nothing needs migrating, out is data itself and changes is
// empty. When any legacy entry cannot be rewritten, out is nil and errs
// says why, one error per problem.
func File(name string, data []byte) (out []byte, changes []Change, errs decode.ErrorList) {
	docs, err := yamledit.ParseDocuments(data)
	if err != nil {
		return nil, nil, decode.ErrorList{decode.SyntaxError(name, data, err)}
	}
	f := &fileRewrite{name: name, src: yamledit.NewSource(data)}
	for _, doc := range docs {
		f.document(doc)
	}
	if len(f.errs) > 0 {
		return nil, nil, f.errs
	}
	if len(f.changes) == 0 {
		return data, nil, nil
	}
	out, err = f.src.Apply(f.edits)
	if err == nil {
		for _, op := range f.treeOps {
			op()
		}
		err = verify(out, docs)
	}
	if err != nil {
		return nil, nil, decode.ErrorList{{File: name, Msg: fmt.Sprintf(
			"internal error: the rewrite would change more than %s (%v); file left untouched, migrate it by hand and please report this",
			legacyField, err)}}
	}
	return out, f.changes, nil
}

// fileRewrite collects the edits, changes and errors for one file.
type fileRewrite struct {
	name    string
	src     *yamledit.Source
	edits   []yamledit.Edit
	treeOps []func() // the same rewrite applied to the parsed tree, for verify
	changes []Change
	errs    decode.ErrorList
}

// failAt records err, at the line of the node it names if it is a
// *yamledit.NodeError, else at n's line.
func (f *fileRewrite) failAt(n *yaml.Node, field string, err error) {
	var ne *yamledit.NodeError
	if errors.As(err, &ne) {
		n = ne.Node
	}
	f.fail(n, field, "%v; migrate this member by hand", err)
}

func (f *fileRewrite) fail(n *yaml.Node, field, format string, args ...any) {
	f.errs = append(f.errs, &decode.Error{File: f.name, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// legacyEntry is the parsed content of one spec.mcpTransport.
type legacyEntry struct {
	key, value             *yaml.Node
	modeKey, mode          *yaml.Node // nil when absent
	tenantKey, tenantValue *yaml.Node // nil when absent
}

// document plans the rewrite of one YAML document, if it is a legacy
// Member.
func (f *fileRewrite) document(doc *yaml.Node) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return
	}
	if k := lookup(root, "kind"); len(k) != 1 || k[0].value.Kind != yaml.ScalarNode || k[0].value.Value != "Member" {
		return
	}
	specs := lookup(root, "spec")
	if len(specs) != 1 || specs[0].value.Kind != yaml.MappingNode {
		return
	}
	spec := specs[0].value
	entries := lookup(spec, legacyField)
	switch {
	case len(entries) == 0:
		return
	case len(entries) > 1:
		f.fail(entries[1].key, "spec."+legacyField, "duplicate key (first at line %d); keep one, then rerun fleetd migrate", entries[0].key.Line)
		return
	}
	le, ok := f.parseLegacy(entries[0])
	if !ok {
		return
	}
	if t := lookup(spec, targetField); len(t) > 0 {
		f.fail(t[0].key, "spec."+targetField,
			"the member has both %s and the legacy %s (line %d); delete the one that is wrong, then rerun fleetd migrate",
			targetField, legacyField, le.key.Line)
		return
	}
	name := memberName(root)
	switch {
	case le.mode == nil:
		f.toResident(spec, le, name, "")
	case le.mode.Value == legacyRemoteMode:
		f.toTenant(spec, le, name)
	case le.mode.Value == legacyResident:
		f.toResident(spec, le, name, legacyResident)
	default:
		f.fail(le.mode, "spec."+legacyField+"."+legacyMode,
			"unknown legacy mode %q; want %s or %s (migrate this member by hand)", le.mode.Value, legacyRemoteMode, legacyResident)
	}
}

// parseLegacy checks that a legacy entry has a shape the migration can
// rewrite faithfully: null or a mapping of scalar mode and tenantId.
func (f *fileRewrite) parseLegacy(p pair) (legacyEntry, bool) {
	le := legacyEntry{key: p.key, value: p.value}
	field := "spec." + legacyField
	v := p.value
	if v.Anchor != "" || v.Kind == yaml.AliasNode {
		f.fail(v, field, "uses a YAML anchor or alias; expand it by hand, then rerun fleetd migrate")
		return le, false
	}
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
		return le, true
	case v.Kind != yaml.MappingNode:
		f.fail(v, field, "want a mapping with %s and %s", legacyMode, legacyTenantID)
		return le, false
	}
	ok := true
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		sub := field + "." + k.Value
		if first, dup := seen[k.Value]; dup {
			f.fail(k, sub, "duplicate key (first at line %d)", first)
			ok = false
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case legacyMode, legacyTenantID:
		default:
			f.fail(k, sub, "unknown legacy field; the migration only knows %s and %s (migrate this member by hand)", legacyMode, legacyTenantID)
			ok = false
			continue
		}
		if val.Kind != yaml.ScalarNode || val.ShortTag() != "!!str" || val.Anchor != "" {
			f.fail(val, sub, "want a plain string")
			ok = false
			continue
		}
		if k.Value == legacyMode {
			le.modeKey, le.mode = k, val
		} else {
			le.tenantKey, le.tenantValue = k, val
		}
	}
	return le, ok
}

// toTenant rewrites a remote-mode entry to mcpTarget {kind: tenant} plus
// transport: streamable-http.
func (f *fileRewrite) toTenant(spec *yaml.Node, le legacyEntry, member string) {
	field := "spec." + legacyField
	if le.tenantValue == nil || le.tenantValue.Value == "" {
		f.fail(le.mode, field, "mode %s needs a %s naming the Tenant; add it, then rerun fleetd migrate", legacyRemoteMode, legacyTenantID)
		return
	}
	insertTransport := true
	transportNote := ""
	if t := lookup(spec, transportField); len(t) > 0 {
		if v := t[0].value; v.Kind != yaml.ScalarNode || v.Value != transportStreaming {
			f.fail(v, "spec."+transportField,
				"is %q, but a tenant target only speaks %s; fix it, then rerun fleetd migrate", v.Value, transportStreaming)
			return
		}
		insertTransport = false
		transportNote = " (spec." + transportField + " already " + transportStreaming + ")"
	}

	var edits []yamledit.Edit
	for _, r := range []struct {
		node *yaml.Node
		to   string
	}{{le.key, targetField}, {le.modeKey, targetKind}, {le.mode, targetTenant}} {
		start, end, err := f.src.ScalarSpan(r.node)
		if err != nil {
			f.failAt(r.node, field, err)
			return
		}
		edits = append(edits, f.src.ReplaceToken(start, end, r.to))
	}
	if insertTransport {
		e, err := f.src.InsertAfter(spec, le.key, le.value, transportField+": "+transportStreaming)
		if err != nil {
			f.failAt(le.key, field, err)
			return
		}
		edits = append(edits, e)
	}
	f.edits = append(f.edits, edits...)
	f.treeOps = append(f.treeOps, func() {
		le.key.Value, le.modeKey.Value, le.mode.Value = targetField, targetKind, targetTenant
		le.key.Tag, le.modeKey.Tag, le.mode.Tag = "!!str", "!!str", "!!str"
		if insertTransport {
			i := slices.Index(spec.Content, le.key)
			spec.Content = slices.Insert(spec.Content, i+2,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: transportField},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: transportStreaming})
		}
	})
	after := fmt.Sprintf("spec.%s {%s: %s, %s: %s}", targetField, targetKind, targetTenant, legacyTenantID, le.tenantValue.Value)
	if insertTransport {
		after += ", spec." + transportField + " " + transportStreaming
	}
	f.changes = append(f.changes, Change{
		File:   f.name,
		Line:   le.key.Line,
		Member: member,
		Before: fmt.Sprintf("spec.%s {%s: %s, %s: %s}", legacyField, legacyMode, legacyRemoteMode, legacyTenantID, le.tenantValue.Value),
		After:  after + transportNote,
	})
}

// toResident deletes a resident-mode (or mode-less) entry: an absent
// mcpTarget already means resident.
func (f *fileRewrite) toResident(spec *yaml.Node, le legacyEntry, member, mode string) {
	field := "spec." + legacyField
	if le.tenantValue != nil {
		f.fail(le.tenantKey, field+"."+legacyTenantID,
			"a resident member has no tenant; delete %s or set mode %s, then rerun fleetd migrate", legacyTenantID, legacyRemoteMode)
		return
	}
	if len(spec.Content) == 2 {
		f.fail(le.key, field, "is the only field of spec, which needs at least a profile; add one, then rerun fleetd migrate")
		return
	}
	e, err := f.src.DeleteEntry(spec, le.key, le.value)
	if err != nil {
		f.failAt(le.key, field, err)
		return
	}
	f.edits = append(f.edits, e)
	f.treeOps = append(f.treeOps, func() {
		i := slices.Index(spec.Content, le.key)
		spec.Content = slices.Delete(spec.Content, i, i+2)
	})
	before := "spec." + legacyField + " {}"
	if mode != "" {
		before = fmt.Sprintf("spec.%s {%s: %s}", legacyField, legacyMode, mode)
	}
	f.changes = append(f.changes, Change{
		File:   f.name,
		Line:   le.key.Line,
		Member: member,
		Before: before,
		After:  "removed (no spec." + targetField + " means resident)",
	})
}

// pair is one key/value entry of a mapping node.
type pair struct{ key, value *yaml.Node }

// lookup returns every entry of mapping m whose key is the scalar key
// (more than one only when the key is duplicated).
func lookup(m *yaml.Node, key string) []pair {
	var out []pair
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			out = append(out, pair{k, m.Content[i+1]})
		}
	}
	return out
}

// memberName returns metadata.name, or "(unnamed)".
func memberName(root *yaml.Node) string {
	if md := lookup(root, "metadata"); len(md) == 1 && md[0].value.Kind == yaml.MappingNode {
		if n := lookup(md[0].value, "name"); len(n) == 1 && n[0].value.Kind == yaml.ScalarNode && n[0].value.Value != "" {
			return n[0].value.Value
		}
	}
	return "(unnamed)"
}

// verify parses the rewritten file and checks that it equals want, the
// original documents with the migration applied to their trees: same
// documents, keys, values and tags, whatever the positions and comments.
func verify(out []byte, want []*yaml.Node) error {
	got, err := yamledit.ParseDocuments(out)
	if err != nil {
		return fmt.Errorf("result does not parse: %w", err)
	}
	if len(got) != len(want) {
		return fmt.Errorf("result has %d documents, want %d", len(got), len(want))
	}
	for i := range got {
		if err := sameTree(got[i], want[i]); err != nil {
			return err
		}
	}
	return nil
}

// sameTree reports the first difference between two node trees, ignoring
// positions, styles and comments.
func sameTree(got, want *yaml.Node) error {
	switch {
	case got.Kind != want.Kind:
		return fmt.Errorf("line %d: node kind %v, want %v", got.Line, got.Kind, want.Kind)
	case got.Kind == yaml.ScalarNode && (got.Value != want.Value || got.ShortTag() != want.ShortTag()):
		return fmt.Errorf("line %d: %s %q, want %s %q", got.Line, got.ShortTag(), got.Value, want.ShortTag(), want.Value)
	case got.Kind == yaml.AliasNode && got.Value != want.Value:
		return fmt.Errorf("line %d: alias %q, want %q", got.Line, got.Value, want.Value)
	case got.Anchor != want.Anchor:
		return fmt.Errorf("line %d: anchor %q, want %q", got.Line, got.Anchor, want.Anchor)
	case len(got.Content) != len(want.Content):
		return fmt.Errorf("line %d: %d children, want %d", got.Line, len(got.Content), len(want.Content))
	}
	for i := range got.Content {
		if err := sameTree(got.Content[i], want.Content[i]); err != nil {
			return err
		}
	}
	return nil
}
