package encode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/yamledit"
)

// Node returns obj's definition as a YAML mapping: apiVersion, kind,
// metadata and spec as the Go types order them, in block style, without
// the fields fleetd owns.
func Node(obj v1alpha1.Object) (*yaml.Node, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", obj.GetObjectKind(), obj.GetName(), err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("encode %s/%s: not a mapping (%v)", obj.GetObjectKind(), obj.GetName(), err)
	}
	root := doc.Content[0]
	drop(root, "")
	setScalar(root, "kind", obj.GetObjectKind())
	setScalar(root, "apiVersion", v1alpha1.GroupVersion)
	plain(root)
	return root, nil
}

// drop deletes the fleetd-owned fields, the resourceVersion (a store's
// version of the object, a write's precondition, never part of what a file
// or a diff says) and the nulls under the mapping at path.
func drop(m *yaml.Node, path string) {
	for i := 0; i+1 < len(m.Content); {
		k, v := m.Content[i], m.Content[i+1]
		field := k.Value
		if path != "" {
			field = path + "." + k.Value
		}
		if decode.FleetdOwned(field) || field == "metadata.resourceVersion" || v.ShortTag() == "!!null" {
			m.Content = slices.Delete(m.Content, i, i+2)
			continue
		}
		if v.Kind == yaml.MappingNode && path == "" {
			drop(v, field)
		}
		i += 2
	}
}

// setScalar sets key to a string value, adding it first when absent.
func setScalar(m *yaml.Node, key, value string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = str(value)
			return
		}
	}
	m.Content = append([]*yaml.Node{str(key), str(value)}, m.Content...)
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// plain clears the JSON styles (flow mappings, double-quoted strings) so
// the tree encodes in block style; a multi-line string becomes a literal
// block.
func plain(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.Contains(n.Value, "\n") {
		n.Style = yaml.LiteralStyle
	}
	for _, c := range n.Content {
		plain(c)
	}
}

// Marshal writes a mapping as one YAML document, two spaces per level.
func Marshal(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Canonical is obj's definition as fleetd reads it — decoded, so with its
// defaults — written out by [Node]: two objects are the same definition
// exactly when their Canonical texts are equal. An obj that does not decode
// is an error, a [decode.ErrorList] saying why (by field, without lines).
func Canonical(obj v1alpha1.Object) ([]byte, error) {
	_, _, target, err := normalize(obj)
	return target, err
}

// normalize returns obj's [Node], the object it decodes to and that
// object's [text].
func normalize(obj v1alpha1.Object) (*yaml.Node, v1alpha1.Object, []byte, error) {
	n, err := Node(obj)
	if err != nil {
		return nil, nil, nil, err
	}
	data, err := Marshal(n)
	if err != nil {
		return nil, nil, nil, err
	}
	objs, errs := decode.File("", data)
	for _, e := range errs {
		e.Line = 0
	}
	if len(errs) > 0 {
		return nil, nil, nil, errs
	}
	if len(objs) != 1 {
		return nil, nil, nil, fmt.Errorf("encode %s/%s: decodes to %d objects", obj.GetObjectKind(), obj.GetName(), len(objs))
	}
	target, err := text(objs[0])
	return n, objs[0], target, err
}

// text is a decoded object's [Node] as text.
func text(obj v1alpha1.Object) ([]byte, error) {
	n, err := Node(obj)
	if err != nil {
		return nil, err
	}
	return Marshal(n)
}

// Minimal returns the smallest definition of obj that keeps what existing
// (the mapping that defines it today, or nil) spells out: a field whose
// absence decodes to the same object is left out unless existing has it,
// an existing field whose value decodes the same is kept as written, and
// an existing field obj's [Node] lacks (a false or empty value) is kept
// when it changes nothing. The result may share nodes with existing.
func Minimal(obj v1alpha1.Object, existing *yaml.Node) (*yaml.Node, error) {
	want, _, err := minimal(obj, existing)
	return want, err
}

// minimal is Minimal, also returning how many bytes its trial decodes read.
func minimal(obj v1alpha1.Object, existing *yaml.Node) (*yaml.Node, int, error) {
	want, target, text, err := normalize(obj)
	if err != nil {
		return nil, 0, err
	}
	p := &pruner{root: want, target: target, size: len(text)}
	if existing != nil && existing.Kind != yaml.MappingNode {
		existing = nil
	}
	p.prune(want, existing)
	return want, p.spent, nil
}

// maxTrialBytes bounds the bytes the trial decodes of one Minimal read: a
// Member or Profile needs a few dozen trials of a few hundred bytes each;
// past the bound, what is left is written as obj has it (still the same
// object, perhaps with a default spelled out), so that a definition with
// thousands of changed labels costs about as much as a few decodes of it.
const maxTrialBytes = 1 << 20

// pruner trims a definition while it still decodes to the target object.
type pruner struct {
	root   *yaml.Node
	target v1alpha1.Object // obj as decoded
	size   int             // bytes of the last trial (an estimate of the next)
	spent  int             // bytes decoded in trials so far
}

// same reports whether root decodes, strictly, to the target object;
// false once maxTrialBytes are spent.
func (p *pruner) same() bool {
	if p.spent+p.size > maxTrialBytes {
		return false
	}
	data, err := Marshal(p.root)
	if err != nil {
		return false
	}
	p.size = len(data)
	if p.spent+len(data) > maxTrialBytes {
		return false
	}
	p.spent += len(data)
	objs, errs := decode.File("", data)
	// Both sides are decoded, so neither holds a field fleetd owns: the
	// decoder drops them.
	return len(errs) == 0 && len(objs) == 1 && reflect.DeepEqual(objs[0], p.target)
}

// prune works through mapping want against old (nil when old has no such
// mapping).
func (p *pruner) prune(want, old *yaml.Node) {
	oldIdx := index(old)
	for i := 0; i+1 < len(want.Content); {
		k, v := want.Content[i], want.Content[i+1]
		ov := oldIdx[k.Value]
		if ov == nil {
			// Not written today: leave it out if it is a default.
			want.Content = slices.Delete(want.Content, i, i+2)
			if p.same() {
				continue
			}
			want.Content = slices.Insert(want.Content, i, k, v)
			if v.Kind == yaml.MappingNode {
				p.prune(v, nil)
			}
			i += 2
			continue
		}
		// Written today: keep its spelling if it decodes the same.
		if yamledit.Equal(ov, v) {
			want.Content[i+1] = ov
			i += 2
			continue
		}
		want.Content[i+1] = ov
		if !p.same() {
			want.Content[i+1] = v
			if v.Kind == yaml.MappingNode && ov.Kind == yaml.MappingNode {
				p.prune(v, ov)
			}
		}
		i += 2
	}
	if old == nil {
		return
	}
	wantIdx := index(want)
	for i := 0; i+1 < len(old.Content); i += 2 {
		k, v := old.Content[i], old.Content[i+1]
		if wantIdx[k.Value] != nil || k.Kind != yaml.ScalarNode {
			continue
		}
		want.Content = append(want.Content, k, v)
		if !p.same() {
			want.Content = want.Content[:len(want.Content)-2]
		}
	}
}

// index maps a mapping's scalar keys to their first values; empty for
// nil or a non-mapping.
func index(m *yaml.Node) map[string]*yaml.Node {
	ix := map[string]*yaml.Node{}
	if m == nil || m.Kind != yaml.MappingNode {
		return ix
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && ix[k.Value] == nil {
			ix[k.Value] = m.Content[i+1]
		}
	}
	return ix
}
