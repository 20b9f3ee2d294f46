package yamledit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// errReplace is how a mapping says it cannot be edited entry by entry
// (flow style, a key that does not start its line): the entry holding it is
// then written anew.
var errReplace = errors.New("mapping cannot be edited in place")

// ParseDocuments reads every YAML document in data.
func ParseDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &doc)
	}
}

// Update returns doc, the text of one YAML document whose content is a
// mapping, edited so that it parses to want (a mapping node): an entry
// whose value is already equal ([Equal]) is left byte for byte, a changed
// single-line scalar is replaced as a token (a comment after it stays), a
// changed nested block mapping is edited entry by entry the same way, any
// other changed value is written anew with its key, an entry want lacks is
// deleted with its lines (and the comment lines right above it), and an
// entry only want has is inserted after the entry that precedes it in
// want. Everything else — comments, blank lines, key order, quoting, a
// leading "---" — stays as it was. The result is parsed again and compared
// with want before it is returned; any difference, and a document Update
// cannot edit in place (a flow-style root mapping, anchors it would have to
// move), is an error, and the caller keeps doc or writes want whole.
func Update(doc []byte, want *yaml.Node) ([]byte, error) {
	if want == nil || want.Kind != yaml.MappingNode {
		return nil, errors.New("want a mapping")
	}
	docs, err := ParseDocuments(doc)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 || len(docs[0].Content) != 1 || docs[0].Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want exactly one document holding a mapping")
	}
	root := docs[0].Content[0]
	if Equal(root, want) {
		return doc, nil
	}
	u := &updater{src: NewSource(doc), step: indentStep(root)}
	edits, err := u.mapping(root, want)
	if err != nil {
		return nil, err
	}
	out, err := u.src.Apply(edits)
	if err != nil {
		return nil, err
	}
	got, err := ParseDocuments(out)
	if err != nil {
		return nil, fmt.Errorf("edited document does not parse: %w", err)
	}
	if len(got) != 1 || len(got[0].Content) != 1 || !Equal(got[0].Content[0], want) {
		return nil, errors.New("edited document differs from what was wanted")
	}
	return out, nil
}

type updater struct {
	src  *Source
	step int // the document's indentation step, for entries written anew
}

// mapping returns the edits that turn block mapping old into want.
func (u *updater) mapping(old, want *yaml.Node) ([]Edit, error) {
	if old.Style&yaml.FlowStyle != 0 || len(old.Content) == 0 || old.Anchor != "" {
		return nil, errReplace
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(old.Content); i += 2 {
		k := old.Content[i]
		if k.Kind != yaml.ScalarNode || seen[k.Value] {
			return nil, errReplace
		}
		seen[k.Value] = true
		if _, _, err := u.src.indentOf(k); err != nil {
			return nil, errReplace
		}
	}
	var edits []Edit
	wantIdx, oldIdx := index(want), index(old)
	for i := 0; i+1 < len(old.Content); i += 2 {
		k, v := old.Content[i], old.Content[i+1]
		wk, wv := wantIdx.lookup(k.Value)
		switch {
		case wk == nil:
			start, end, err := u.extent(k, v, true)
			if err != nil {
				return nil, err
			}
			edits = append(edits, Edit{start: start, end: end})
			continue
		case Equal(v, wv):
			continue
		case v.Kind == yaml.ScalarNode && wv.Kind == yaml.ScalarNode:
			if e, ok := u.scalar(v, wv); ok {
				edits = append(edits, e)
				continue
			}
		case v.Kind == yaml.MappingNode && wv.Kind == yaml.MappingNode:
			sub, err := u.mapping(v, wv)
			if err == nil {
				edits = append(edits, sub...)
				continue
			}
			if !errors.Is(err, errReplace) {
				return nil, err
			}
		}
		start, end, err := u.extent(k, v, false)
		if err != nil {
			return nil, err
		}
		_, indent, _ := u.src.indentOf(k)
		text, err := u.entry(indent, wk, wv)
		if err != nil {
			return nil, err
		}
		edits = append(edits, Edit{start: start, end: end, text: text})
	}
	// New entries go after the old entry that precedes them in want, or
	// before the first old entry.
	_, indent, _ := u.src.indentOf(old.Content[0])
	at, _, _ := u.src.indentOf(old.Content[0])
	var pending strings.Builder
	flush := func() {
		if pending.Len() > 0 {
			text := pending.String()
			if at == len(u.src.data) && at > 0 && u.src.data[at-1] != '\n' {
				text = "\n" + text
			}
			edits = append(edits, Edit{start: at, end: at, text: text})
			pending.Reset()
		}
	}
	for i := 0; i+1 < len(want.Content); i += 2 {
		wk, wv := want.Content[i], want.Content[i+1]
		if k, v := oldIdx.lookup(wk.Value); k != nil {
			flush()
			_, end, err := u.extent(k, v, false)
			if err != nil {
				return nil, err
			}
			at = end
			continue
		}
		text, err := u.entry(indent, wk, wv)
		if err != nil {
			return nil, err
		}
		pending.WriteString(text)
	}
	flush()
	return edits, nil
}

// scalar returns the edit that replaces single-line scalar old by want's
// value, written in old's quoting style where that can hold it; false when
// either is not a one-line token.
func (u *updater) scalar(old, want *yaml.Node) (Edit, bool) {
	if old.Anchor != "" || want.Anchor != "" {
		return Edit{}, false
	}
	start, end, err := u.src.ScalarSpan(old)
	if err != nil {
		return Edit{}, false
	}
	n := *want
	n.Style = old.Style & (yaml.SingleQuotedStyle | yaml.DoubleQuotedStyle)
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	b, err := yaml.Marshal(&n)
	if err != nil {
		return Edit{}, false
	}
	text := strings.TrimSuffix(string(b), "\n")
	if strings.ContainsAny(text, "\n\r") || strings.HasPrefix(text, "|") || strings.HasPrefix(text, ">") {
		return Edit{}, false
	}
	return u.src.ReplaceToken(start, end, text), true
}

// entry writes "key: value" in block style, every line after indent, each
// level indented by the document's step.
func (u *updater) entry(indent string, k, v *yaml.Node) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(u.step)
	if err := enc.Encode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{block(k), block(v)}}); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	nl := "\n"
	if bytes.Contains(u.src.data, []byte("\r\n")) {
		nl = "\r\n"
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		if strings.TrimSpace(line) != "" {
			out.WriteString(indent)
		}
		out.WriteString(strings.TrimSuffix(line, "\n") + nl)
	}
	return out.String(), nil
}

// block returns a copy of n's tree in block style, without comments: plain
// or quoted scalars as the encoder sees fit, a multi-line string as a
// literal block.
func block(n *yaml.Node) *yaml.Node {
	c := *n
	c.Style = 0
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	if c.Kind == yaml.ScalarNode && c.ShortTag() == "!!str" && strings.Contains(c.Value, "\n") {
		c.Style = yaml.LiteralStyle
	}
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = block(x)
	}
	return &c
}

// extent returns the byte range of a block mapping entry's whole lines:
// from the start of the key's line (and, when withHead, the comment lines
// right above it at the key's indentation) to the end of the last line of
// its value — every later line indented deeper than the key, or as deep for
// the items of a sequence value — leaving out blank and comment lines after
// the value's last line.
func (u *updater) extent(k, v *yaml.Node, withHead bool) (start, end int, err error) {
	start, indent, err := u.src.indentOf(k)
	if err != nil {
		return 0, 0, errReplace
	}
	data := u.src.data
	col := len(indent)
	if withHead {
		for start > 0 {
			prev := u.src.lineStart(start - 1)
			line := data[prev:start]
			trimmed := bytes.TrimLeft(line, " ")
			if len(line)-len(trimmed) != col || !bytes.HasPrefix(trimmed, []byte("#")) {
				break
			}
			start = prev
		}
	}
	keyOff, err := u.src.Offset(k)
	if err != nil {
		return 0, 0, err
	}
	end, _ = u.src.lineEnd(keyOff)
	last := lastLine(v)
	for pos := end; pos < len(data); {
		next, _ := u.src.lineEnd(pos)
		line := data[pos:next]
		trimmed := bytes.TrimLeft(line, " ")
		ind := len(line) - len(trimmed)
		content := bytes.TrimRight(trimmed, " \t\r\n")
		lineNo := lineNumber(u.src, pos)
		switch {
		case lineNo <= last:
			end = next // inside the value as the parser saw it
		case len(content) == 0:
		case content[0] == '#':
			if ind <= col {
				return start, end, nil
			}
		case ind > col:
			end = next
		case ind == col && v.Kind == yaml.SequenceNode && content[0] == '-' &&
			(len(content) == 1 || content[1] == ' ' || content[1] == '\t'):
			end = next
		default:
			return start, end, nil
		}
		pos = next
	}
	return start, end, nil
}

// lastLine is the last line any node of n's tree starts on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

// lineNumber is the 1-based line holding offset off.
func lineNumber(s *Source, off int) int {
	i, found := slices.BinarySearch(s.lineStarts, off)
	if found {
		return i + 1
	}
	return i
}

// indentStep guesses how deep the document indents a nested block
// mapping; 2 when it has none.
func indentStep(n *yaml.Node) int {
	if n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.MappingNode && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Line > k.Line {
				if d := v.Content[0].Column - k.Column; d > 0 && d <= 8 {
					return d
				}
			}
			if d := indentStep(v); d != 2 {
				return d
			}
		}
	}
	return 2
}

// Lookup returns the first entry of mapping m whose key is the scalar key,
// or nils.
func Lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if c := m.Content[i]; c.Kind == yaml.ScalarNode && c.Value == key {
			return c, m.Content[i+1]
		}
	}
	return nil, nil
}

// keyIndex finds a mapping's entries by key without a scan each time, so
// that a mapping with many keys (labels, say) costs linear time, not
// quadratic.
type keyIndex struct {
	m   *yaml.Node
	pos map[string]int // key → index of its first entry in m.Content
}

func index(m *yaml.Node) keyIndex {
	ix := keyIndex{m: m, pos: make(map[string]int, len(m.Content)/2)}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode {
			if _, dup := ix.pos[k.Value]; !dup {
				ix.pos[k.Value] = i
			}
		}
	}
	return ix
}

func (ix keyIndex) lookup(key string) (k, v *yaml.Node) {
	i, ok := ix.pos[key]
	if !ok {
		return nil, nil
	}
	return ix.m.Content[i], ix.m.Content[i+1]
}

// Equal reports whether two node trees hold the same data: the same kinds,
// scalar values and tags, sequences in the same order, and mappings with
// the same keys, in any order, holding equal values. Positions, styles,
// comments and anchors' names are ignored; an alias is compared by the
// anchor it names.
func Equal(a, b *yaml.Node) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.Kind == yaml.DocumentNode || b.Kind == yaml.DocumentNode:
		return a.Kind == b.Kind && len(a.Content) == len(b.Content) && (len(a.Content) == 0 || Equal(a.Content[0], b.Content[0]))
	case a.Kind != b.Kind:
		return false
	}
	switch a.Kind {
	case yaml.ScalarNode:
		return a.Value == b.Value && a.ShortTag() == b.ShortTag()
	case yaml.AliasNode:
		return a.Value == b.Value
	case yaml.SequenceNode:
		if len(a.Content) != len(b.Content) {
			return false
		}
		for i := range a.Content {
			if !Equal(a.Content[i], b.Content[i]) {
				return false
			}
		}
		return true
	case yaml.MappingNode:
		if len(a.Content) != len(b.Content) {
			return false
		}
		bIdx := index(b)
		for i := 0; i+1 < len(a.Content); i += 2 {
			k, v := a.Content[i], a.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return false
			}
			bk, bv := bIdx.lookup(k.Value)
			if bk == nil || bk.ShortTag() != k.ShortTag() || !Equal(v, bv) {
				return false
			}
		}
		return true
	}
	return false
}
