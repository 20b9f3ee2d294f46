package manifests

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// MaxInputBytes bounds what apply, diff and delete read from one file or
// from standard input: a List of many members is bigger than one manifest,
// but not by this much.
const MaxInputBytes = 4 * decode.DefaultMaxManifestBytes

// Read reads and strictly decodes every -f argument: a file, a directory
// (its manifest files, as fleetd serve lists them: *.yaml and *.yml, not
// recursive) or "-" for stdin. A file may hold several documents, and a
// document may be a List (what `fleetd get -o yaml` prints for several
// objects: kind List, MemberList, ProfileList or TenantList, with items);
// status and the metadata fleetd owns are ignored. It returns every
// problem, located by FILE:LINE, or every Member, Profile and Tenant in
// argument and file order, apiVersion and kind set. Input that holds no
// object is an error; verb names the command in that message.
func Read(stdin io.Reader, files []string, verb string) ([]v1alpha1.Object, error) {
	var objects []v1alpha1.Object
	var problems []error
	var names []string
	for _, arg := range files {
		paths := []string{arg}
		if arg != "-" {
			if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
				if paths, err = decode.ManifestPaths(arg); err != nil {
					return nil, fmt.Errorf("fleetd %s: %s: %w", verb, arg, err)
				}
			}
		}
		for _, path := range paths {
			name, data, err := readInput(stdin, path)
			if err != nil {
				return nil, fmt.Errorf("fleetd %s: %w", verb, err)
			}
			names = append(names, name)
			objs, errs := decodeInput(name, data)
			if len(errs) > 0 {
				problems = append(problems, errs)
				continue
			}
			for _, o := range objs {
				setTypeMeta(o)
				objects = append(objects, o)
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if len(objects) == 0 {
		if len(names) == 0 {
			names = files // directories without manifest files
		}
		return nil, fmt.Errorf("%s: no Members, Profiles or Tenants to %s", strings.Join(names, ", "), verb)
	}
	return objects, nil
}

// setTypeMeta sets an object's apiVersion and kind, as its manifest says
// them.
func setTypeMeta(o v1alpha1.Object) {
	tm := v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: o.GetObjectKind()}
	switch o := o.(type) {
	case *v1alpha1.Member:
		o.TypeMeta = tm
	case *v1alpha1.Profile:
		o.TypeMeta = tm
	case *v1alpha1.Tenant:
		o.TypeMeta = tm
	}
}

// applyRank is where a kind goes in apply's order: what a Member
// references before the Members.
var applyRank = map[string]int{v1alpha1.KindProfile: 0, v1alpha1.KindTenant: 1, v1alpha1.KindMember: 2}

// ForApply returns objs in the order apply sends them: Profiles, then
// Tenants, then Members, each kind in input order — so that the Profile
// and Tenant a Member references exist when the Member arrives.
func ForApply(objs []v1alpha1.Object) []v1alpha1.Object {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b v1alpha1.Object) int {
		return applyRank[a.GetObjectKind()] - applyRank[b.GetObjectKind()]
	})
	return out
}

// ForDelete returns objs in the order delete removes them, apply's
// reversed by kind: Members, then Tenants, then Profiles, each kind in
// input order — so that no Profile or Tenant is deleted while a Member of
// the input still references it.
func ForDelete(objs []v1alpha1.Object) []v1alpha1.Object {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b v1alpha1.Object) int {
		return applyRank[b.GetObjectKind()] - applyRank[a.GetObjectKind()]
	})
	return out
}

// readInput reads one file ("-": stdin) within MaxInputBytes, by the
// rules fleetd serve reads manifests with (regular files only, never
// blocking).
func readInput(stdin io.Reader, path string) (name string, data []byte, err error) {
	if path != "-" {
		data, err = decode.ReadManifest(path, MaxInputBytes)
		return path, data, err
	}
	data, err = io.ReadAll(io.LimitReader(stdin, MaxInputBytes+1))
	if err != nil {
		return "<stdin>", nil, fmt.Errorf("read standard input: %w", err)
	}
	if len(data) > MaxInputBytes {
		return "<stdin>", nil, fmt.Errorf("standard input is larger than %d bytes", MaxInputBytes)
	}
	return "<stdin>", data, nil
}

// decodeInput decodes one file like decode.File, and also takes List
// documents: each item is decoded as a document of its own, and its
// problems are located at the item's lines in the file.
func decodeInput(name string, data []byte) ([]v1alpha1.Object, decode.ErrorList) {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return decode.File(name, data) // the decoder says where
		}
		docs = append(docs, &doc)
	}
	hasList := false
	for _, d := range docs {
		hasList = hasList || listItems(d) != nil
	}
	if !hasList {
		return decode.File(name, data)
	}
	var objs []v1alpha1.Object
	var errs decode.ErrorList
	one := func(n *yaml.Node) {
		b, err := yaml.Marshal(n)
		if err != nil {
			errs = append(errs, &decode.Error{File: name, Line: n.Line, Msg: err.Error()})
			return
		}
		got, problems := decode.File(name, b)
		for _, p := range problems {
			p.Line = lineOf(n, p.Field)
		}
		objs, errs = append(objs, got...), append(errs, problems...)
	}
	for _, d := range docs {
		if items := listItems(d); items != nil {
			for _, item := range items.Content {
				one(item)
			}
		} else if len(d.Content) > 0 {
			one(d.Content[0])
		}
	}
	errs.Sort()
	return objs, errs
}

// listItems returns the items sequence of a document that is a List (kind
// List, or MemberList, ProfileList or TenantList as GET /members,
// /profiles and /tenants answer), or nil.
func listItems(doc *yaml.Node) *yaml.Node {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	kind, items := mappingValue(root, "kind"), mappingValue(root, "items")
	if kind == nil || !listKinds[kind.Value] {
		return nil
	}
	if items == nil || items.Kind != yaml.SequenceNode {
		return &yaml.Node{Kind: yaml.SequenceNode}
	}
	return items
}

// listKinds are the kinds of a List document.
var listKinds = map[string]bool{"List": true, "MemberList": true, "ProfileList": true, "TenantList": true}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// lineOf finds a decoder field path (spec.transport, metadata.labels[a])
// in n and returns the line of the deepest part of it that is there.
func lineOf(n *yaml.Node, field string) int {
	line := n.Line
	for _, part := range strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' || r == ']' }) {
		if n.Kind != yaml.MappingNode {
			break
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			break
		}
	}
	return line
}
