package yamledit

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzUpdate: for any document and any wanted mapping, Update either
// refuses or returns text that parses to exactly the wanted data — never a
// panic, never a silently different file.
func FuzzUpdate(f *testing.F) {
	f.Add(handWritten, "{kind: Member, spec: {profile: codex, env: [{name: B}]}, metadata: {name: x}}")
	f.Add("a: 1 # c\nb:\n  c: |\n    x\n  d: [1, 2]\n", "{b: {c: y, e: f}, a: 2}")
	f.Add("a:\n- x\n- y: 1\n  z: 2\nb: 'q'\n", "{a: [x], b: q, c: {d: e}}")
	f.Add("---\nk: v\n...\n", "{k: w}")
	f.Fuzz(func(t *testing.T, doc, wantText string) {
		if len(doc) > 4096 || len(wantText) > 4096 {
			return
		}
		var wdoc yaml.Node
		if err := yaml.Unmarshal([]byte(wantText), &wdoc); err != nil || len(wdoc.Content) != 1 || wdoc.Content[0].Kind != yaml.MappingNode {
			return
		}
		want := wdoc.Content[0]
		out, err := Update([]byte(doc), want)
		if err != nil {
			return
		}
		got, err := ParseDocuments(out)
		if err != nil || len(got) != 1 || !Equal(got[0].Content[0], want) {
			t.Fatalf("Update(%q, %q) = %q, which is not the wanted data (%v)", doc, wantText, out, err)
		}
	})
}
