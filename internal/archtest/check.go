package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// Any, as the only entry of a package's allowed imports, lets it import
// anything (whole-system tests and benchmarks).
const Any = "*"

// Graph maps each package of the module (its path relative to the module
// root; a key ending in "/..." covers a directory tree) to what it may
// import besides the standard library: module packages by their relative
// path ("/..." again for a tree), third-party modules by module path (which
// covers every package inside the module), or [Any].
type Graph map[string][]string

// Package is one package of the module and its (non-test) imports, as go
// list reports them.
type Package struct {
	ImportPath string
	Imports    []string
}

// Violation is one import the graph does not allow, or a package the graph
// does not know.
type Violation struct {
	From, To string // module-relative From; To as imported ("" for an unknown package)
}

func (v Violation) String() string {
	if v.To == "" {
		return fmt.Sprintf("%s is not in the allowed graph: add it, with what it may import", v.From)
	}
	return fmt.Sprintf("%s imports %s, which the allowed graph does not list for it", v.From, v.To)
}

// Check returns every violation of g by pkgs, packages of module, in the
// order of pkgs and their imports.
func Check(module string, g Graph, pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		from, ok := relative(module, p.ImportPath)
		if !ok {
			continue // not ours
		}
		allowed, known := g.lookup(from)
		if !known {
			out = append(out, Violation{From: from})
			continue
		}
		if slices.Contains(allowed, Any) {
			continue
		}
		for _, imp := range p.Imports {
			if standard(imp) || permits(module, allowed, imp) {
				continue
			}
			out = append(out, Violation{From: from, To: imp})
		}
	}
	return out
}

// Linked returns the packages of deps (a binary's dependencies) that are
// or lie inside one of the forbidden import paths.
func Linked(deps, forbidden []string) []string {
	var out []string
	for _, d := range deps {
		if slices.ContainsFunc(forbidden, func(f string) bool { return within(d, f) }) {
			out = append(out, d)
		}
	}
	return out
}

func (g Graph) lookup(pkg string) ([]string, bool) {
	if allowed, ok := g[pkg]; ok {
		return allowed, true
	}
	for key, allowed := range g {
		if tree, ok := strings.CutSuffix(key, "/..."); ok && within(pkg, tree) {
			return allowed, true
		}
	}
	return nil, false
}

func permits(module string, allowed []string, imp string) bool {
	rel, ours := relative(module, imp)
	for _, a := range allowed {
		switch tree, isTree := strings.CutSuffix(a, "/..."); {
		case ours && isTree:
			if within(rel, tree) {
				return true
			}
		case ours:
			if rel == a {
				return true
			}
		case !thirdParty(a):
			// a module package; imp is not one
		case within(imp, a):
			return true
		}
	}
	return false
}

// relative returns path relative to the module, if it is in the module.
func relative(module, path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// within reports whether path is pkg or lies inside it.
func within(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

// standard reports whether path is a standard-library package: its first
// element has no dot (go list's own rule for non-module paths).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// thirdParty reports whether an allowed entry names a third-party module
// rather than a module-relative package.
func thirdParty(entry string) bool {
	first, _, _ := strings.Cut(entry, "/")
	return strings.Contains(first, ".")
}
