package jsonpath

import (
	"encoding/json"
	"strings"
	"testing"
)

// generic is v as a template sees it: JSON decoded into any.
func generic(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTemplate_Execute(t *testing.T) {
	data := generic(t, map[string]any{
		"kind": "List",
		"items": []map[string]any{
			{"metadata": map[string]any{"name": "a", "labels": map[string]string{"team": "x"}}, "status": map[string]any{"restarts": 4, "ok": true}},
			// A terminal escape in a value is not passed through.
			{"metadata": map[string]any{"name": "b\x1b[31m"}, "status": map[string]any{"restarts": 0}},
		},
	})
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
		tmpl, err := Parse(tt.tmpl)
		if err != nil {
			t.Errorf("parse %q: %v", tt.tmpl, err)
			continue
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, data); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.want {
			t.Errorf("%q = %q, want %q", tt.tmpl, b.String(), tt.want)
		}
	}
}

func TestParse_Errors(t *testing.T) {
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
		if _, err := Parse(tmpl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.30q) = %v, want an error with %q", tmpl, err, want)
		}
	}
}

func TestPath_Find(t *testing.T) {
	data := generic(t, map[string]any{"a": map[string]any{"z": 2, "y": "s"}, "l": []int{1, 2, 3}})
	for _, tt := range []struct {
		path string
		want []string
	}{
		{".a.y", []string{"s"}},
		{".a[*]", []string{"s", "2"}},
		{".l[-2]", []string{"2"}},
		{".l[3]", nil},
		{".", []string{`{"a":{"y":"s","z":2},"l":[1,2,3]}`}},
	} {
		p, err := ParsePath(tt.path)
		if err != nil {
			t.Fatalf("ParsePath(%q): %v", tt.path, err)
		}
		var got []string
		for _, v := range p.Find(data) {
			got = append(got, ValueString(v))
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s finds %q, want %q", tt.path, got, tt.want)
		}
	}
	// Braces belong to a template, not to a path.
	if _, err := ParsePath("{.a}"); err == nil || !strings.Contains(err.Error(), "want a field") {
		t.Errorf(`ParsePath("{.a}") = %v, want an error`, err)
	}
}
