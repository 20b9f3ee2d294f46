package main

import (
	"os"
	"path/filepath"
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
		if c.Flags().Lookup("server") != nil || c.PersistentFlags().Lookup("server") != nil {
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

// TestDocs_CiteOnlyFilesThatExist: a path of the repository a doc names —
// a relative link, or a path under one of the repository's top
// directories anywhere in its text — is a file or directory that exists.
// (docs/multi-host.md once told operators to cat
// manifests/profile-claude.yaml, which never existed.)
func TestDocs_CiteOnlyFilesThatExist(t *testing.T) {
	notCitations := map[string]bool{
		"docs/manifests.md api/workspace":  true, // sed 's/workspace: api/workspace: qa/'
		"docs/worktrees.md docs/config.md": true, // a member's prompt: the file its agent is to write
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#\s:]+)(#[^)]*)?\)`)
	path := regexp.MustCompile(`(?:^|[^\w/~.$-])((?:api|cmd|controllers|docs|herdr|internal|manifests|mcp|test)/[\w./-]*\w)`)
	for _, doc := range append(docs, "../../README.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(doc, "../../")
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), m[1])); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, m[1])
			}
		}
		for _, m := range path.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil && !notCitations[name+" "+m[1]] {
				t.Errorf("%s names %s, which does not exist", name, m[1])
			}
		}
	}
}

// TestDocs_NameOnlyTestsThatExist: a test, benchmark or fuzz target a doc
// names exists, and so does the benchmark of every row of
// docs/performance.md's tables (`Convergence/members=100` is
// BenchmarkConvergence's). The figures stay tied to code that still
// measures them.
func TestDocs_NameOnlyTestsThatExist(t *testing.T) {
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		for _, m := range funcs.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z]\\w*)`")
	for _, doc := range docs {
		for _, m := range named.FindAllStringSubmatch(readDoc(t, strings.TrimPrefix(doc, "../../")), -1) {
			if !defined[m[1]] {
				t.Errorf("%s names %s, which no test file defines", doc, m[1])
			}
		}
	}
	// Process/members=N is benchtable's own measurement of bin/fleetd.
	if strings.Contains(readDoc(t, "test/bench/cmd/benchtable/process.go"), `"Process/members=%d"`) {
		defined["BenchmarkProcess"] = true
	}
	row := regexp.MustCompile(`(?m)^\| ([A-Z]\w+)(?:/[^ |]*)? \| `)
	for _, m := range row.FindAllStringSubmatch(readDoc(t, "docs/performance.md"), -1) {
		if name := "Benchmark" + m[1]; !defined[name] {
			t.Errorf("docs/performance.md has figures of %s, which no test file defines", name)
		}
	}
}
