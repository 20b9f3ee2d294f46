package dirstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// The objects file is written record by record, and reads exactly as the
// whole set of records encoded at once (json.MarshalIndent) always read:
// the same bytes, each definition taken from the object in effect, keys in
// order, characters JSON escapes escaped alike.
func TestMetaBook_EncodesTheObjectsFileAsBefore(t *testing.T) {
	created := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	member := &v1alpha1.Member{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"},
		Spec:       v1alpha1.MemberSpec{Profile: "codex-fast", Prompt: "review <main> & report"},
	}
	for _, tc := range []struct {
		name string
		recs map[string]metaRecord
	}{
		{"no records", map[string]metaRecord{}},
		{"records", map[string]metaRecord{
			"Member/reviewer": {UID: "u-1", Generation: 2, SpecHash: "ab", Created: created, Source: "/m/reviewer.yaml", obj: member},
			"Member/old":      {UID: "u-0", Generation: 1, SpecHash: "cd", Created: created}, // recorded before definitions were kept
			"Profile/a<b>":    {UID: "u-2", Generation: 1, SpecHash: "ef", Created: created, Source: "/m/p.yaml", Object: json.RawMessage(`{"kind": "Profile"}`)},
		}},
		{"strings JSON escapes", map[string]metaRecord{
			"Member/a&b\u2028": {UID: "u-3\x00\t", Generation: 1, SpecHash: "\xff\xfe", Created: created.Add(123456789),
				Source: "/m/\u2029\"quoted\"\\.yaml", Object: json.RawMessage(`{"a": ["<x>", {"b": "\u00e9"}], "c": {}}`)},
			"Member/\xffbad": {UID: "u-4", Generation: 3, SpecHash: "<>", Created: created, obj: &v1alpha1.Member{
				ObjectMeta: v1alpha1.ObjectMeta{Name: "\xffbad", Labels: map[string]string{"z": "1", "a": "&"}},
				Spec:       v1alpha1.MemberSpec{Profile: "p", Prompt: "line\nnext \u2028 <tag> \xc3"},
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &metaBook{recs: tc.recs}
			got, err := b.encode()
			if err != nil {
				t.Fatal(err)
			}
			again, err := b.encode() // into a buffer the size of the first
			if err != nil || string(again) != string(got) {
				t.Errorf("encoded again: %v\n%s\nwant\n%s", err, again, got)
			}
			whole := map[string]metaRecord{}
			for k, rec := range tc.recs {
				if rec.obj != nil {
					rec.Object, _ = json.Marshal(rec.obj)
				}
				whole[k] = rec
			}
			want, err := json.MarshalIndent(whole, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("objects file (-whole +record by record):\n%s", diff)
			}
		})
	}
}
