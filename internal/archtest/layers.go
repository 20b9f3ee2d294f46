package archtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Layer is one level of the architecture, bottom first in a list of them:
// its packages may import packages of their own layer and of lower ones
// (as the graph allows), never of a higher one.
type Layer struct {
	// Name says what the layer is, for the test's messages.
	Name string
	// Packages are module-relative paths; an entry ending in "/..." covers
	// a tree.
	Packages []string
}

// LayerViolation is an edge — an allowed one of the graph, or an import —
// that goes up, or a package no layer places.
type LayerViolation struct {
	From, To           string // module-relative; To is "" for an unplaced package
	FromLayer, ToLayer string
}

func (v LayerViolation) String() string {
	if v.To == "" {
		return fmt.Sprintf("%s is in no layer: place it in internal/archtest/graph.go's layers", v.From)
	}
	return fmt.Sprintf("%s (layer %q) may import %s (layer %q): an edge that goes up", v.From, v.FromLayer, v.To, v.ToLayer)
}

// layerOf returns the index of the layer that places pkg, or -1.
func layerOf(layers []Layer, pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.Packages {
			tree, isTree := strings.CutSuffix(p, "/...")
			switch {
			case p == pkg && len(p) > bestLen:
				best, bestLen = i, len(p)
			case isTree && within(pkg, tree) && len(tree) > bestLen:
				best, bestLen = i, len(tree)
			}
		}
	}
	return best
}

// CheckLayers returns every edge of g (between two packages of the module;
// a "/..." entry stands for its root) that points to a higher layer, and
// every package of g that no layer places, except those whose only allowed
// import is [Any] (whole-system tests, which nothing imports). The most
// specific entry places a package.
func CheckLayers(layers []Layer, g Graph) []LayerViolation {
	var out []LayerViolation
	for _, from := range slices.Sorted(maps.Keys(g)) {
		allowed := g[from]
		if slices.Contains(allowed, Any) {
			continue
		}
		src := strings.TrimSuffix(from, "/...")
		fl := layerOf(layers, src)
		if fl < 0 {
			out = append(out, LayerViolation{From: from})
			continue
		}
		for _, to := range allowed {
			if thirdParty(to) {
				continue
			}
			tl := layerOf(layers, strings.TrimSuffix(to, "/..."))
			if tl > fl {
				out = append(out, LayerViolation{From: from, To: to, FromLayer: layers[fl].Name, ToLayer: layers[tl].Name})
			}
		}
	}
	return out
}

// Unused returns the allowed edges of g that no package of pkgs uses: an
// entry of a package's list that none of its imports is, or lies in. An
// entry of a package that pkgs does not hold is unused too. [Any] is never
// unused.
func Unused(module string, g Graph, pkgs []Package) []Violation {
	used := map[string]map[string]bool{} // graph key → allowed entry → used
	for _, p := range pkgs {
		from, ok := relative(module, p.ImportPath)
		if !ok {
			continue
		}
		key, allowed, found := g.lookupKey(from)
		if !found {
			continue
		}
		if used[key] == nil {
			used[key] = map[string]bool{}
		}
		for _, imp := range p.Imports {
			for _, a := range allowed {
				if permits(module, []string{a}, imp) {
					used[key][a] = true
				}
			}
		}
	}
	var out []Violation
	for _, key := range slices.Sorted(maps.Keys(g)) {
		for _, a := range g[key] {
			if a != Any && !used[key][a] {
				out = append(out, Violation{From: key, To: a})
			}
		}
	}
	return out
}

// lookupKey is lookup that also returns the key that matched.
func (g Graph) lookupKey(pkg string) (string, []string, bool) {
	if allowed, ok := g[pkg]; ok {
		return pkg, allowed, true
	}
	for key, allowed := range g {
		if tree, ok := strings.CutSuffix(key, "/..."); ok && within(pkg, tree) {
			return key, allowed, true
		}
	}
	return "", nil, false
}
