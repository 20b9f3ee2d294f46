package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
)

// The samples of fleetd's output in the documentation are fleetd's own: a
// fenced block that follows the comment `<!-- sample: NAME -->` in a doc
// holds testdata/docs/NAME.txt, which TestDocSamples_AreWhatFleetdPrints
// produces by running the real binary through the scenario the doc
// describes, and TestDocSamples_InTheDocsAreTheGoldens checks the doc
// against. `go test ./cmd/fleetd -run TestDocSamples -update` rewrites the
// golden files and the blocks in the docs.
//
// What changes from run to run is written as a user on the default setup
// sees it: the test's temporary directories as the defaults
// (~/.config/fleetd/manifests, ~/.local/state/fleetd), its port as 8080
// (and so without the --server and --state-dir a banner adds for other
// values), ids in the order they first appear, times and ages as fixed
// values.

var update = flag.Bool("update", false, "rewrite testdata/docs/ and the samples in the docs")

// docFiles are the documents whose samples are checked.
var docFiles = []string{"README.md", "docs/install.md", "docs/get.md"}

// sampleMark is the comment in front of a sample's fenced block.
var sampleMark = regexp.MustCompile("(?m)^<!-- sample: ([a-z0-9/-]+) -->\n(```[a-z]*\n)((?s:.*?))(```\n)")

func goldenPath(name string) string { return filepath.Join("testdata", "docs", name+".txt") }

// TestDocSamples_InTheDocsAreTheGoldens: every marked sample in the docs
// is its golden file, byte for byte, and every golden file is shown in a
// doc.
func TestDocSamples_InTheDocsAreTheGoldens(t *testing.T) {
	t.Parallel()
	shown := map[string]bool{}
	for _, doc := range docFiles {
		text := readDoc(t, doc)
		rewritten := sampleMark.ReplaceAllStringFunc(text, func(block string) string {
			m := sampleMark.FindStringSubmatch(block)
			name, body := m[1], m[3]
			shown[name] = true
			want, err := os.ReadFile(goldenPath(name))
			if err != nil {
				t.Errorf("%s shows sample %s: %v", doc, name, err)
				return block
			}
			if *update {
				return "<!-- sample: " + name + " -->\n" + m[2] + string(want) + m[4]
			}
			if diff := cmp.Diff(string(want), body); diff != "" {
				t.Errorf("%s: sample %s is not %s (-golden +doc); run go test ./cmd/fleetd -run TestDocSamples -update:\n%s", doc, name, goldenPath(name), diff)
			}
			return block
		})
		if *update && rewritten != text {
			if err := os.WriteFile(filepath.Join("../..", doc), []byte(rewritten), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	goldens, err := filepath.Glob(filepath.Join("testdata", "docs", "*", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(g), "testdata/docs/"), ".txt")
		if !shown[name] {
			t.Errorf("%s is shown in no doc (%s): remove it, or mark its block <!-- sample: %s -->", g, strings.Join(docFiles, ", "), name)
		}
	}
}

// checkSample compares a sample fleetd printed with its golden file, or
// writes it under -update.
func checkSample(t *testing.T, name, got string) {
	t.Helper()
	path := goldenPath(name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("sample %s is not what fleetd prints (-golden +fleetd); if fleetd is right, run go test ./cmd/fleetd -run TestDocSamples -update:\n%s", name, diff)
	}
}

// normalizer writes a run's output as a user on the default setup sees it.
type normalizer struct {
	literal []string          // old, new pairs, longest first
	ids     map[string]string // an id seen → its stable stand-in
	next    map[string]int    // per id kind, the next stand-in's number
}

func newNormalizer(pairs ...string) *normalizer {
	n := &normalizer{ids: map[string]string{}, next: map[string]int{}}
	type pair struct{ old, new string }
	var ps []pair
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != "" {
			ps = append(ps, pair{pairs[i], pairs[i+1]})
		}
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.old) - len(a.old) })
	for _, p := range ps {
		n.literal = append(n.literal, p.old, p.new)
	}
	return n
}

var (
	workspaceID = regexp.MustCompile(`\bw\d+\b`)
	terminalID  = regexp.MustCompile(`\bterm_[0-9a-f]+\b`)
	uuid        = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	timestamp   = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b`)
	age         = regexp.MustCompile(`\b\d+s\b`)
	turnID      = regexp.MustCompile(`\bt-[0-9a-f]{16}\b`)
	messageID   = regexp.MustCompile(`\bm-[0-9a-f]{16}\b`)
	localURL    = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
)

// stand-ins of the ids, in the order they first appear.
var standIns = map[string]func(i int) string{
	"w":    func(i int) string { return fmt.Sprintf("w%d", i+2) }, // w1 is the workspace herdr starts with
	"term": func(i int) string { return fmt.Sprintf("term_66172521d31b%02x", 0x95+i) },
	"uuid": func(i int) string {
		return []string{"9b9b815d-cc3c-4caa-ad53-af268373e9bb", "c91bf23c-5770-5a99-a56a-b848ef720c33", "5d0c8f0e-1c77-5e1b-9a5f-3f4b2f6e8d21",
			"0e3a41d2-7f6c-5b8e-8c2d-6a1f9e4b7c30", "b2d7c9e1-4a3f-5e6d-9b8c-1f2e3d4c5b6a", "7a6b5c4d-3e2f-5a1b-8c9d-0e1f2a3b4c5d"}[i%6]
	},
	"turn": func(i int) string { return fmt.Sprintf("t-5f1e8a2c9d3b%04x", i+1) },
	"msg":  func(i int) string { return fmt.Sprintf("m-3a7c1e9b5d2f%04x", i+1) },
}

func (n *normalizer) id(kind, seen string) string {
	if kind == "w" && seen == "w1" {
		return seen
	}
	key := kind + " " + seen
	if s, ok := n.ids[key]; ok {
		return s
	}
	s := standIns[kind](n.next[kind])
	n.next[kind]++
	n.ids[key] = s
	return s
}

// text normalizes s.
func (n *normalizer) text(s string) string {
	for i := 0; i+1 < len(n.literal); i += 2 {
		s = strings.ReplaceAll(s, n.literal[i], n.literal[i+1])
	}
	s = localURL.ReplaceAllString(s, "http://127.0.0.1:8080")
	s = strings.ReplaceAll(s, " --server http://127.0.0.1:8080", "")
	s = strings.ReplaceAll(s, " --state-dir /home/op/.local/state/fleetd", "")
	s = uuid.ReplaceAllStringFunc(s, func(v string) string { return n.id("uuid", v) })
	s = terminalID.ReplaceAllStringFunc(s, func(v string) string { return n.id("term", v) })
	s = turnID.ReplaceAllStringFunc(s, func(v string) string { return n.id("turn", v) })
	s = messageID.ReplaceAllStringFunc(s, func(v string) string { return n.id("msg", v) })
	s = workspaceID.ReplaceAllStringFunc(s, func(v string) string { return n.id("w", v) })
	s = timestamp.ReplaceAllString(s, "2026-11-29T23:04:52Z")
	return realign(age.ReplaceAllString(s, "3s"))
}

// cellGap separates the cells of a table's row: a tabwriter's padding.
var cellGap = regexp.MustCompile(` {2,}`)

// realign aligns the columns of every table in s again — runs of lines
// with one indent and the same number (3 or more) of cells two or more
// spaces apart — the way the tabwriter did before ids and ages were
// replaced with stand-ins of another width.
func realign(s string) string {
	lines := strings.Split(s, "\n")
	type row struct {
		indent string
		cells  []string
	}
	parse := func(l string) row {
		trimmed := strings.TrimLeft(l, " ")
		return row{indent: l[:len(l)-len(trimmed)], cells: cellGap.Split(trimmed, -1)}
	}
	for i := 0; i < len(lines); {
		r := parse(lines[i])
		j := i + 1
		for j < len(lines) {
			n := parse(lines[j])
			if n.indent != r.indent || len(n.cells) != len(r.cells) {
				break
			}
			j++
		}
		if len(r.cells) < 3 || j-i < 2 {
			i = j
			continue
		}
		widths := make([]int, len(r.cells))
		for _, l := range lines[i:j] {
			for c, cell := range parse(l).cells {
				widths[c] = max(widths[c], len([]rune(cell)))
			}
		}
		for k := i; k < j; k++ {
			p := parse(lines[k])
			var b strings.Builder
			b.WriteString(p.indent)
			for c, cell := range p.cells {
				b.WriteString(cell)
				if c < len(p.cells)-1 {
					b.WriteString(strings.Repeat(" ", widths[c]-len([]rune(cell))+3))
				}
			}
			lines[k] = b.String()
		}
		i = j
	}
	return strings.Join(lines, "\n")
}

// TestDocSamples_AreWhatFleetdPrints runs what the docs show, through the
// fleetd binary, and compares each sample with its golden file.
func TestDocSamples_AreWhatFleetdPrints(t *testing.T) {
	t.Parallel()
	for _, s := range []struct {
		name   string
		sample func(*testing.T)
	}{{"install", docSamplesInstall}, {"adopt", docSamplesAdopt}, {"watch", docSamplesWatch}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.sample(t)
		})
	}
}

// settle waits until the "phase agentStatus" of each member in want is
// what it says, watching them (get members -w, a line per change).
func settle(t *testing.T, client []string, want map[string]string) {
	t.Helper()
	w := startProc(t, append([]string{"get", "members", "-w", "-o", `jsonpath={.metadata.name} {.status.phase} {.status.agentStatus}{"\n"}`}, client...)...)
	defer func() { _ = w.cmd.Process.Kill() }()
	seen := map[string]string{}
	for !maps.Equal(seenOf(seen, want), want) {
		name, state, _ := strings.Cut(w.waitFor(t, w.stdout, `^\S+ `), " ")
		seen[name] = strings.TrimSpace(state)
	}
}

// seenOf is what seen holds of want's members.
func seenOf(seen, want map[string]string) map[string]string {
	out := map[string]string{}
	for name := range want {
		if s, ok := seen[name]; ok {
			out[name] = s
		}
	}
	return out
}

// banner reads the banner of a serve process: its lines up to the last
// one in parentheses, and the URL it serves on.
func banner(t *testing.T, p *proc) (text, url string) {
	t.Helper()
	first := p.waitFor(t, p.stdout, `^fleetd is serving `)
	url = regexp.MustCompile(`on (http://\S+) `).FindStringSubmatch(first)[1]
	lines := []string{first}
	for !strings.HasPrefix(lines[len(lines)-1], "(builder") {
		lines = append(lines, p.waitFor(t, p.stdout, ""))
	}
	return strings.Join(lines, "\n") + "\n", url
}

// docSamplesInstall is docs/install.md's first run: the example fleet on
// the simulated herdr, its tenant's credential unset, then set.
func docSamplesInstall(t *testing.T) {
	noCredential := []string{"ACME_FLEETD_TOKEN="} // acme-triage waits for its credential
	manifests, repo := copyExamples(t)
	state := t.TempDir()
	exe, err := fleetdExecutable()
	if err != nil {
		t.Fatal(err)
	}
	defaults := []string{manifests, "/home/op/.config/fleetd/manifests", state, "/home/op/.local/state/fleetd", repo, "/tmp/fleetd-demo-repo", exe, "fleetd"}
	n := newNormalizer(defaults...)

	_, stdout, _ := execFleetd(t, "validate", manifests)
	checkSample(t, "install/validate", n.text(stdout))

	serve := []string{"serve", "--herdr=sim", "--sim-ready-delay", "10ms", "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0"}
	p := startProcEnv(t, noCredential, serve...)
	text, url := banner(t, p)
	checkSample(t, "install/serve", n.text(text))
	client := []string{"--server", url, "--state-dir", state}
	settle(t, client, map[string]string{"acme-triage": "Pending", "builder": "Ready done", "docs-writer": "Ready idle", "reviewer": "Ready done"})
	for _, s := range []struct {
		name string
		args []string
	}{
		{"install/get-members", []string{"get", "members"}},
		{"install/describe-reviewer", []string{"describe", "member", "reviewer"}},
		{"get/events-reviewer", []string{"get", "events", "--for", "member/reviewer"}},
		{"install/send", []string{"send", "reviewer", "summarise the open pull requests"}},
	} {
		code, stdout, stderr := execFleetd(t, append(s.args, client...)...)
		if code != 0 {
			t.Fatalf("fleetd %s: exit %d, %s", strings.Join(s.args, " "), code, stderr)
		}
		checkSample(t, s.name, n.text(stdout))
	}
	p.interrupt(t)
	stop := regexp.MustCompile(`(?m)^fleetd stopped.*\n`).FindString(p.output())
	checkSample(t, "install/stop", n.text(stop))

	// The tenant's credential set, the next start: every member created
	// afresh on the new simulated herdr, acme-triage Ready too.
	p = startProcEnv(t, []string{"ACME_FLEETD_TOKEN=demo-credential"}, serve...)
	_, url = banner(t, p)
	client = []string{"--server", url, "--state-dir", state}
	settle(t, client, map[string]string{"acme-triage": "Ready done", "builder": "Ready idle", "docs-writer": "Ready idle", "reviewer": "Ready idle"})
	_, stdout, _ = execFleetd(t, append([]string{"get", "members"}, client...)...)
	checkSample(t, "install/get-members-credential", newNormalizer(defaults...).text(stdout))
	p.interrupt(t)
}

// docSamplesAdopt is docs/install.md's restart on herdr-sim, the
// simulated herdr as a process of its own (here, in the test's): the
// second fleetd adopts the panes the first created.
func docSamplesAdopt(t *testing.T) {
	manifests, _ := copyExamples(t)
	state := t.TempDir()
	sim, err := herdrsim.Start(&herdrsim.Options{SocketPath: filepath.Join(t.TempDir(), "herdr.sock"), InitialWorkspace: true, ReadyDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	for run := range 2 {
		p := startProcEnv(t, []string{"ACME_FLEETD_TOKEN="}, "serve", "--herdr-socket", sim.SocketPath(), "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0")
		first := p.waitFor(t, p.stdout, `^fleetd is serving `)
		client := []string{"--server", regexp.MustCompile(`on (http://\S+) `).FindStringSubmatch(first)[1], "--state-dir", state}
		if run == 0 {
			settle(t, client, map[string]string{"reviewer": "Ready done"})
			p.interrupt(t)
			continue
		}
		settle(t, client, map[string]string{"reviewer": "Ready done"})
		code, stdout, stderr := execFleetd(t, append([]string{"describe", "member", "reviewer"}, client...)...)
		_, events, ok := strings.Cut(stdout, "\nEvents:\n")
		if code != 0 || !ok {
			t.Fatalf("describe member reviewer: exit %d, %s%s", code, stdout, stderr)
		}
		checkSample(t, "install/adopted", newNormalizer().text("Events:\n"+events))
		p.interrupt(t)
	}
}

// docSamplesWatch is docs/get.md's watch: get members -w
// --output-watch-events while another terminal applies and deletes coder,
// until fleetd stops.
func docSamplesWatch(t *testing.T) {
	// Each in a workspace of its own: panes of one workspace are numbered
	// in the order the members happen to start.
	manifests := writeTree(t, map[string]string{"fleet.yaml": claudeProfile +
		memberDoc("reviewer", "{profile: claude, workspace: review}") + memberDoc("tester", "{profile: claude, workspace: qa}")})
	state := t.TempDir()
	p := startProc(t, "serve", "--herdr=sim", "--manifests", manifests, "--state-dir", state, "--listen", "127.0.0.1:0")
	first := p.waitFor(t, p.stdout, `^fleetd is serving `)
	client := []string{"--server", regexp.MustCompile(`on (http://\S+) `).FindStringSubmatch(first)[1], "--state-dir", state}
	settle(t, client, map[string]string{"reviewer": "Ready idle", "tester": "Ready idle"})
	w := startProc(t, append([]string{"get", "members", "-w", "--output-watch-events"}, client...)...)
	w.waitFor(t, w.stdout, `^ADDED\s+tester\s`)
	coder := writeTree(t, map[string]string{"coder.yaml": memberDoc("coder", "{profile: claude}")})
	if code, _, stderr := execFleetd(t, append([]string{"apply", "-f", filepath.Join(coder, "coder.yaml")}, client...)...); code != 0 {
		t.Fatalf("apply coder: %s", stderr)
	}
	w.waitFor(t, w.stdout, `^MODIFIED\s+coder\s+Ready\s+idle\s`)
	if code, _, stderr := execFleetd(t, append([]string{"delete", "member", "coder"}, client...)...); code != 0 {
		t.Fatalf("delete coder: %s", stderr)
	}
	w.waitFor(t, w.stdout, `^DELETED\s+coder\s`)
	p.interrupt(t)
	<-w.done
	n := newNormalizer(state, "/home/op/.local/state/fleetd")
	checkSample(t, "get/watch", "$ fleetd get members -w --output-watch-events      # while another terminal applies and deletes coder\n"+n.text(w.output()))
}
