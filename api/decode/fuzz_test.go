package decode

import (
	"bytes"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// FuzzDecodeFile feeds arbitrary bytes to File. Whatever the input, File
// must not panic, every error must name the file and a line inside it, and
// every object returned must be valid.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(member("profile: codex")))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, errs := File("f.yaml", data)
		// An upper bound on the lines yaml.v3 sees: it also breaks lines at
		// a lone CR and at NEL, LS and PS.
		lines := 1
		for _, br := range []string{"\n", "\r", "\u0085", "\u2028", "\u2029"} {
			lines += bytes.Count(data, []byte(br))
		}
		for _, e := range errs {
			if e.File != "f.yaml" || e.Line < 1 || e.Line > lines || e.Msg == "" {
				t.Errorf("badly located error %+v in a %d-line input", *e, lines)
			}
		}
		for _, o := range objs {
			v, ok := o.(interface{ Validate() v1alpha1.FieldErrors })
			if !ok {
				t.Fatalf("object %T has no Validate", o)
			}
			if err := v.Validate().Err(); err != nil {
				t.Errorf("File returned an invalid %s %q: %v", o.GetObjectKind(), o.GetName(), err)
			}
		}
	})
}
