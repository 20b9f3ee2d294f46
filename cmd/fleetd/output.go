package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/template"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/internal/cli/jsonpath"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// outputFormat is a parsed -o value.
type outputFormat struct {
	name string // "", wide, yaml, json, name, jsonpath or go-template
	jp   *jsonpath.Template
	tmpl *template.Template
}

const outputFormats = "wide, yaml, json, name, jsonpath=TEMPLATE or go-template=TEMPLATE"

// parseOutput parses -o: a plain format, or jsonpath= / go-template= and a
// template (kubectl also takes the template in single quotes).
func parseOutput(s string) (outputFormat, error) {
	kind, tmpl, hasTmpl := strings.Cut(s, "=")
	if hasTmpl {
		if len(tmpl) >= 2 && tmpl[0] == '\'' && tmpl[len(tmpl)-1] == '\'' {
			tmpl = tmpl[1 : len(tmpl)-1]
		}
		switch kind {
		case "jsonpath":
			jp, err := jsonpath.Parse(tmpl)
			if err != nil {
				return outputFormat{}, err
			}
			return outputFormat{name: kind, jp: jp}, nil
		case "go-template":
			if len(tmpl) > jsonpath.MaxTemplateBytes {
				return outputFormat{}, fmt.Errorf("template is %d bytes; at most %d", len(tmpl), jsonpath.MaxTemplateBytes)
			}
			t, err := template.New("output").Option("missingkey=zero").Parse(tmpl)
			if err != nil {
				return outputFormat{}, err
			}
			return outputFormat{name: kind, tmpl: t}, nil
		}
		return outputFormat{}, fmt.Errorf("unknown output format %q; want %s", s, outputFormats)
	}
	switch s {
	case "", "wide", "yaml", "json", "name":
		return outputFormat{name: s}, nil
	case "jsonpath", "go-template":
		return outputFormat{}, fmt.Errorf("-o %s needs a template: -o %s='{.metadata.name}'", s, s)
	}
	return outputFormat{}, fmt.Errorf("unknown output format %q; want %s", s, outputFormats)
}

// templated reports whether the format runs a template.
func (f outputFormat) templated() bool { return f.jp != nil || f.tmpl != nil }

// executeTemplate runs the jsonpath or go-template on v (an object, or a
// List of them).
func (f outputFormat) executeTemplate(w io.Writer, v any) error {
	data, err := toGeneric(v)
	if err != nil {
		return err
	}
	if f.jp != nil {
		return f.jp.Execute(w, data)
	}
	var b strings.Builder
	if err := f.tmpl.Execute(&b, data); err != nil {
		return fmt.Errorf("-o go-template: %w", err)
	}
	// What a template prints is the server's data: made safe as a whole
	// (tabs and newlines are kept; they are the template's layout).
	_, err = io.WriteString(w, termtext.Text(b.String()))
	return err
}

// writeStructured prints v as indented JSON or as YAML, with what a
// terminal would obey escaped (the YAML writer escapes what is left but
// the bidi controls).
func writeStructured(w io.Writer, v any, output string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = termtext.JSON(b)
	if output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// listOf is the List a template sees for several objects, as kubectl's.
func listOf[T any](items []T) map[string]any {
	if items == nil {
		items = []T{}
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
}

// sortBy orders items by the value a JSONPath expression (".status.restarts"
// or "{.metadata.creationTimestamp}") finds in each: numbers by value,
// everything else by its text; an item without the field sorts first.
// The sort is stable, so items with the same value keep their name order.
func sortBy[T any](items []T, expr string) error {
	if expr == "" {
		return nil
	}
	e := strings.TrimSpace(expr)
	if strings.HasPrefix(e, "{") && strings.HasSuffix(e, "}") {
		e = e[1 : len(e)-1]
	}
	path, err := jsonpath.ParsePath(e)
	if err != nil {
		return fmt.Errorf("--sort-by %q: %w", expr, err)
	}
	keys := make([]any, len(items))
	for i, it := range items {
		g, err := toGeneric(it)
		if err != nil {
			return err
		}
		if vs := path.Find(g); len(vs) > 0 {
			keys[i] = vs[0]
		}
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lessValue(keys[idx[a]], keys[idx[b]]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

func lessValue(a, b any) bool {
	switch {
	case a == nil:
		return b != nil
	case b == nil:
		return false
	}
	fa, aNum := a.(float64)
	fb, bNum := b.(float64)
	if aNum && bNum {
		return fa < fb
	}
	sa, sb := jsonpath.ValueString(a), jsonpath.ValueString(b)
	// Timestamps sort by time: RFC 3339 text with a fraction of a second
	// does not sort as text ("05.5Z" < "05Z").
	if ta, err := time.Parse(time.RFC3339Nano, sa); err == nil {
		if tb, err := time.Parse(time.RFC3339Nano, sb); err == nil {
			return ta.Before(tb)
		}
	}
	return sa < sb
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
