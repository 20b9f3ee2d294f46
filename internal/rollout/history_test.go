package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func profile(args ...string) *v1alpha1.Profile {
	p := &v1alpha1.Profile{
		TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindProfile},
		ObjectMeta: v1alpha1.ObjectMeta{Name: "codex", UID: "u1", Generation: 1},
		Spec:       v1alpha1.ProfileSpec{Harness: "codex", Args: args},
	}
	p.SetDefaults()
	return p
}

// record records each profile in turn, a minute apart.
func record(t *testing.T, ps ...*v1alpha1.Profile) History {
	t.Helper()
	var h History
	for i, p := range ps {
		if _, err := h.Record(p, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// numbersAndCauses lists a history as "N:cause".
func numbersAndCauses(h History) []string {
	var out []string
	for _, r := range h.Revisions {
		out = append(out, fmt.Sprintf("%d:%s", r.Number, r.ChangeCause))
	}
	return out
}

// Revisions are numbered as a Deployment's are: each new definition is the
// next number with the fields that changed as its cause (or the
// change-cause annotation), the same definition again is no revision, and
// a definition that comes back — an undo — becomes the newest revision
// under the next number with its old cause; an object of another uid
// starts again; a generation older than the newest revision's (another
// node of a fleet saw a later change first) is no revision.
func TestHistory_RecordNumbersRevisionsAsKubectl(t *testing.T) {
	withCause := profile("-m", "b")
	withCause.Annotations = map[string]string{v1alpha1.AnnotationChangeCause: "try model b"}
	renamedEnv := profile("-m", "a")
	renamedEnv.Spec.Env = map[string]string{"X": "1"}
	other := profile("-m", "a")
	other.UID = "u2"
	leftOver := profile("-m", "c")
	leftOver.Annotations = withCause.Annotations
	undoneWithCause := profile("-m", "a")
	undoneWithCause.Annotations = withCause.Annotations
	paused := profile("-m", "a")
	paused.Spec.Rollout = &v1alpha1.ProfileRollout{Paused: true}
	gen2 := profile("-m", "b")
	gen2.Generation = 2
	gen3 := profile("-m", "c")
	gen3.Generation = 3
	for _, tc := range []struct {
		name string
		ps   []*v1alpha1.Profile
		want []string
	}{
		{"first", []*v1alpha1.Profile{profile("-m", "a")}, []string{"1:created"}},
		{"unchanged", []*v1alpha1.Profile{profile("-m", "a"), profile("-m", "a")}, []string{"1:created"}},
		{"spec.rollout is no revision", []*v1alpha1.Profile{profile("-m", "a"), paused}, []string{"1:created"}},
		{"fields that changed", []*v1alpha1.Profile{profile("-m", "a"), renamedEnv}, []string{"1:created", "2:spec.env changed"}},
		{"the annotation", []*v1alpha1.Profile{profile("-m", "a"), withCause}, []string{"1:created", "2:try model b"}},
		{"undo renumbers", []*v1alpha1.Profile{profile("-m", "a"), withCause, profile("-m", "a")}, []string{"2:try model b", "3:created"}},
		{"a cause left over", []*v1alpha1.Profile{profile("-m", "a"), withCause, leftOver}, []string{"1:created", "2:try model b", "3:spec.args changed"}},
		{"an undo with a cause left over", []*v1alpha1.Profile{profile("-m", "a"), withCause, undoneWithCause}, []string{"2:try model b", "3:created"}},
		{"another uid", []*v1alpha1.Profile{profile("-m", "a"), withCause, other}, []string{"1:created"}},
		{"a late sight of an older generation", []*v1alpha1.Profile{profile("-m", "a"), gen2, gen3, profile("-m", "a"), gen2}, []string{"1:created", "2:spec.args changed", "3:spec.args changed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, numbersAndCauses(record(t, tc.ps...))); diff != "" {
				t.Errorf("revisions (-want +got):\n%s", diff)
			}
		})
	}
}

// Only the last MaxRevisions are kept; numbers go on.
func TestHistory_KeepsTheLastTen(t *testing.T) {
	var ps []*v1alpha1.Profile
	for i := range 13 {
		ps = append(ps, profile("-n", fmt.Sprint(i)))
	}
	h := record(t, ps...)
	if len(h.Revisions) != MaxRevisions || h.Revisions[0].Number != 4 || h.Revisions[9].Number != 13 {
		t.Errorf("kept %v; want revisions 4 to 13", numbersAndCauses(h))
	}
	if prev, _ := h.Previous(); prev.Number != 12 {
		t.Errorf("Previous = %d, want 12", prev.Number)
	}
}

// Restore writes a revision's spec back and keeps what revisions leave
// out: a Profile's spec.rollout, a Member's spec.paused.
func TestRestore_KeepsWhatRevisionsLeaveOut(t *testing.T) {
	h := record(t, profile("-m", "a"), profile("-m", "b"))
	cur := profile("-m", "b")
	cur.Spec.Rollout = &v1alpha1.ProfileRollout{Paused: true}
	first, _ := h.Find(1)
	got, err := Restore(cur, first)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*v1alpha1.Profile)
	if diff := cmp.Diff([]string{"-m", "a"}, p.Spec.Args); diff != "" || !p.RolloutPaused() {
		t.Errorf("restored args (-want +got):\n%s\nrollout %+v; want spec.rollout kept", diff, p.Spec.Rollout)
	}

	m := &v1alpha1.Member{ObjectMeta: v1alpha1.ObjectMeta{Name: "alpha", UID: "m1"}, Spec: v1alpha1.MemberSpec{Profile: "codex", Cwd: "/a"}}
	var mh History
	if _, err := mh.Record(m, t0); err != nil {
		t.Fatal(err)
	}
	m2 := m.DeepCopy()
	m2.Spec.Cwd, m2.Spec.Paused = "/b", true
	rev, _ := mh.Latest()
	got, err = Restore(m2, rev)
	if err != nil {
		t.Fatal(err)
	}
	if mm := got.(*v1alpha1.Member); mm.Spec.Cwd != "/a" || !mm.Spec.Paused {
		t.Errorf("restored member spec %+v; want cwd /a, paused kept", mm.Spec)
	}
}
