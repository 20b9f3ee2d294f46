package vocab

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rule is a forbidden spelling and the only places it may appear.
type rule struct {
	name string
	re   *regexp.Regexp
	// need is lower-case ASCII that every match of re holds, in any case:
	// a file without it (asciiLower) is not searched with re, which is
	// most of the sweep's time under -race. A case-insensitive rule's need
	// holds no k or s, which (?i) also matches as U+212A and U+017F
	// (TestRules_NeedsCanBeFound).
	need    string
	allowed []string // repository-relative path prefixes, "/"-separated
}

// rules is the one list of forbidden spellings and their allowed places.
// The patterns are assembled from pieces so that this file does not
// contain what it forbids.
var rules = []rule{
	{
		name:    "legacy transport mode (only the one-shot migration may spell it)",
		re:      regexp.MustCompile(`(?i)` + regexp.QuoteMeta("remote"+"-"+"http")),
		need:    "remote" + "-" + "http",
		allowed: []string{"internal/migrate/"},
	},
	{
		name:    "Codex's spelling of Streamable HTTP (only harness adapters may spell it)",
		re:      regexp.MustCompile(`(?i)` + regexp.QuoteMeta("streamable"+"_"+"http")),
		need:    "treamable" + "_" + "http",
		allowed: []string{"internal/harness/"},
	},
	{
		name:    `MCP server entry typed "http" (only harness adapters may spell it)`,
		re:      regexp.MustCompile(`"type"\s*:\s*"` + "http" + `"`),
		need:    `"type"`,
		allowed: []string{"internal/harness/"},
	},
	{
		// claude mcp add's flag, as a shell line or as argv elements.
		name:    "Claude's CLI spelling of the HTTP transport (only harness adapters may spell it)",
		re:      regexp.MustCompile(`--` + "transport" + `(?:\s+|\s*=\s*|"\s*,\s*")["']?` + "http" + `\b`),
		need:    "--" + "transport",
		allowed: []string{"internal/harness/"},
	},
	{
		// An entry whose args list starts with the bridge subcommand (JSON,
		// TOML, a -c override, or a Go slice), or whose command string runs
		// it.
		name: "command-bridge MCP server entry (only harness adapters may spell it)",
		re: regexp.MustCompile(`[\[{]\s*"` + "mcp" + `-bridge"` +
			`|\b` + "command" + `"?\s*[:=]\s*"[^"\n]*\b` + "mcp" + `-bridge\b`),
		need:    "mcp" + "-bridge",
		allowed: []string{"internal/harness/"},
	},
}

// violation is one forbidden spelling found outside its allowed places.
type violation struct {
	Path string
	Line int
	Rule string
}

func (v violation) String() string { return fmt.Sprintf("%s:%d: %s", v.Path, v.Line, v.Rule) }

// check returns the violations in one file's content; path is relative to
// the repository root and "/"-separated.
func check(path string, content []byte) []violation {
	var out []violation
	lower := asciiLower(content)
	for _, r := range rules {
		if allowedIn(path, r.allowed) || !bytes.Contains(lower, []byte(r.need)) {
			continue
		}
		for _, loc := range r.re.FindAllIndex(content, -1) {
			line := 1 + bytes.Count(content[:loc[0]], []byte("\n"))
			out = append(out, violation{Path: path, Line: line, Rule: r.name})
		}
	}
	return out
}

// asciiLower is b with A–Z made a–z and every other byte as it is.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func allowedIn(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// sweep checks every listed file under root. Files listed but gone from
// the work tree (deleted, not yet committed) and binary files are skipped.
func sweep(root string, files []string) ([]violation, error) {
	var out []violation
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		out = append(out, check(f, data)...)
	}
	return out, nil
}

// repoFiles lists the files of the work tree at root that git tracks or
// would track: committed or staged, plus untracked files not ignored.
func repoFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", root, err, stderr.String())
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func TestRepository_KeepsItsVocabulary(t *testing.T) {
	root := repoRoot(t)
	files, err := repoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// Guard against a sweep that silently looks at nothing.
	for _, must := range []string{"go.mod", "internal/vocab/sweep_test.go"} {
		if !slices.Contains(files, must) {
			t.Fatalf("the file list from git misses %s; the sweep would not be looking at the repository", must)
		}
	}
	found, err := sweep(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Errorf("%v", v)
	}
}

// A rule's need that could not be in a file the rule matches would turn
// the rule off without a word: one with an upper-case letter (the file is
// lowered before the look), an empty one, or, in a case-insensitive rule,
// one with a k or an s (matched as U+212A and U+017F too).
func TestRules_NeedsCanBeFound(t *testing.T) {
	for _, r := range rules {
		if r.need == "" || string(asciiLower([]byte(r.need))) != r.need {
			t.Errorf("rule %q: need %q is not lower-case ASCII text", r.name, r.need)
		}
		if strings.HasPrefix(r.re.String(), "(?i)") && strings.ContainsAny(r.need, "ks") {
			t.Errorf("rule %q is case-insensitive, and its need %q holds a k or an s", r.name, r.need)
		}
	}
}

func TestCheck_FlagsSpellingsOutsideTheirPlaces(t *testing.T) {
	legacy := "remote" + "-http"
	codex := "streamable" + "_http"
	typed := func(space string) string { return `{"type"` + space + `"http", "url": "x"}` }
	flag := "--" + "transport"
	bridge := `"mcp` + `-bridge"`
	const (
		legacyRule = "legacy transport mode (only the one-shot migration may spell it)"
		codexRule  = "Codex's spelling of Streamable HTTP (only harness adapters may spell it)"
		typeRule   = `MCP server entry typed "http" (only harness adapters may spell it)`
		flagRule   = "Claude's CLI spelling of the HTTP transport (only harness adapters may spell it)"
		bridgeRule = "command-bridge MCP server entry (only harness adapters may spell it)"
	)
	tests := []struct {
		name    string
		path    string
		content string
		want    []violation
	}{
		{"legacy mode in the API", "api/v1alpha1/types.go", "a\nmode: " + legacy + "\n",
			[]violation{{"api/v1alpha1/types.go", 2, legacyRule}}},
		{"legacy mode in upper case in docs", "docs/x.md", strings.ToUpper(legacy),
			[]violation{{"docs/x.md", 1, legacyRule}}},
		{"legacy mode in the migration", "internal/migrate/migrate.go", legacy, nil},
		{"legacy mode in the migration's fixtures", "internal/migrate/testdata/a.yaml", legacy, nil},
		{"legacy mode in the legacy example", "internal/migrate/testdata/legacy/m.yaml", legacy, nil},
		{"legacy mode in the other manifests", "manifests/member.yaml", legacy,
			[]violation{{"manifests/member.yaml", 1, legacyRule}}},
		{"legacy mode in a directory named like the migration", "internal/migrate2/x.go", legacy,
			[]violation{{"internal/migrate2/x.go", 1, legacyRule}}},
		{"Codex spelling outside harness", "mcp/x.go", "\n\n" + codex,
			[]violation{{"mcp/x.go", 3, codexRule}}},
		{"Codex spelling with a long s, in capitals", "docs/x.md", "\u017f" + strings.ToUpper(codex[1:]),
			[]violation{{"docs/x.md", 1, codexRule}}},
		{"Codex spelling in harness", "internal/harness/codex.go", codex, nil},
		{"typed http entry", "cmd/fleetd/x.go", typed(": "),
			[]violation{{"cmd/fleetd/x.go", 1, typeRule}}},
		{"typed http entry without spaces", "x.json", typed(":"),
			[]violation{{"x.json", 1, typeRule}}},
		{"typed http entry across lines", "x.json", "{\n  \"type\"\n  :\t\"http\"}",
			[]violation{{"x.json", 2, typeRule}}},
		{"typed http entry in harness", "internal/harness/claude_test.go", typed(": "), nil},
		{"canonical words are fine", "api/x.go", `transport: streamable-http, kind: tenant, "type": "stdio"`, nil},
		{"two spellings in one file", "README.md", legacy + "\n" + codex,
			[]violation{{"README.md", 1, legacyRule}, {"README.md", 2, codexRule}}},

		// Claude's CLI flag for its HTTP transport.
		{"claude mcp add line in docs", "docs/gateway.md", "x\nclaude mcp add " + flag + " http fleetd URL\n",
			[]violation{{"docs/gateway.md", 2, flagRule}}},
		{"flag with =", "cmd/fleetd/x_test.go", "claude mcp add " + flag + "=http fleetd",
			[]violation{{"cmd/fleetd/x_test.go", 1, flagRule}}},
		{"flag quoted", "x.sh", flag + " 'http' fleetd",
			[]violation{{"x.sh", 1, flagRule}}},
		{"flag as argv elements", "internal/simagent/x_test.go", `[]string{"claude", "mcp", "add", "` + flag + `", "http"}`,
			[]violation{{"internal/simagent/x_test.go", 1, flagRule}}},
		{"flag in the adapter", "internal/harness/primary.go", "claude mcp add " + flag + " http", nil},
		{"flag in the adapter's golden output", "internal/harness/testdata/primary/claude.golden", flag + " http", nil},
		{"flag with a canonical value is fine", "docs/x.md", flag + " streamable-http, " + flag + " stdio", nil},
		{"flag followed by a longer word is fine", "docs/x.md", flag + " https-only", nil},

		// The command-bridge entry shape.
		{"JSON args starting with the bridge", "docs/gateway.md", "{\"command\": \"/bin/fleetd\",\n  \"args\": [\n    " + bridge + ", \"--url\"]}",
			[]violation{{"docs/gateway.md", 2, bridgeRule}}},
		{"TOML args", "x.toml", "[mcp_servers.fleetd]\nargs = [" + bridge + "]\n",
			[]violation{{"x.toml", 2, bridgeRule}}},
		{"codex -c override", "docs/mcp-layers.md", "`mcp_servers.fleetd.args=[" + bridge + `,"--url"]` + "`",
			[]violation{{"docs/mcp-layers.md", 1, bridgeRule}}},
		{"Go slice in a test outside the adapter", "cmd/fleetd/x_test.go", "want := []string{" + bridge + ", \"--url\"}",
			[]violation{{"cmd/fleetd/x_test.go", 1, bridgeRule}}},
		{"command string running the bridge", "x.json", `{"command": "/usr/bin/fleetd mcp` + `-bridge --url x"}`,
			[]violation{{"x.json", 1, bridgeRule}}},
		{"TOML command string", "x.toml", `command = "fleetd mcp` + `-bridge"`,
			[]violation{{"x.toml", 1, bridgeRule}}},
		{"bridge entry in the adapter", "internal/harness/generic.go", "Args: []string{" + bridge + "}", nil},
		{"bridge entry in the adapter's golden files", "internal/harness/testdata/generic.golden", `"args": [` + bridge + `]`, nil},
		{"running the bridge from a shell is fine", "README.md", "fleetd mcp" + "-bridge --url URL", nil},
		{"the bridge as a CLI argument is fine", "cmd/fleetd/x_test.go", `run(in, out, "mcp` + `-bridge", "--url", u)`, nil},
		{"a command entry running something else is fine", "x.json", `{"command": "/bin/fleetd", "args": ["serve"]}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check(tt.path, []byte(tt.content))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("check(%s) mismatch (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

func TestSweep_FindsAnUntrackedOffenderInAGitTree(t *testing.T) {
	root := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "/bin/\n")
	write("bin/fleetd", "streamable"+"_http") // ignored: not swept
	write("internal/harness/codex.go", "streamable"+"_http")
	write("mcp/gateway.go", "package mcp\n// speaks "+"streamable"+"_http\n")
	write("blob.dat", "\x00streamable"+"_http") // binary: not swept

	files, err := repoFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sweep(root, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []violation{{"mcp/gateway.go", 2, "Codex's spelling of Streamable HTTP (only harness adapters may spell it)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sweep mismatch (-want +got):\n%s", diff)
	}
}
