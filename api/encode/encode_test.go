package encode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

func decodeOne(t *testing.T, text string) v1alpha1.Object {
	t.Helper()
	objs, errs := decode.File("test.yaml", []byte(text))
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("decode %q: %v (%d objects)", text, errs, len(objs))
	}
	return objs[0]
}

func TestMinimal(t *testing.T) {
	for _, tt := range []struct {
		name     string
		obj      string // decoded, so defaulted
		existing string // "" for none
		want     string
	}{
		{name: "defaults and fleetd's fields are left out",
			obj: `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer, uid: u-1, generation: 3, creationTimestamp: "2026-01-01T00:00:00Z", labels: {team: core}}
spec: {profile: claude, transport: streamable-http, workspace: fleetd, mcpTarget: {kind: resident}, prompt: "two\nlines\n"}
status: {phase: Ready}
`,
			want: `apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer
  labels:
    team: core
spec:
  profile: claude
  prompt: |
    two
    lines
`},
		{name: "a field the existing definition spells out stays, in its spelling when it decodes the same",
			obj:      "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata: {name: claude}\nspec: {harness: claude, startupTimeout: 60s, resume: Auto}\n",
			existing: "kind: Profile\nspec:\n  startupTimeout: 60s\n  resume: Never\n",
			want:     "apiVersion: fleetd.dev/v1alpha1\nkind: Profile\nmetadata:\n  name: claude\nspec:\n  harness: claude\n  startupTimeout: 60s\n  resume: Auto\n",
		},
		{name: "an existing zero value is kept",
			obj:      "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: a}\nspec: {profile: claude, workspace: api}\n",
			existing: "kind: Member\nspec:\n  paused: false\n  transport: streamable-http\n",
			want:     "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: a\nspec:\n  profile: claude\n  transport: streamable-http\n  workspace: api\n  paused: false\n",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var existing *yaml.Node
			if tt.existing != "" {
				var doc yaml.Node
				if err := yaml.Unmarshal([]byte(tt.existing), &doc); err != nil {
					t.Fatal(err)
				}
				existing = doc.Content[0]
			}
			n, err := Minimal(decodeOne(t, tt.obj), existing)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Marshal(n)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Minimal (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkMinimal is the cost of one applied Member's definition (a trial
// decode per field it could leave out).
func BenchmarkMinimal(b *testing.B) {
	objs, errs := decode.File("b.yaml", []byte(`apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata: {name: reviewer, labels: {team: core, tier: two}}
spec: {profile: claude, workspace: api, cwd: /srv/api, prompt: "Review the diff.\nBe kind.\n"}
`))
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	for b.Loop() {
		if _, err := Minimal(objs[0], nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMinimal_TrialsAreBounded: a definition with thousands of new labels
// costs at most maxTrialBytes of trial decodes, and is still exactly the
// object.
func TestMinimal_TrialsAreBounded(t *testing.T) {
	var labels strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&labels, "l%d: v\n    ", i)
	}
	obj := decodeOne(t, "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata:\n  name: many\n  labels:\n    "+labels.String()+"\nspec: {profile: claude}\n")
	n, spent, err := minimal(obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spent > maxTrialBytes {
		t.Errorf("trial decodes read %d bytes, want at most %d", spent, maxTrialBytes)
	}
	data, err := Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Canonical(obj)
	if got, err := Canonical(decodeOne(t, string(data))); err != nil || string(got) != string(want) {
		t.Errorf("the bounded definition is another object (%v)", err)
	}
}
