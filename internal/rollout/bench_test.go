package rollout

import (
	"fmt"
	"testing"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/heaptest"
)

// BenchmarkDir_RetainedPerMember reports the heap the histories of 1000
// members keep, each with its first revision recorded (a first start),
// per member: B/member. The members themselves are the desired state's
// and not counted.
func BenchmarkDir_RetainedPerMember(b *testing.B) {
	const members = 1000
	objs := make([]*v1alpha1.Member, members)
	for i := range objs {
		m := &v1alpha1.Member{
			TypeMeta:   v1alpha1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindMember},
			ObjectMeta: v1alpha1.ObjectMeta{Name: fmt.Sprintf("member-%04d", i), UID: fmt.Sprintf("3f1c9a52-8d4e-4b7a-9c21-%012x", i), Generation: 1},
			Spec:       v1alpha1.MemberSpec{Profile: "bench"},
		}
		m.SetDefaults()
		objs[i] = m
	}
	var retained uint64
	for b.Loop() {
		before := heaptest.Live()
		d, err := OpenDir(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range objs {
			if err := d.Update(v1alpha1.KindMember, m.Name, func(h *History) bool {
				changed, err := h.Record(m, t0)
				return err == nil && changed
			}); err != nil {
				b.Fatal(err)
			}
		}
		after := heaptest.Live()
		if got := len(d.Names(v1alpha1.KindMember)); got != members {
			b.Fatalf("%d histories, want %d", got, members)
		}
		retained += after - before
	}
	b.ReportMetric(float64(retained)/float64(b.N)/members, "B/member")
}
