package decode

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the decoder's output")

// TestFile_Golden decodes each testdata/*.yaml and compares its errors and
// objects (as JSON) with testdata/*.golden. Run with -update to refresh.
func TestFile_Golden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			objs, errs := File(in, data)
			var b strings.Builder
			b.WriteString("# errors\n")
			for _, e := range errs {
				b.WriteString(e.Error() + "\n")
			}
			b.WriteString("# objects\n")
			for _, o := range objs {
				j, err := json.MarshalIndent(o, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				b.Write(j)
				b.WriteString("\n")
			}
			golden := strings.TrimSuffix(in, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}
