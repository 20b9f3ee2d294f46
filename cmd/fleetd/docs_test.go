package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readDoc reads a file of the repository, relative to this package.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocs_CommandTableListsEveryCommand: the README's command table has a
// row for every command `fleetd --help` lists, completion included.
func TestDocs_CommandTableListsEveryCommand(t *testing.T) {
	readme := readDoc(t, "README.md")
	root := newRootCmd()
	enforceUsageErrors(root)
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" {
			continue
		}
		if !strings.Contains(readme, "\n| `fleetd "+c.Name()) {
			t.Errorf("README.md's command table has no row for `fleetd %s`", c.Name())
		}
	}
	code, stdout, stderr := runCLI(t, "completion", "bash")
	if code != 0 || !strings.HasPrefix(stdout, "# bash completion V2 for fleetd") {
		t.Errorf("completion bash: exit %d, stdout %.40q, stderr %q", code, stdout, stderr)
	}
}

// TestDocs_ServerFlag: the commands that take --server are exactly those
// docs/install.md and the README name.
func TestDocs_ServerFlag(t *testing.T) {
	var have []string
	for _, c := range newRootCmd().Commands() {
		if c.Flags().Lookup("server") != nil {
			have = append(have, c.Name())
		}
	}
	slices.Sort(have)
	for _, doc := range []struct{ path, pattern string }{
		{"docs/install.md", "The client commands \\(([^)]*)\\) take `--server URL`"},
		{"README.md", "The commands that talk to a running fleetd — ([^—]*) — take `--server URL`"},
	} {
		m := regexp.MustCompile(doc.pattern).FindStringSubmatch(strings.ReplaceAll(readDoc(t, doc.path), "\n", " "))
		if m == nil {
			t.Errorf("%s does not say which commands take --server (%s)", doc.path, doc.pattern)
			continue
		}
		named := regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(m[1], -1)
		var documented []string
		for _, n := range named {
			documented = append(documented, n[1])
		}
		slices.Sort(documented)
		if diff := cmp.Diff(have, documented); diff != "" {
			t.Errorf("%s: commands with --server (-have +documented):\n%s", doc.path, diff)
		}
	}
}
