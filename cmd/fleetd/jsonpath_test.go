package main

import (
	"strings"
	"testing"
)

func TestJSONPath_Execute(t *testing.T) {
	data, err := toGeneric(map[string]any{
		"kind": "List",
		"items": []map[string]any{
			{"metadata": map[string]any{"name": "a", "labels": map[string]string{"team": "x"}}, "status": map[string]any{"restarts": 4, "ok": true}},
			// A terminal escape in a value is not passed through.
			{"metadata": map[string]any{"name": "b\x1b[31m"}, "status": map[string]any{"restarts": 0}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ tmpl, want string }{
		{"{.kind}", "List"},
		{"{$.kind}", "List"},
		{"{.items[*].metadata.name}", "a b"},
		{"{.items[0].status.restarts}", "4"},
		{"{.items[-1].status.restarts}", "0"},
		{"{.items[0].status.ok}", "true"},
		{"{.items[0].metadata.labels}", `{"team":"x"}`},
		{"{.items[0].metadata['labels'].team}", "x"},
		{"{.items[5].metadata.name}", ""},
		{"{.nothing.here}", ""},
		{`{range .items[*]}{.metadata.name}{"\t"}{.status.restarts}{"\n"}{end}`, "a\t4\nb\t0\n"},
		{"names: {range .items[*]}[{@.metadata.name}]{end}.", "names: [a][b]."},
		{"{range .items[*]}{range .metadata.labels[*]}{.}{end}{end}", "x"},
		{"plain text", "plain text"},
	} {
		jp, err := parseJSONPath(tt.tmpl)
		if err != nil {
			t.Errorf("parse %q: %v", tt.tmpl, err)
			continue
		}
		var b strings.Builder
		if err := jp.execute(&b, data); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%q = %q, want %q", tt.tmpl, b.String(), tt.want)
		}
	}
}

func TestJSONPath_Errors(t *testing.T) {
	for tmpl, want := range map[string]string{
		"{.a":                     "at byte 1: { without }",
		"{range .items[*]}{.a}":   "{range} without {end}",
		"{.a}{end}":               "at byte 5: {end} without {range}",
		"{..name}":                "recursive descent",
		"{.items[?(@.x)]}":        "filters, slices and unions are not supported",
		"{.items[0:2]}":           "filters, slices and unions are not supported",
		`{"unterminated}`:         "{ without }",
		"{.a{.b}}":                "{ inside {…}",
		"{name}":                  "want a field",
		"{.a.}":                   "empty field name",
		strings.Repeat("x", 5000): "at most 4096",
	} {
		if _, err := parseJSONPath(tmpl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseJSONPath(%.30q) = %v, want an error with %q", tmpl, err, want)
		}
	}
}

func TestSortBy(t *testing.T) {
	type item struct {
		Name string         `json:"name"`
		N    any            `json:"n,omitempty"`
		T    string         `json:"t,omitempty"`
		M    map[string]any `json:"m,omitempty"`
	}
	items := []item{
		{Name: "ten", N: 10, T: "2026-12-01T10:00:05Z"},
		{Name: "two", N: 2, T: "2026-12-01T10:00:05.5Z"},
		{Name: "none"},
		{Name: "one", N: 1, T: "2026-12-01T09:00:00Z"},
	}
	names := func() string {
		var s []string
		for _, it := range items {
			s = append(s, it.Name)
		}
		return strings.Join(s, " ")
	}
	for expr, want := range map[string]string{
		".n":    "none one two ten", // by value, not as text ("10" < "2")
		"{.t}":  "none one ten two", // by time: .5 s after ten's
		".name": "none one ten two",
	} {
		if err := sortBy(items, expr); err != nil {
			t.Fatal(err)
		}
		if got := names(); got != want {
			t.Errorf("--sort-by %s: %s, want %s", expr, got, want)
		}
	}
	if err := sortBy(items, ".items[?(@.x)]"); err == nil {
		t.Error("--sort-by with a filter: no error")
	}
}
