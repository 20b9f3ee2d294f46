package jsonpath

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// MaxTemplateBytes bounds a template.
const MaxTemplateBytes = 4096

// node is one piece of a template: literal text, a path to print, or a
// range over a path with a body.
type node struct {
	text  string // literal output, when path and body are nil
	path  Path   // a path to print, or the range's path
	isRng bool
	body  []node
}

type step struct {
	field    string
	index    int
	isIndex  bool
	wildcard bool
}

// Template is a parsed template.
type Template struct{ nodes []node }

// Parse parses a template. Its errors say what is wrong and at which byte
// (1-based).
func Parse(tmpl string) (*Template, error) {
	if len(tmpl) > MaxTemplateBytes {
		return nil, fmt.Errorf("template is %d bytes; at most %d", len(tmpl), MaxTemplateBytes)
	}
	type frame struct {
		node  node
		start int
	}
	stack := []frame{{}}
	top := func() *node { return &stack[len(stack)-1].node }
	i := 0
	for i < len(tmpl) {
		open := strings.IndexByte(tmpl[i:], '{')
		if open < 0 {
			top().body = append(top().body, node{text: tmpl[i:]})
			break
		}
		if open > 0 {
			top().body = append(top().body, node{text: tmpl[i : i+open]})
		}
		start := i + open
		end, err := closingBrace(tmpl, start)
		if err != nil {
			return nil, err
		}
		expr := strings.TrimSpace(tmpl[start+1 : end])
		i = end + 1
		switch {
		case expr == "end":
			if len(stack) == 1 {
				return nil, fmt.Errorf("template %q, at byte %d: {end} without {range}", tmpl, start+1)
			}
			n := stack[len(stack)-1].node
			stack = stack[:len(stack)-1]
			top().body = append(top().body, n)
		case strings.HasPrefix(expr, "range ") || strings.HasPrefix(expr, "range\t"):
			path, err := ParsePath(strings.TrimSpace(expr[len("range"):]))
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: %w", tmpl, start+1, err)
			}
			stack = append(stack, frame{node: node{isRng: true, path: path}, start: start})
		case strings.HasPrefix(expr, `"`):
			s, err := strconv.Unquote(expr)
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: bad quoted string %s", tmpl, start+1, expr)
			}
			top().body = append(top().body, node{text: s})
		default:
			path, err := ParsePath(expr)
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: %w", tmpl, start+1, err)
			}
			top().body = append(top().body, node{path: path})
		}
	}
	if len(stack) > 1 {
		return nil, fmt.Errorf("template %q, at byte %d: {range} without {end}", tmpl, stack[len(stack)-1].start+1)
	}
	return &Template{nodes: stack[0].node.body}, nil
}

// closingBrace finds the } that closes the { at open, skipping quoted
// strings.
func closingBrace(s string, open int) (int, error) {
	inQuote := false
	for i := open + 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i, nil
		case !inQuote && c == '{':
			return 0, fmt.Errorf("template %q, at byte %d: { inside {…}", s, i+1)
		}
	}
	return 0, fmt.Errorf("template %q, at byte %d: { without }", s, open+1)
}

// Path is a parsed path: .a.b[0][*].c.
type Path []step

// ParsePath parses .a.b[0][*].c (with an optional leading $ or @); "" and
// "." are the value itself.
func ParsePath(p string) (Path, error) {
	orig := p
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), "@")
	if p == "" || p == "." {
		return Path{}, nil
	}
	var steps Path
	for p != "" {
		switch {
		case strings.HasPrefix(p, ".."):
			return nil, fmt.Errorf("path %q: recursive descent (..) is not supported", orig)
		case p[0] == '.':
			n := 1
			for n < len(p) && p[n] != '.' && p[n] != '[' {
				n++
			}
			field := p[1:n]
			if field == "" {
				return nil, fmt.Errorf("path %q: empty field name", orig)
			}
			steps = append(steps, step{field: field})
			p = p[n:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: [ without ]", orig)
			}
			inner := strings.TrimSpace(p[1:end])
			p = p[end+1:]
			if inner == "*" {
				steps = append(steps, step{wildcard: true})
				continue
			}
			if q, err := strconv.Unquote(strings.ReplaceAll(inner, "'", `"`)); err == nil && inner != "" && (inner[0] == '\'' || inner[0] == '"') {
				steps = append(steps, step{field: q})
				continue
			}
			n, err := strconv.Atoi(inner)
			if err != nil {
				return nil, fmt.Errorf("path %q: [%s]: want an index, * or a quoted key (filters, slices and unions are not supported)", orig, inner)
			}
			steps = append(steps, step{index: n, isIndex: true})
		default:
			return nil, fmt.Errorf("path %q: want a field (.name) or an index ([0], [*]) at %q", orig, p)
		}
	}
	return steps, nil
}

// Find follows the path from v and returns every value found.
func (p Path) Find(v any) []any {
	cur := []any{v}
	for _, st := range p {
		var next []any
		for _, c := range cur {
			switch x := c.(type) {
			case map[string]any:
				switch {
				case st.wildcard:
					for _, k := range slices.Sorted(maps.Keys(x)) {
						next = append(next, x[k])
					}
				case !st.isIndex:
					if f, ok := x[st.field]; ok {
						next = append(next, f)
					}
				}
			case []any:
				switch {
				case st.wildcard:
					next = append(next, x...)
				case st.isIndex:
					i := st.index
					if i < 0 {
						i += len(x)
					}
					if i >= 0 && i < len(x) {
						next = append(next, x[i])
					}
				}
			}
		}
		cur = next
	}
	return cur
}

// Execute writes the template for data (a JSON value decoded into any).
func (t *Template) Execute(w io.Writer, data any) error {
	var b strings.Builder
	execute(&b, t.nodes, data)
	_, err := io.WriteString(w, b.String())
	return err
}

func execute(b *strings.Builder, nodes []node, cur any) {
	for _, n := range nodes {
		switch {
		case n.isRng:
			for _, v := range n.path.Find(cur) {
				execute(b, n.body, v)
			}
		case n.path != nil:
			for i, v := range n.path.Find(cur) {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(termtext.Line(ValueString(v)))
			}
		default:
			b.WriteString(n.text)
		}
	}
}

// ValueString prints a JSON value the way kubectl's JSONPath does: a
// string as it is, a number or bool as JSON, an object or array as JSON.
func ValueString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
