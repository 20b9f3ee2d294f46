package migrate

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// source is a file's original bytes with an index of line starts, so that
// yaml.v3 positions (1-based line, 1-based column counted in characters)
// can be turned into byte offsets.
type source struct {
	data       []byte
	lineStarts []int
}

func newSource(data []byte) *source {
	s := &source{data: data, lineStarts: []int{0}}
	for i, b := range data {
		if b == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	return s
}

// nodeError is a problem with how one node is written in the source.
type nodeError struct {
	node *yaml.Node
	msg  string
}

func (e *nodeError) Error() string { return e.msg }

func errAt(n *yaml.Node, format string, args ...any) error {
	return &nodeError{node: n, msg: fmt.Sprintf(format, args...)}
}

// edit replaces data[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// offset returns the byte offset of node n's position.
func (s *source) offset(n *yaml.Node) (int, error) {
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
func (s *source) lineStart(off int) int {
	i, found := slices.BinarySearch(s.lineStarts, off)
	if found {
		return s.lineStarts[i]
	}
	return s.lineStarts[i-1]
}

// scalarSpan returns the byte range of a single-line scalar's token as
// written: plain, 'single' or "double" quoted without escapes.
func (s *source) scalarSpan(n *yaml.Node) (start, end int, err error) {
	if n.Kind != yaml.ScalarNode {
		return 0, 0, errAt(n, "want a scalar")
	}
	start, err = s.offset(n)
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

// replaceToken returns an edit that replaces the token data[start:end]
// with text and, when a comment follows on the same line (after the
// token, or after the token and its key colon), keeps that comment in its
// column.
func (s *source) replaceToken(start, end int, text string) edit {
	e := edit{start: start, end: end, text: text}
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
	// The migration only ever shortens tokens (mcpTransport → mcpTarget,
	// the legacy mode → tenant), so padding is all it takes.
	if shrink := utf8.RuneCount(s.data[start:end]) - utf8.RuneCountInString(text); shrink > 0 {
		e.text += strings.Repeat(" ", shrink)
	}
	return e
}

// valueEnd returns the offset just past the value of a key/value entry.
func (s *source) valueEnd(key, value *yaml.Node) (int, error) {
	switch {
	case value.Kind == yaml.ScalarNode && value.Value == "" && value.Style == 0:
		// An empty value ("mcpTransport:") ends with its key.
		_, end, err := s.scalarSpan(key)
		return end, err
	case value.Kind == yaml.ScalarNode:
		_, end, err := s.scalarSpan(value)
		return end, err
	case value.Kind != yaml.MappingNode:
		return 0, errAt(value, "unexpected value")
	}
	end, err := s.offset(value)
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
func (s *source) indentOf(key *yaml.Node) (lineStart int, indent string, err error) {
	off, err := s.offset(key)
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
func (s *source) lineEnd(off int) (int, string) {
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

// insertAfter returns an edit that adds the entry "k: v" to mapping parent
// right after the entry key/value.
func (s *source) insertAfter(parent, key, value *yaml.Node, entry string) (edit, error) {
	end, err := s.valueEnd(key, value)
	if err != nil {
		return edit{}, err
	}
	if parent.Style&yaml.FlowStyle != 0 {
		return edit{start: end, end: end, text: ", " + entry}, nil
	}
	_, indent, err := s.indentOf(key)
	if err != nil {
		return edit{}, err
	}
	at, nl := s.lineEnd(end)
	if nl == "" {
		return edit{start: at, end: at, text: "\n" + indent + entry + "\n"}, nil
	}
	return edit{start: at, end: at, text: indent + entry + nl}, nil
}

// deleteEntry returns an edit that removes the entry key/value from
// mapping parent: its whole lines in block style, the entry and one comma
// in flow style.
func (s *source) deleteEntry(parent, key, value *yaml.Node) (edit, error) {
	end, err := s.valueEnd(key, value)
	if err != nil {
		return edit{}, err
	}
	if parent.Style&yaml.FlowStyle == 0 {
		start, _, err := s.indentOf(key)
		if err != nil {
			return edit{}, err
		}
		stop, _ := s.lineEnd(end)
		return edit{start: start, end: stop}, nil
	}
	start, err := s.offset(key)
	if err != nil {
		return edit{}, err
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
		return edit{start: start, end: i}, nil
	}
	j := start
	for j > 0 && bytes.IndexByte([]byte(" \t\r\n"), s.data[j-1]) >= 0 {
		j--
	}
	if j > 0 && s.data[j-1] == ',' {
		return edit{start: j - 1, end: end}, nil
	}
	return edit{start: start, end: end}, nil
}

// apply returns the data with every edit made, or an error when two edits
// overlap.
func (s *source) apply(edits []edit) ([]byte, error) {
	sorted := slices.Clone(edits)
	slices.SortFunc(sorted, func(a, b edit) int { return a.start - b.start })
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
