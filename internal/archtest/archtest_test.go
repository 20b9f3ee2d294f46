package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goList runs the go command in the module root and returns its output.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// modulePackages lists the module's packages and their non-test imports.
func modulePackages(t *testing.T) (module string, pkgs []Package) {
	t.Helper()
	out := goList(t, "-json=ImportPath,Imports,Module", "./...")
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Module *struct {
				Path string
				Main bool
			}
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		module = p.Module.Path
		pkgs = append(pkgs, p.Package)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages of the module")
	}
	return module, pkgs
}

func TestImportsFollowTheGraph(t *testing.T) {
	module, pkgs := modulePackages(t)
	for _, v := range Check(module, allowed, pkgs) {
		t.Error(v)
	}
	if t.Failed() {
		t.Log("the allowed graph is written down in internal/archtest/graph.go; change it there, on purpose, or change the import")
	}
}

func TestFleetdBinaryLinksNoSchemaValidator(t *testing.T) {
	module, _ := modulePackages(t)
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(goList(t, "-deps", "./"+fleetdBinary)))
	for sc.Scan() {
		deps = append(deps, sc.Text())
	}
	if len(Linked(deps, []string{module + "/" + fleetdBinary})) == 0 {
		t.Fatalf("go list -deps ./%s does not list the binary itself: %q", fleetdBinary, deps)
	}
	for _, p := range Linked(deps, notInFleetd) {
		t.Errorf("the fleetd binary links %s, which graph.go's notInFleetd keeps out of it (schema checks and etcd's server are test-only)", p)
	}
}

func TestLayers(t *testing.T) {
	for _, v := range CheckLayers(layers, allowed) {
		t.Error(v)
	}
	if t.Failed() {
		t.Log("the layers are written down in internal/archtest/graph.go: an edge may only point to the same layer or a lower one")
	}
}

func TestNoUnusedAllowedEdges(t *testing.T) {
	module, pkgs := modulePackages(t)
	for _, v := range Unused(module, allowed, pkgs) {
		t.Errorf("%s may import %s, but nothing in it does: remove the edge from internal/archtest/graph.go", v.From, v.To)
	}
}
