package decode_test

import (
	"fmt"
	"testing"

	"github.com/fleetd-dev/fleetd/api/decode"
	"github.com/fleetd-dev/fleetd/internal/heaptest"
)

// BenchmarkManifest_Member: one small member's manifest, the file a fleet
// has a thousand of and a restart decodes every one of.
func BenchmarkManifest_Member(b *testing.B) {
	data := []byte("apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: m0001, labels: {team: docs}}\nspec:\n  profile: bench\n  cwd: /srv/docs\n  prompt: \"read the docs\"\n")
	for b.Loop() {
		if res := decode.Manifest("m0001.yaml", data); len(res.Errors) > 0 || len(res.Objects) != 1 {
			b.Fatalf("decoded %d objects, errors %v", len(res.Objects), res.Errors)
		}
	}
}

// BenchmarkManifest_RetainedPerMember reports the heap the results of
// 1000 members' manifests keep — what a directory store keeps of each
// file it read: its object and where the object's fields are written.
func BenchmarkManifest_RetainedPerMember(b *testing.B) {
	const members = 1000
	data := make([][]byte, members)
	for i := range data {
		data[i] = fmt.Appendf(nil, "apiVersion: fleetd.dev/v1alpha1\nkind: Member\nmetadata: {name: m%04d}\nspec:\n  profile: bench\n", i)
	}
	var retained uint64
	for b.Loop() {
		before := heaptest.Live()
		res := make([]decode.FileResult, members)
		for i := range res {
			res[i] = decode.Manifest(fmt.Sprintf("m%04d.yaml", i), data[i])
		}
		after := heaptest.Live()
		for i := range res {
			if len(res[i].Errors) > 0 || res[i].Line(0, "spec.profile") != 5 {
				b.Fatalf("file %d: errors %v, spec.profile on line %d", i, res[i].Errors, res[i].Line(0, "spec.profile"))
			}
		}
		retained += after - before
	}
	b.ReportMetric(float64(retained)/float64(b.N)/members, "B/member")
}
