package archtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

var syntheticLayers = []Layer{
	{Name: "bottom", Packages: []string{"leaf", "client"}},
	{Name: "core", Packages: []string{"core/..."}},
	{Name: "top", Packages: []string{"wiring"}},
}

func TestCheckLayers(t *testing.T) {
	tests := []struct {
		name   string
		g      Graph
		layers []Layer
		want   []LayerViolation
	}{
		{name: "every edge down or level", g: synthetic, layers: syntheticLayers},
		{
			name:   "an allowed edge that goes up",
			g:      Graph{"leaf": {"core"}, "core": {"leaf"}},
			layers: syntheticLayers,
			want:   []LayerViolation{{From: "leaf", To: "core", FromLayer: "bottom", ToLayer: "core"}},
		},
		{
			name:   "a tree entry stands for its root",
			g:      Graph{"client": {"wiring/..."}, "wiring/...": {"client"}},
			layers: syntheticLayers,
			want:   []LayerViolation{{From: "client", To: "wiring/...", FromLayer: "bottom", ToLayer: "top"}},
		},
		{
			name:   "the most specific entry places a package",
			g:      Graph{"core/low": {}, "leaf": {"core/low"}},
			layers: append([]Layer{{Name: "lowest", Packages: []string{"core/low"}}}, syntheticLayers...),
		},
		{
			name:   "an unplaced package",
			g:      Graph{"stray": {"leaf"}, "test/...": {Any}},
			layers: syntheticLayers,
			want:   []LayerViolation{{From: "stray"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CheckLayers(tt.layers, tt.g)); diff != "" {
				t.Errorf("CheckLayers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnused(t *testing.T) {
	pkgs := []Package{
		pkg("core", "fmt", mod+"/leaf", "third.party/lib/sub"),
		pkg("core/adapter", mod+"/core"),
		pkg("client"),
		pkg("leaf"),
		pkg("wiring", mod+"/core/adapter"),
		pkg("test/x", mod+"/wiring"),
	}
	want := []Violation{
		{From: "core/adapter", To: "client"}, // allowed, never imported
		{From: "wiring", To: "client"},
	}
	if diff := cmp.Diff(want, Unused(mod, synthetic, pkgs)); diff != "" {
		t.Errorf("Unused (-want +got):\n%s", diff)
	}
}
