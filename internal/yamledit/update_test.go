package yamledit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func parseMapping(t *testing.T, text string) *yaml.Node {
	t.Helper()
	docs, err := ParseDocuments([]byte(text))
	if err != nil || len(docs) != 1 {
		t.Fatalf("parse %q: %v (%d documents)", text, err, len(docs))
	}
	return docs[0].Content[0]
}

const handWritten = `---
# The reviewer: reads every change before it lands.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer   # also its herdr agent name
  labels:
    team: core
spec:
  # which agent runs
  profile: claude      # the default profile
  workspace: api
  prompt: |
    Review the diff.
    Be kind.

  env:
    - name: A
      value: "1"
# trailing comment of the document
`

// replaceOnce is s with its one occurrence of old replaced by new: an
// expected output that differs from handWritten in one line says only that
// line. It panics unless old occurs exactly once.
func replaceOnce(s, old, new string) string {
	if n := strings.Count(s, old); n != 1 {
		panic(fmt.Sprintf("%q occurs %d times, want once", old, n))
	}
	return strings.Replace(s, old, new, 1)
}

func TestUpdate(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		want string // the wanted data, in any style and order
		out  string
	}{
		{name: "equal data leaves the bytes alone", doc: handWritten,
			want: `{kind: Member, apiVersion: fleetd.dev/v1alpha1, metadata: {labels: {team: core}, name: reviewer},
				spec: {workspace: api, profile: claude, prompt: "Review the diff.\nBe kind.\n", env: [{name: A, value: "1"}]}}`,
			out: handWritten},
		{name: "a scalar is replaced as a token, its comment kept in its column", doc: handWritten,
			want: `{kind: Member, apiVersion: fleetd.dev/v1alpha1, metadata: {labels: {team: core}, name: reviewer},
				spec: {workspace: api, profile: codex, prompt: "Review the diff.\nBe kind.\n", env: [{name: A, value: "1"}]}}`,
			out: replaceOnce(handWritten, "  profile: claude      #", "  profile: codex       #")},
		{name: "a longer token takes spaces before the comment", doc: handWritten,
			want: `{kind: Member, apiVersion: fleetd.dev/v1alpha1, metadata: {labels: {team: core}, name: reviewer-of-everything},
				spec: {workspace: api, profile: claude, prompt: "Review the diff.\nBe kind.\n", env: [{name: A, value: "1"}]}}`,
			out: replaceOnce(handWritten, "  name: reviewer   #", "  name: reviewer-of-everything #")},
		{name: "a block scalar is written anew, a new entry goes after its predecessor, a deleted one takes its comment",
			doc: handWritten,
			want: `{kind: Member, apiVersion: fleetd.dev/v1alpha1, metadata: {labels: {team: core, tier: two}, name: reviewer},
				spec: {workspace: api, prompt: "Review it.\n", transport: stdio, env: [{name: A, value: "1"}]}}`,
			out: `---
# The reviewer: reads every change before it lands.
apiVersion: fleetd.dev/v1alpha1
kind: Member
metadata:
  name: reviewer   # also its herdr agent name
  labels:
    team: core
    tier: two
spec:
  workspace: api
  prompt: |
    Review it.
  transport: stdio

  env:
    - name: A
      value: "1"
# trailing comment of the document
`},
		{name: "a flow mapping is written anew in block style", doc: "kind: Member\nmetadata: {name: a}\nspec: {profile: claude} # short\n",
			want: "{kind: Member, metadata: {name: a}, spec: {profile: claude, workspace: x}}",
			out:  "kind: Member\nmetadata: {name: a}\nspec:\n  profile: claude\n  workspace: x\n"},
		{name: "a sequence written at its key's indentation is replaced whole", doc: "a: 1\nlist:\n- x\n- y\nb: 2\n",
			want: "{a: 1, list: [z], b: 2}",
			out:  "a: 1\nlist:\n  - z\nb: 2\n"},
		{name: "no newline at the end", doc: "a: 1", want: "{a: 1, b: 2}", out: "a: 1\nb: 2\n"},
		{name: "four-space indentation is kept for new entries", doc: "a:\n    b: 1\n",
			want: "{a: {b: 1}, c: {d: 2}}", out: "a:\n    b: 1\nc:\n    d: 2\n"},
		{name: "quoting style is kept", doc: "a: \"x\"  # q\nb: 'y'\n", want: `{a: "z", b: "w"}`, out: "a: \"z\"  # q\nb: 'w'\n"},
		{name: "a string that looks like a number is quoted", doc: "a: x\n", want: `{a: "12"}`, out: "a: \"12\"\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Update([]byte(tt.doc), parseMapping(t, tt.want))
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if diff := cmp.Diff(tt.out, string(out)); diff != "" {
				t.Errorf("Update (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdate_RefusesWhatItCannotEditInPlace(t *testing.T) {
	for _, tt := range []struct{ name, doc, want string }{
		{"flow root", "{a: 1}\n", "{a: 2}"},
		{"two documents", "a: 1\n---\nb: 2\n", "{a: 2}"},
		{"not a mapping", "- a\n", "{a: 2}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if out, err := Update([]byte(tt.doc), parseMapping(t, tt.want)); err == nil {
				t.Errorf("Update = %q, want an error", out)
			}
		})
	}
}

func TestEqual(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"{a: 1, b: [x, y]}", "b: [x, y]\na: 1\n", true},
		{"{a: 1}", `{a: "1"}`, false},
		{"{a: [x, y]}", "{a: [y, x]}", false},
		{"{a: 1}", "{a: 1, b: 2}", false},
		{"{a: {b: c}}", "a:\n  b: c # note\n", true},
	} {
		if got := Equal(parseMapping(t, tt.a), parseMapping(t, tt.b)); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
