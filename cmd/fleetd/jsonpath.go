package main

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

// The subset of kubectl's JSONPath templates that `fleetd get -o
// jsonpath=…` and `--sort-by` take (k8s.io/client-go/util/jsonpath would
// bring client-go into the binary for a few hundred lines):
//
//	{.metadata.name}                 a field; $ or @ may lead, . alone is the object
//	{.items[0].metadata.name}        an index (negative counts from the end)
//	{.items[*].metadata.name}        every element (of a map: every value, by key)
//	{range .items[*]}…{end}          the body once per element, paths inside relative to it
//	{"\n"}                           a quoted string (Go escapes)
//	text                             copied as it is
//
// Several results of one path are printed separated by spaces, as kubectl
// does; a path that finds nothing prints nothing. Filters ([?()]),
// recursive descent (..), unions and slices are not supported and are
// refused when the template is parsed. Every value printed is made safe for
// a terminal (package termtext); the template's own text is the user's.

// maxTemplateBytes bounds a template.
const maxTemplateBytes = 4096

type jpNode struct {
	text  string   // literal output, when path and body are nil
	path  []jpStep // a path to print, or the range's path
	isRng bool
	body  []jpNode
}

type jpStep struct {
	field    string
	index    int
	isIndex  bool
	wildcard bool
}

// jsonPath is a parsed template.
type jsonPath struct{ nodes []jpNode }

func parseJSONPath(tmpl string) (*jsonPath, error) {
	if len(tmpl) > maxTemplateBytes {
		return nil, fmt.Errorf("template is %d bytes; at most %d", len(tmpl), maxTemplateBytes)
	}
	type frame struct {
		node  jpNode
		start int
	}
	stack := []frame{{}}
	top := func() *jpNode { return &stack[len(stack)-1].node }
	i := 0
	for i < len(tmpl) {
		open := strings.IndexByte(tmpl[i:], '{')
		if open < 0 {
			top().body = append(top().body, jpNode{text: tmpl[i:]})
			break
		}
		if open > 0 {
			top().body = append(top().body, jpNode{text: tmpl[i : i+open]})
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
			path, err := parsePath(strings.TrimSpace(expr[len("range"):]))
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: %w", tmpl, start+1, err)
			}
			stack = append(stack, frame{node: jpNode{isRng: true, path: path}, start: start})
		case strings.HasPrefix(expr, `"`):
			s, err := strconv.Unquote(expr)
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: bad quoted string %s", tmpl, start+1, expr)
			}
			top().body = append(top().body, jpNode{text: s})
		default:
			path, err := parsePath(expr)
			if err != nil {
				return nil, fmt.Errorf("template %q, at byte %d: %w", tmpl, start+1, err)
			}
			top().body = append(top().body, jpNode{path: path})
		}
	}
	if len(stack) > 1 {
		return nil, fmt.Errorf("template %q, at byte %d: {range} without {end}", tmpl, stack[len(stack)-1].start+1)
	}
	return &jsonPath{nodes: stack[0].node.body}, nil
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

// parsePath parses .a.b[0][*].c (with an optional leading $ or @).
func parsePath(p string) ([]jpStep, error) {
	orig := p
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), "@")
	if p == "" || p == "." {
		return []jpStep{}, nil
	}
	var steps []jpStep
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
			steps = append(steps, jpStep{field: field})
			p = p[n:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: [ without ]", orig)
			}
			inner := strings.TrimSpace(p[1:end])
			p = p[end+1:]
			if inner == "*" {
				steps = append(steps, jpStep{wildcard: true})
				continue
			}
			if q, err := strconv.Unquote(strings.ReplaceAll(inner, "'", `"`)); err == nil && inner != "" && (inner[0] == '\'' || inner[0] == '"') {
				steps = append(steps, jpStep{field: q})
				continue
			}
			n, err := strconv.Atoi(inner)
			if err != nil {
				return nil, fmt.Errorf("path %q: [%s]: want an index, * or a quoted key (filters, slices and unions are not supported)", orig, inner)
			}
			steps = append(steps, jpStep{index: n, isIndex: true})
		default:
			return nil, fmt.Errorf("path %q: want a field (.name) or an index ([0], [*]) at %q", orig, p)
		}
	}
	return steps, nil
}

// eval follows steps from v and returns every value found.
func eval(v any, steps []jpStep) []any {
	cur := []any{v}
	for _, st := range steps {
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

// execute writes the template for data (a JSON value decoded into any).
func (jp *jsonPath) execute(w io.Writer, data any) error {
	var b strings.Builder
	executeNodes(&b, jp.nodes, data)
	_, err := io.WriteString(w, b.String())
	return err
}

func executeNodes(b *strings.Builder, nodes []jpNode, cur any) {
	for _, n := range nodes {
		switch {
		case n.isRng:
			for _, v := range eval(cur, n.path) {
				executeNodes(b, n.body, v)
			}
		case n.path != nil:
			for i, v := range eval(cur, n.path) {
				if i > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(termtext.Line(valueString(v)))
			}
		default:
			b.WriteString(n.text)
		}
	}
}

// valueString prints a JSON value the way kubectl's JSONPath does: a
// string as it is, a number or bool as JSON, an object or array as JSON.
func valueString(v any) string {
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

// toGeneric turns a typed value into the maps and slices a template reads.
func toGeneric(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}
