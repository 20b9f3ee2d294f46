package decode_test

import (
	"testing"

	"github.com/fleetd-dev/fleetd/api/decode"
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
