package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func newValidateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a manifests directory; print every problem as FILE:LINE: field: message",
		Long: `Validate decodes every manifest file directly in DIR (*.yaml, *.yml; not
dotfiles, editor backups or subdirectories) the way fleetd serve reads them,
and checks that every Member's profile and tenant name an object in DIR.

It prints every problem on its own line as FILE:LINE: field: message and
exits 1, or prints a one-line summary and exits 0. Usage errors exit 2.`,
		Example: `  fleetd validate manifests/`,
		Args:    requireDirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return validateDir(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	return cmd
}

// validateDir runs `fleetd validate DIR`: problems on out, one per line,
// then a count on errOut; or the summary on out.
func validateDir(out, errOut io.Writer, dir string) error {
	r, err := decode.Dir(dir)
	if err != nil {
		fmt.Fprintf(errOut, "fleetd validate: %v\n", err)
		return &exitError{code: 1}
	}
	errs := append(r.Errors(), unresolvedReferences(r)...)
	errs.Sort()
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(out, e)
		}
		fmt.Fprintf(errOut, "fleetd validate: %s in %s\n", plural(len(errs), "problem"), dir)
		return &exitError{code: 1}
	}
	fmt.Fprintln(out, summary(dir, r.Objects()))
	return nil
}

// summary is the line printed for a valid directory, such as
// "manifests/: 6 objects valid (3 Members, 2 Profiles, 1 Tenant)".
func summary(dir string, objs []v1alpha1.Object) string {
	if len(objs) == 0 {
		return dir + ": no objects (no manifest files, or only empty documents)"
	}
	count := map[string]int{}
	for _, o := range objs {
		count[o.GetObjectKind()]++
	}
	var parts []string
	for _, kind := range []string{v1alpha1.KindMember, v1alpha1.KindProfile, v1alpha1.KindTenant} {
		if n := count[kind]; n > 0 {
			parts = append(parts, plural(n, kind))
		}
	}
	return fmt.Sprintf("%s: %s valid (%s)", dir, plural(len(objs), "object"), strings.Join(parts, ", "))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// unresolvedReferences reports every Member whose spec.profile names no
// Profile, or whose spec.mcpTarget.tenantId names no Tenant, among the
// objects decoded from the directory. fleetd serve would hold such a
// member at Ready=False (ProfileNotFound, TenantNotFound); validate says
// so before it runs. An object defined twice still counts as defined: the
// duplicate is reported on its own.
func unresolvedReferences(r *decode.DirResult) decode.ErrorList {
	defined := map[string]bool{}
	for _, f := range r.Files {
		for _, o := range f.Objects {
			defined[o.GetObjectKind()+"/"+o.GetName()] = true
		}
	}
	var errs decode.ErrorList
	for _, f := range r.Files {
		var lines *fieldLines
		for _, o := range f.Objects {
			m, ok := o.(*v1alpha1.Member)
			if !ok {
				continue
			}
			missing := func(field, kind, name string) {
				if lines == nil {
					lines = memberFieldLines(f.Path)
				}
				errs = append(errs, &decode.Error{
					File:  f.Path,
					Line:  lines.line(m.Name, field),
					Field: field,
					Msg:   fmt.Sprintf("no %s %q in %s; add one, or fix the name", kind, name, r.Dir),
				})
			}
			if !defined[v1alpha1.KindProfile+"/"+m.Spec.Profile] {
				missing("spec.profile", v1alpha1.KindProfile, m.Spec.Profile)
			}
			if t := m.Spec.MCPTarget; t != nil && t.Kind == v1alpha1.TargetTenant && !defined[v1alpha1.KindTenant+"/"+t.TenantID] {
				missing("spec.mcpTarget.tenantId", v1alpha1.KindTenant, t.TenantID)
			}
		}
	}
	return errs
}

// fieldLines maps "member/field" to the line where a Member document of a
// file spells that field; the decoder keeps no positions on objects.
type fieldLines struct{ lines map[string]int }

// line returns the line of field in member's document, or 0 if unknown.
func (l *fieldLines) line(member, field string) int { return l.lines[member+"/"+field] }

// memberFieldLines reads path again and records, for each Member
// document, the lines of spec.profile and spec.mcpTarget.tenantId. Parse
// problems leave lines unknown; the decoder has reported them already.
func memberFieldLines(path string) *fieldLines {
	l := &fieldLines{lines: map[string]int{}}
	data, err := os.ReadFile(path)
	if err != nil {
		return l
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return l // io.EOF or a syntax error
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if v := mappingValue(root, "kind"); v == nil || v.Value != v1alpha1.KindMember {
			continue
		}
		name := mappingValue(mappingValue(root, "metadata"), "name")
		spec := mappingValue(root, "spec")
		if name == nil || spec == nil {
			continue
		}
		for _, field := range []struct {
			name string
			path []string
		}{
			{"spec.profile", []string{"profile"}},
			{"spec.mcpTarget.tenantId", []string{"mcpTarget", "tenantId"}},
		} {
			n := spec
			for _, key := range field.path {
				n = mappingValue(n, key)
			}
			if n != nil {
				l.lines[name.Value+"/"+field.name] = n.Line
			}
		}
	}
}

// mappingValue returns the value of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
