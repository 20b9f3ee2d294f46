package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetdBinaryIsStatic: docs/install.md promises one static binary.
// `make build` builds it with cgo off (Go then links statically, with its
// own DNS resolver and user lookup), and every package the binary links
// builds so: none needs cgo.
func TestFleetdBinaryIsStatic(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	mk := exec.Command("make", "-n", "build")
	mk.Dir = root
	recipe, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	var build string
	for _, line := range strings.Split(string(recipe), "\n") {
		if strings.Contains(line, " build ") && strings.HasSuffix(line, "./"+fleetdBinary) {
			build = line
		}
	}
	if !strings.HasPrefix(build, "CGO_ENABLED=0 ") {
		t.Errorf("make build runs %q; want it to build ./%s with CGO_ENABLED=0 (a static binary)", build, fleetdBinary)
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{if .CgoFiles}}cgo{{end}}{{with .Error}}{{.Err}}{{end}}", "./"+fleetdBinary)
	list.Dir = root
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 go list -deps ./%s: %v\n%s", fleetdBinary, err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, rest, _ := strings.Cut(line, " "); rest != "" || pkg == "runtime/cgo" {
			t.Errorf("with cgo off, %s: %q", pkg, rest)
		}
	}
}
