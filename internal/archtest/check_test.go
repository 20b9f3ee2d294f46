package archtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const mod = "example.com/m"

// synthetic is a small graph in the shape of fleetd's.
var synthetic = Graph{
	"core":         {"leaf", "third.party/lib"},
	"core/adapter": {"core", "client"},
	"client":       {},
	"leaf":         {},
	"wiring":       {"core/...", "client"},
	"test/...":     {Any},
}

func pkg(path string, imports ...string) Package {
	return Package{ImportPath: mod + "/" + path, Imports: imports}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		pkgs []Package
		want []Violation
	}{
		{
			name: "allowed imports, std and third-party packages inside an allowed module",
			pkgs: []Package{
				pkg("core", "fmt", "net/http", mod+"/leaf", "third.party/lib", "third.party/lib/sub"),
				pkg("core/adapter", mod+"/core", mod+"/client", "context"),
				pkg("wiring", mod+"/core", mod+"/core/adapter", mod+"/client"),
				pkg("test/bench/cmd/x", mod+"/wiring", "anything.else/at/all"),
			},
		},
		{
			name: "a planted forbidden import: the core imports the client",
			pkgs: []Package{pkg("core", "fmt", mod+"/leaf", mod+"/client")},
			want: []Violation{{From: "core", To: mod + "/client"}},
		},
		{
			name: "a lower layer importing a higher one",
			pkgs: []Package{pkg("leaf", mod+"/core")},
			want: []Violation{{From: "leaf", To: mod + "/core"}},
		},
		{
			name: "a third-party module that is not listed, or only shares a prefix",
			pkgs: []Package{pkg("core", "other.party/lib", "third.party/library")},
			want: []Violation{{From: "core", To: "other.party/lib"}, {From: "core", To: "third.party/library"}},
		},
		{
			name: "an entry is exact unless it ends in /...",
			pkgs: []Package{pkg("core/adapter", mod+"/core/adapter/internal"), pkg("wiring", mod+"/core/adapter/internal")},
			want: []Violation{{From: "core/adapter", To: mod + "/core/adapter/internal"}},
		},
		{
			name: "a package the graph does not know",
			pkgs: []Package{pkg("newthing", "fmt")},
			want: []Violation{{From: "newthing"}},
		},
		{
			name: "product code importing the tests",
			pkgs: []Package{pkg("wiring", mod+"/test/bench")},
			want: []Violation{{From: "wiring", To: mod + "/test/bench"}},
		},
		{
			name: "packages of other modules are not checked",
			pkgs: []Package{{ImportPath: "third.party/lib", Imports: []string{mod + "/core"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Check(mod, synthetic, tt.pkgs)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestViolation_String(t *testing.T) {
	for v, want := range map[Violation]string{
		{From: "core", To: mod + "/client"}: "core imports example.com/m/client, which the allowed graph does not list for it",
		{From: "newthing"}:                  "newthing is not in the allowed graph: add it, with what it may import",
	} {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}

func TestLinked(t *testing.T) {
	deps := []string{"fmt", "github.com/google/jsonschema-go/jsonschema", "github.com/santhosh-tekuri/jsonschema/v6",
		"github.com/santhosh-tekuri/jsonschema/v6/kind", mod + "/cmd/fleetd"}
	got := Linked(deps, []string{"github.com/santhosh-tekuri/jsonschema"})
	want := []string{"github.com/santhosh-tekuri/jsonschema/v6", "github.com/santhosh-tekuri/jsonschema/v6/kind"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Linked (-want +got):\n%s", diff)
	}
}
