package schemacheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Every tagged union of both schemas, compiled as herdr wrote it and as
// byTag rewrote it, gives the same verdict for an instance of each branch
// built from the schema, and for that instance changed in every way a tagged
// union can be got wrong: the tag missing, of another branch, unknown or
// not a string; a required member missing or of the wrong type; an unknown
// member; not an object at all.
func TestByTag_AcceptsExactlyWhatTheOneOfAccepts(t *testing.T) {
	for _, p := range Protocols {
		t.Run(fmt.Sprint("protocol ", p), func(t *testing.T) {
			t.Parallel()
			raw, _ := schemaFor(p)
			orig, rewritten := parseDoc(t, raw), byTag(parseDoc(t, raw))
			unions := taggedUnions(orig, "")
			if len(unions) < 10 {
				t.Fatalf("found %d tagged unions, want the 10 or more of herdr's schema", len(unions))
			}
			origC := jsonschema.NewCompiler() // the library's own oneOf
			if err := origC.AddResource(docURL, orig); err != nil {
				t.Fatal(err)
			}
			newC, err := newCompiler(docURL, rewritten)
			if err != nil {
				t.Fatal(err)
			}
			// The examples must reach into the branches, not only fail at
			// their door: each is valid.
			var checked, branches int
			for _, u := range unions {
				o, err := origC.Compile(docURL + "#" + u.ptr)
				if err != nil {
					t.Fatal(err)
				}
				n, err := newC.Compile(docURL + "#" + u.ptr)
				if err != nil {
					t.Fatal(err)
				}
				for i, b := range u.branches {
					branches++
					base := u.example(orig, b)
					if err := o.Validate(roundTrip(t, base)); err != nil {
						line, _ := json.Marshal(base)
						t.Errorf("%s: the example %s is not valid: %v", u.ptr, line, err)
					}
					for _, inst := range mutations(base, u.tag, u.consts, i) {
						v := roundTrip(t, inst)
						want, got := o.Validate(v) == nil, n.Validate(v) == nil
						if want != got {
							line, _ := json.Marshal(inst)
							t.Errorf("%s: %s: oneOf accepts %v, byTag %v", u.ptr, line, want, got)
						}
						checked++
					}
				}
			}
			t.Logf("%d unions, %d branches, %d instances", len(unions), branches, checked)
		})
	}
}

// The rewrite is what makes a long subscription cheap; it must have
// happened to the unions the fake checks on every request.
func TestByTag_RewritesTheRequestsUnions(t *testing.T) {
	raw, _ := schemaFor(Latest)
	doc := byTag(parseDoc(t, raw)).(map[string]any)
	req := doc["schemas"].(map[string]any)["request"].(map[string]any)
	sub := req["$defs"].(map[string]any)["Subscription"].(map[string]any)
	for name, n := range map[string]map[string]any{"request": req, "Subscription": sub} {
		if _, ok := n["oneOf"]; ok {
			t.Errorf("%s still has its oneOf", name)
		}
		if all, _ := n["allOf"].([]any); len(all) != 1 || all[0].(map[string]any)[taggedKeyword] == nil {
			t.Errorf("%s has no tagged union: %v", name, n["allOf"])
		}
	}
}

const docURL = "https://herdr.invalid/schemacheck-test.json"

func parseDoc(t *testing.T, raw []byte) any {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type union struct {
	node     map[string]any
	ptr      string
	tag      string
	consts   []string
	branches []any
}

// taggedUnions lists the oneOfs byTag rewrites, by JSON pointer.
func taggedUnions(node any, ptr string) []union {
	var out []union
	switch n := node.(type) {
	case map[string]any:
		if branches, ok := n["oneOf"].([]any); ok {
			if tag, consts, ok := unionTag(branches); ok {
				out = append(out, union{node: n, ptr: ptr, tag: tag, consts: slices.Clone(consts), branches: branches})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(n)) {
			out = append(out, taggedUnions(n[k], ptr+"/"+escapePointer(k))...)
		}
	case []any:
		for i, v := range n {
			out = append(out, taggedUnions(v, fmt.Sprint(ptr, "/", i))...)
		}
	}
	return out
}

func escapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// example builds an instance of the union's branch, with what the node
// around the oneOf requires (a request's id).
func (u union) example(doc, branch any) any {
	around := maps.Clone(u.node)
	delete(around, "oneOf")
	obj, _ := example(doc, around, 0).(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	if b, ok := example(doc, branch, 0).(map[string]any); ok {
		maps.Copy(obj, b)
	}
	return obj
}

// resolve follows a fragment-only $ref in doc.
func resolve(doc any, ref string) any {
	node := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, _ := node.(map[string]any)
		node = m[tok]
	}
	return node
}

// example builds an instance of schema: required members only, the first
// branch of a oneOf or anyOf, one item in an array.
func example(doc, schema any, depth int) any {
	s, _ := schema.(map[string]any)
	if s == nil || depth > 12 {
		return map[string]any{}
	}
	if ref, ok := s["$ref"].(string); ok {
		return example(doc, resolve(doc, ref), depth+1)
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if bs, ok := s[k].([]any); ok && len(bs) > 0 {
			return example(doc, bs[0], depth+1)
		}
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok {
		for _, x := range ts {
			if x != "null" {
				typ, _ = x.(string)
				break
			}
		}
	}
	if typ == "" && s["properties"] != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			obj[name] = example(doc, props[name], depth+1)
		}
		return obj
	case "array":
		if items, ok := s["items"]; ok && depth < 6 { // a recursive filter ends in an empty list
			return []any{example(doc, items, depth+1)}
		}
		return []any{}
	case "string":
		if p, _ := s["pattern"].(string); strings.Contains(p, "%") {
			return "50%"
		}
		return "x"
	case "integer", "number":
		if m, ok := s["minimum"]; ok {
			return m
		}
		return 1
	case "boolean":
		return true
	case "null":
		return nil
	}
	return "x"
}

// mutations returns base and the ways of getting branch i of a union
// wrong.
func mutations(base any, tag string, consts []string, i int) []any {
	out := []any{base, "x", []any{}, nil, 7}
	obj, ok := base.(map[string]any)
	if !ok {
		return out
	}
	with := func(edit func(m map[string]any)) {
		m := maps.Clone(obj)
		edit(m)
		out = append(out, m)
	}
	with(func(m map[string]any) { delete(m, tag) })
	with(func(m map[string]any) { m[tag] = "no.such.branch" })
	with(func(m map[string]any) { m[tag] = 7 })
	with(func(m map[string]any) { m["zz_unknown_member"] = 1 })
	for _, j := range []int{i + 1, len(consts) - 1} {
		if j := j % len(consts); j != i {
			with(func(m map[string]any) { m[tag] = consts[j] })
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == tag {
			continue
		}
		with(func(m map[string]any) { delete(m, k) })
		if _, isString := obj[k].(string); isString {
			with(func(m map[string]any) { m[k] = 7 })
		} else {
			with(func(m map[string]any) { m[k] = "x" })
		}
	}
	return out
}
