package yamledit

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Source is a file's original bytes with an index of line starts, so that
// yaml.v3 positions (1-based line, 1-based column counted in characters)
// can be turned into byte offsets.
type Source struct {
	data       []byte
	lineStarts []int
}

// NewSource indexes data for editing.
func NewSource(data []byte) *Source {
	s := &Source{data: data, lineStarts: []int{0}}
	for i, b := range data {
		if b == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	return s
}

// NodeError is a problem with how one node is written in the source.
type NodeError struct {
	Node *yaml.Node
	Msg  string
}

func (e *NodeError) Error() string { return e.Msg }

func errAt(n *yaml.Node, format string, args ...any) error {
	return &NodeError{Node: n, Msg: fmt.Sprintf(format, args...)}
}

// Edit replaces data[start:end] with text; [Source] methods make them and
// [Source.Apply] carries them out.
type Edit struct {
	start, end int
	text       string
}

// Offset returns the byte offset of node n's position.
func (s *Source) Offset(n *yaml.Node) (int, error) {
	if n.Line < 1 || n.Line > len(s.lineStarts) {
		return 0, errAt(n, "position %d:%d is outside the file", n.Line, n.Column)
	}
	off := s.lineStarts[n.Line-1]
	for range n.Column - 1 {
		if off >= len(s.data) || s.data[off] == '\n' {
			return 0, errAt(n, "position %d:%d is past the end of its line", n.Line, n.Column)
		}
		_, size := utf8.DecodeRune(s.data[off:])
		off += size
	}
	return off, nil
}

// lineStart returns the offset of the first byte of the line holding off.
func (s *Source) lineStart(off int) int {
	i, found := slices.BinarySearch(s.lineStarts, off)
	if found {
		return s.lineStarts[i]
	}
	return s.lineStarts[i-1]
}

// ScalarSpan returns the byte range of a single-line scalar's token as
// written: plain, 'single' or "double" quoted without escapes.
func (s *Source) ScalarSpan(n *yaml.Node) (start, end int, err error) {
	if n.Kind != yaml.ScalarNode {
		return 0, 0, errAt(n, "want a scalar")
	}
	start, err = s.Offset(n)
	if err != nil {
		return 0, 0, err
	}
	token := n.Value
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		token = `"` + n.Value + `"`
	case n.Style&yaml.SingleQuotedStyle != 0:
		token = `'` + n.Value + `'`
	case n.Style != 0 && n.Style != yaml.FlowStyle:
		return 0, 0, errAt(n, "%q is written as a block scalar", n.Value)
	}
	if bytes.ContainsAny([]byte(token), "\r\n") || !bytes.HasPrefix(s.data[start:], []byte(token)) {
		return 0, 0, errAt(n, "%q is not written on one line without escapes", n.Value)
	}
	return start, start + len(token), nil
}

// ReplaceToken returns an edit that replaces the token data[start:end]
// with text and, when a comment follows on the same line (after the
// token, or after the token and its key colon), keeps that comment in its
// column.
func (s *Source) ReplaceToken(start, end int, text string) Edit {
	e := Edit{start: start, end: end, text: text}
	pos := end
	if pos < len(s.data) && s.data[pos] == ':' {
		pos++
	}
	spaces := 0
	for pos+spaces < len(s.data) && s.data[pos+spaces] == ' ' {
		spaces++
	}
	if spaces == 0 || pos+spaces >= len(s.data) || s.data[pos+spaces] != '#' {
		return e
	}
	e.text += string(s.data[end:pos]) // the colon, if any
	e.end = pos
	// A shorter token is padded; a longer one takes spaces before the
	// comment, leaving at least one.
	switch grow := utf8.RuneCountInString(text) - utf8.RuneCount(s.data[start:end]); {
	case grow < 0:
		e.text += strings.Repeat(" ", -grow)
	case grow > 0:
		e.end += min(grow, spaces-1)
	}
	return e
}

// valueEnd returns the offset just past the value of a key/value entry.
func (s *Source) valueEnd(key, value *yaml.Node) (int, error) {
	switch {
	case value.Kind == yaml.ScalarNode && value.Value == "" && value.Style == 0:
		// An empty value ("mcpTransport:") ends with its key.
		_, end, err := s.ScalarSpan(key)
		return end, err
	case value.Kind == yaml.ScalarNode:
		_, end, err := s.ScalarSpan(value)
		return end, err
	case value.Kind != yaml.MappingNode:
		return 0, errAt(value, "unexpected value")
	}
	end, err := s.Offset(value)
	if err != nil {
		return 0, err
	}
	flow := value.Style&yaml.FlowStyle != 0
	if flow {
		end++ // past "{"
	}
	for i := 0; i+1 < len(value.Content); i += 2 {
		e, err := s.valueEnd(value.Content[i], value.Content[i+1])
		if err != nil {
			return 0, err
		}
		end = max(end, e)
	}
	if !flow {
		return end, nil
	}
	// Skip separators and comments up to the closing brace.
	for i := end; i < len(s.data); i++ {
		switch s.data[i] {
		case ' ', '\t', '\r', '\n', ',':
		case '#':
			for i < len(s.data) && s.data[i] != '\n' {
				i++
			}
		case '}':
			return i + 1, nil
		default:
			return 0, errAt(value, "cannot find the end of the flow mapping")
		}
	}
	return 0, errAt(value, "flow mapping is not closed")
}

// indentOf returns the whitespace before key on its line, and an error
// when the key does not start its line.
func (s *Source) indentOf(key *yaml.Node) (lineStart int, indent string, err error) {
	off, err := s.Offset(key)
	if err != nil {
		return 0, "", err
	}
	ls := s.lineStart(off)
	prefix := s.data[ls:off]
	if len(bytes.Trim(prefix, " ")) > 0 {
		return 0, "", errAt(key, "%s does not start its line", key.Value)
	}
	return ls, string(prefix), nil
}

// lineEnd returns the offset just past the newline ending the line that
// holds off (len(data) on the last line without one) and that newline.
func (s *Source) lineEnd(off int) (int, string) {
	i := bytes.IndexByte(s.data[off:], '\n')
	if i < 0 {
		return len(s.data), ""
	}
	nl := off + i
	if nl > 0 && s.data[nl-1] == '\r' {
		return nl + 1, "\r\n"
	}
	return nl + 1, "\n"
}

// InsertAfter returns an edit that adds the entry "k: v" to mapping parent
// right after the entry key/value.
func (s *Source) InsertAfter(parent, key, value *yaml.Node, entry string) (Edit, error) {
	end, err := s.valueEnd(key, value)
	if err != nil {
		return Edit{}, err
	}
	if parent.Style&yaml.FlowStyle != 0 {
		return Edit{start: end, end: end, text: ", " + entry}, nil
	}
	_, indent, err := s.indentOf(key)
	if err != nil {
		return Edit{}, err
	}
	at, nl := s.lineEnd(end)
	if nl == "" {
		return Edit{start: at, end: at, text: "\n" + indent + entry + "\n"}, nil
	}
	return Edit{start: at, end: at, text: indent + entry + nl}, nil
}

// DeleteEntry returns an edit that removes the entry key/value from
// mapping parent: its whole lines in block style, the entry and one comma
// in flow style.
func (s *Source) DeleteEntry(parent, key, value *yaml.Node) (Edit, error) {
	end, err := s.valueEnd(key, value)
	if err != nil {
		return Edit{}, err
	}
	if parent.Style&yaml.FlowStyle == 0 {
		start, _, err := s.indentOf(key)
		if err != nil {
			return Edit{}, err
		}
		stop, _ := s.lineEnd(end)
		return Edit{start: start, end: stop}, nil
	}
	start, err := s.Offset(key)
	if err != nil {
		return Edit{}, err
	}
	// Take the comma after the entry, or else the one before it.
	i := end
	for i < len(s.data) && (s.data[i] == ' ' || s.data[i] == '\t') {
		i++
	}
	if i < len(s.data) && s.data[i] == ',' {
		i++
		for i < len(s.data) && (s.data[i] == ' ' || s.data[i] == '\t') {
			i++
		}
		return Edit{start: start, end: i}, nil
	}
	j := start
	for j > 0 && bytes.IndexByte([]byte(" \t\r\n"), s.data[j-1]) >= 0 {
		j--
	}
	if j > 0 && s.data[j-1] == ',' {
		return Edit{start: j - 1, end: end}, nil
	}
	return Edit{start: start, end: end}, nil
}

// Apply returns the data with every edit made, or an error when two edits
// overlap. Edits at the same offset are made in the order given, an
// insertion (an empty range) before a replacement starting there.
func (s *Source) Apply(edits []Edit) ([]byte, error) {
	sorted := slices.Clone(edits)
	slices.SortStableFunc(sorted, func(a, b Edit) int { return cmp.Or(a.start-b.start, a.end-b.end) })
	var out bytes.Buffer
	pos := 0
	for _, e := range sorted {
		if e.start < pos {
			return nil, fmt.Errorf("overlapping edits at byte %d", e.start)
		}
		out.Write(s.data[pos:e.start])
		out.WriteString(e.text)
		pos = e.end
	}
	out.Write(s.data[pos:])
	return out.Bytes(), nil
}
