package printers

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/internal/cli/jsonpath"
	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// Format is a parsed -o value.
type Format struct {
	name string // "", wide, yaml, json, name, jsonpath or go-template
	jp   *jsonpath.Template
	tmpl *template.Template
}

// Formats names every -o value [ParseFormat] takes.
const Formats = "wide, yaml, json, name, jsonpath=TEMPLATE or go-template=TEMPLATE"

// ParseFormat parses -o: a plain format, or jsonpath= / go-template= and a
// template (kubectl also takes the template in single quotes).
func ParseFormat(s string) (Format, error) {
	kind, tmpl, hasTmpl := strings.Cut(s, "=")
	if hasTmpl {
		if len(tmpl) >= 2 && tmpl[0] == '\'' && tmpl[len(tmpl)-1] == '\'' {
			tmpl = tmpl[1 : len(tmpl)-1]
		}
		switch kind {
		case "jsonpath":
			jp, err := jsonpath.Parse(tmpl)
			if err != nil {
				return Format{}, err
			}
			return Format{name: kind, jp: jp}, nil
		case "go-template":
			if len(tmpl) > jsonpath.MaxTemplateBytes {
				return Format{}, fmt.Errorf("template is %d bytes; at most %d", len(tmpl), jsonpath.MaxTemplateBytes)
			}
			t, err := template.New("output").Option("missingkey=zero").Parse(tmpl)
			if err != nil {
				return Format{}, err
			}
			return Format{name: kind, tmpl: t}, nil
		}
		return Format{}, fmt.Errorf("unknown output format %q; want %s", s, Formats)
	}
	switch s {
	case "", "wide", "yaml", "json", "name":
		return Format{name: s}, nil
	case "jsonpath", "go-template":
		return Format{}, fmt.Errorf("-o %s needs a template: -o %s='{.metadata.name}'", s, s)
	}
	return Format{}, fmt.Errorf("unknown output format %q; want %s", s, Formats)
}

// table reports whether the format is a table (the default or wide).
func (f Format) table() bool { return f.name == "" || f.name == "wide" }

// wide reports whether a table has -o wide's extra columns.
func (f Format) wide() bool { return f.name == "wide" }

// structured reports whether the format is JSON or YAML.
func (f Format) structured() bool { return f.name == "json" || f.name == "yaml" }

// templated reports whether the format runs a template.
func (f Format) templated() bool { return f.jp != nil || f.tmpl != nil }

// executeTemplate runs the jsonpath or go-template on v (an object, or a
// List of them).
func (f Format) executeTemplate(w io.Writer, v any) error {
	data, err := generic(v)
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

// writeStructured prints v as indented JSON or as YAML (f is json or
// yaml), with what a terminal would obey escaped (the YAML writer escapes
// what is left but the bidi controls).
func (f Format) writeStructured(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = termtext.JSON(b)
	if f.name == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// list is the JSON, YAML and template view of several objects: kubectl's
// List (apiVersion v1, kind List), or a KINDList of fleetd's group.
type list[T any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []T    `json:"items"`
}

// kubectlList is the List of items, which `fleetd apply -f` takes back.
func kubectlList[T any](items []T) list[T] {
	if items == nil {
		items = []T{}
	}
	return list[T]{APIVersion: "v1", Kind: "List", Items: items}
}

// generic turns a typed value into the maps and slices a template reads.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}
