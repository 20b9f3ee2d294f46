package decode

import (
	"fmt"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// Defined reports whether an object of kind and name exists where a
// Member's references are resolved.
type Defined func(kind, name string) bool

// CheckReferences reports every reference of the Members in files that
// names nothing defined knows: a spec.profile without its Profile, and a
// tenant target's spec.mcpTarget.tenantId without its Tenant. Each error
// sits on the line where the reference is written, as the decoder found it
// (see [FileResult.Line]); in says where the objects were looked for (a
// manifests directory) and ends up in the message. `fleetd validate` and the
// desired-state store both judge references with it, so that a missing
// Profile or Tenant reads the same before fleetd runs and while it does.
func CheckReferences(files []FileResult, defined Defined, in string) ErrorList {
	var errs ErrorList
	eachMember(files, func(f *FileResult, i int, m *v1alpha1.Member) {
		for _, ref := range m.References() {
			if defined(ref.Kind, ref.Name) {
				continue
			}
			errs = append(errs, &Error{
				File:  f.Path,
				Line:  f.Line(i, ref.Field),
				Field: ref.Field,
				Msg:   fmt.Sprintf("no %s %q in %s; add one, or fix the name", ref.Kind, ref.Name, in),
			})
		}
	})
	return errs
}

// eachMember calls fn with every Member of files, in order, with its file
// and its index there.
func eachMember(files []FileResult, fn func(f *FileResult, i int, m *v1alpha1.Member)) {
	for fi := range files {
		for i, o := range files[fi].Objects {
			if m, ok := o.(*v1alpha1.Member); ok {
				fn(&files[fi], i, m)
			}
		}
	}
}

// CheckWorktrees reports every Member that claims a branch of a repository
// that a Member before it, in files order, claims already — its own
// spec.worktree or the one its profile gives it ([v1alpha1.Member.WorktreeOf]):
// two members never share a worktree. The error sits on the later member,
// where its branch comes from (spec.worktree.branch, or spec.profile), and
// names the first one and where it is written. profile returns the Profile
// of a name, nil when there is none (a missing Profile is CheckReferences'
// to report). `fleetd validate` and the desired-state stores use it, as
// they use CheckReferences.
func CheckWorktrees(files []FileResult, profile func(name string) *v1alpha1.Profile) ErrorList {
	type first struct {
		name, where string
	}
	claimed := map[v1alpha1.Claim]first{}
	var errs ErrorList
	eachMember(files, func(f *FileResult, i int, m *v1alpha1.Member) {
		w := m.WorktreeOf(profile(m.Spec.Profile))
		if w == nil {
			return
		}
		field := m.WorktreeField()
		line := f.Line(i, field)
		c := w.Claim()
		prev, taken := claimed[c]
		if !taken {
			where := f.Path
			if line > 0 {
				where = fmt.Sprintf("%s:%d", f.Path, line)
			}
			claimed[c] = first{m.Name, where}
			return
		}
		how := ""
		if m.Spec.Worktree == nil {
			how = fmt.Sprintf(" (profile %q gives it to member %q)", m.Spec.Profile, m.Name)
		}
		errs = append(errs, &Error{File: f.Path, Line: line, Field: field,
			Msg: fmt.Sprintf("%s%s is claimed by member %q too (%s); two members never share a worktree: give each a branch of its own",
				c, how, prev.name, prev.where)})
	})
	return errs
}
