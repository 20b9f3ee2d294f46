package dirstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/statedir"
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
		recs map[string]*metaRecord
	}{
		{"no records", map[string]*metaRecord{}},
		{"records", map[string]*metaRecord{
			"Member/reviewer": {UID: "u-1", Generation: 2, SpecHash: specDigest{0xab}, Created: created, Source: "/m/reviewer.yaml", obj: member},
			"Member/old":      {UID: "u-0", Generation: 1, SpecHash: specDigest{31: 0xcd}, Created: created}, // recorded before definitions were kept
			"Profile/a<b>":    {UID: "u-2", Generation: 1, SpecHash: specDigest{0xef}, Created: created, Source: "/m/p.yaml", Object: json.RawMessage(`{"kind": "Profile"}`)},
		}},
		{"strings JSON escapes", map[string]*metaRecord{
			"Member/a&b\u2028": {UID: "u-3\x00\t", Generation: 1, SpecHash: specDigest{0xff, 0xfe}, Created: created.Add(123456789),
				Source: "/m/\u2029\"quoted\"\\.yaml", Object: json.RawMessage(`{"a": ["<x>", {"b": "\u00e9"}], "c": {}}`)},
			"Member/\xffbad": {UID: "u-4", Generation: 3, SpecHash: specDigest{0x3c, 0x3e}, Created: created, obj: &v1alpha1.Member{
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
			whole := map[string]*metaRecord{}
			for k, rec := range tc.recs {
				rec := *rec
				if rec.obj != nil {
					rec.Object, _ = json.Marshal(rec.obj)
				}
				whole[k] = &rec
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

// The objects file holds each spec's digest as the hex string it always
// did, though the book keeps its 32 bytes: a file written before reads
// back to the same digests and is written again byte for byte, and a
// digest that is not 64 hex digits reads as none (the spec changed).
func TestMetaBook_ObjectsFileBytesAsBefore(t *testing.T) {
	created := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	member := &v1alpha1.Member{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
		ObjectMeta: v1alpha1.ObjectMeta{Name: "reviewer"},
		Spec:       v1alpha1.MemberSpec{Profile: "codex-fast"},
	}
	member.SetDefaults()
	// legacy is the record as the objects file was written before its
	// digest was kept as bytes: a string.
	type legacy struct {
		UID        string          `json:"uid"`
		Generation int64           `json:"generation"`
		SpecHash   string          `json:"specHash"`
		Created    time.Time       `json:"creationTimestamp"`
		Source     string          `json:"source,omitempty"`
		Object     json.RawMessage `json:"object,omitempty"`
	}
	spec, err := json.Marshal(member.Spec)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spec)
	object, err := json.Marshal(member)
	if err != nil {
		t.Fatal(err)
	}
	before, err := json.MarshalIndent(map[string]legacy{
		"Member/reviewer": {UID: "u-1", Generation: 2, SpecHash: hex.EncodeToString(sum[:]), Created: created, Source: "/m/reviewer.yaml", Object: object},
		"Member/old":      {UID: "u-0", Generation: 1, SpecHash: strings.Repeat("0f", 32), Created: created},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	if err := os.WriteFile(statedir.At(state).Objects(), append(before, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := loadMeta(state)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.recs["Member/reviewer"].SpecHash, specHash(member); got != want {
		t.Errorf("digest read back = %x, want %x (the member's spec)", got, want)
	}
	again, err := b.encode()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(again)); diff != "" {
		t.Errorf("objects file written again (-before +now):\n%s", diff)
	}
	for _, text := range []string{"", "ab", strings.Repeat("zz", 32), strings.Repeat("0", 65)} {
		var d specDigest
		if err := json.Unmarshal([]byte(`"`+text+`"`), &d); err != nil || d != (specDigest{}) {
			t.Errorf("digest %q read as %x, %v; want none, no error", text, d, err)
		}
	}
}

// The objects file holds, after every read, exactly the objects in
// effect, each with the metadata it carries: uid, generation,
// creationTimestamp, its spec's digest, its file and its definition —
// through a first start, an edit of the spec, a metadata-only edit, a
// removal and a restart. The book keeps no record of its own for an object
// in effect: the file is written from the objects.
func TestMetaBook_ObjectsFileFollowsTheObjectsInEffect(t *testing.T) {
	h := newFiles(t, map[string]string{
		"profile.yaml": profileDoc,
		"alpha.yaml":   memberDoc("alpha", "codex-fast"),
		"team.yaml":    memberDoc("beta", "codex-fast") + "---\n" + memberDoc("gamma", "codex-fast"),
	})
	d := h.restarted()
	check := func(when string, d *Directory) {
		t.Helper()
		b, err := loadMeta(h.state)
		if err != nil {
			t.Fatal(err)
		}
		snap := d.Snapshot()
		var keys []string
		for k := range snap.Sources {
			keys = append(keys, k.String())
		}
		if diff := cmp.Diff(keys, b.keys(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s: records (-in effect +recorded):\n%s", when, diff)
		}
		for k, source := range snap.Sources {
			obj, _ := snap.Object(k)
			rec := b.recs[k.String()]
			if rec == nil {
				continue
			}
			m := obj.GetMeta()
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			got := []any{rec.UID, rec.Generation, rec.Created.Equal(*m.CreationTimestamp), rec.SpecHash, rec.Source, string(recordedJSON(rec))}
			want := []any{m.UID, m.Generation, true, specHash(obj), source, string(data)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: record of %s (-object +record):\n%s", when, k, diff)
			}
		}
	}
	check("first start", d)
	h.write("alpha.yaml", memberDoc("alpha", "codex-fast")+"  prompt: edited\n")
	d.rescan(t.Context())
	if g := d.Snapshot().Members["alpha"].Generation; g != 2 {
		t.Fatalf("alpha's generation after a spec edit = %d, want 2", g)
	}
	check("spec edited", d)
	h.write("team.yaml", strings.Replace(memberDoc("beta", "codex-fast"), "{name: beta}", "{name: beta, labels: {a: b}}", 1)+"---\n"+memberDoc("gamma", "codex-fast"))
	d.rescan(t.Context())
	check("metadata edited", d)
	firstAlpha := d.Snapshot().Members["alpha"]
	if err := os.Remove(filepath.Join(h.dir, "alpha.yaml")); err != nil {
		t.Fatal(err)
	}
	d.rescan(t.Context())
	check("alpha removed", d)
	before := d.Snapshot()
	again := h.restarted()
	check("restarted", again)
	for name, m := range again.Snapshot().Members {
		was := before.Members[name]
		if m.UID != was.UID || m.Generation != was.Generation || !m.CreationTimestamp.Equal(*was.CreationTimestamp) {
			t.Errorf("%s after the restart: uid %s generation %d created %v, want %s %d %v", name, m.UID, m.Generation, m.CreationTimestamp, was.UID, was.Generation, was.CreationTimestamp)
		}
	}
	h.write("alpha.yaml", memberDoc("alpha", "codex-fast"))
	again.rescan(t.Context())
	check("alpha back", again)
	if a := again.Snapshot().Members["alpha"]; a.Generation != 1 || a.UID == firstAlpha.UID {
		t.Errorf("alpha defined again: generation %d uid %s (was %s), want a new object", a.Generation, a.UID, firstAlpha.UID)
	}
}

// Two specs are the same exactly when their digests are: equal values, or
// values that differ only where encoding does not (a nil list and an empty
// one, both left out).
func TestSameSpec_AsTheDigestsTell(t *testing.T) {
	profile := func(args []string, harness string) *v1alpha1.Profile {
		return &v1alpha1.Profile{Spec: v1alpha1.ProfileSpec{Harness: harness, Args: args}}
	}
	for _, tc := range []struct {
		name string
		a, b *v1alpha1.Profile
	}{
		{"equal", profile([]string{"-m"}, "codex"), profile([]string{"-m"}, "codex")},
		{"nil and empty list", profile(nil, "codex"), profile([]string{}, "codex")},
		{"another harness", profile(nil, "codex"), profile(nil, "claude")},
		{"another argument", profile([]string{"-m"}, "codex"), profile([]string{"-n"}, "codex")},
	} {
		if got, want := sameSpec(tc.a, tc.b), specHash(tc.a) == specHash(tc.b); got != want {
			t.Errorf("%s: sameSpec = %v, want %v (the digests)", tc.name, got, want)
		}
	}
}
