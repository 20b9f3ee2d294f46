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
	for _, f := range files {
		for i, o := range f.Objects {
			m, ok := o.(*v1alpha1.Member)
			if !ok {
				continue
			}
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
		}
	}
	return errs
}
