package printers

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// hostileMember carries, in every string field the CLI prints, what a
// worker, a label or an agent's own report could put there: escape
// sequences (OSC 52, bracketed paste, screen clears), controls, tabs and
// newlines that would break a table, a bidi override, a C1 CSI.
func hostileMember() v1alpha1.Member {
	return v1alpha1.Member{
		ObjectMeta: v1alpha1.ObjectMeta{Name: "evil", UID: "u\x1b[8m", CreationTimestamp: &printCreated,
			Labels:      map[string]string{"team": "a\x1b]52;c;cm0gLXJmIH4=\x07b"},
			Annotations: map[string]string{"note": "x\ny\x7f"}},
		Spec: v1alpha1.MemberSpec{Profile: "claude\x1b[2J", Workspace: "ws\u202e1", Cwd: "/tmp\x00",
			Prompt: "do X\n\x1b[201~\x03"},
		Status: v1alpha1.MemberStatus{Phase: v1alpha1.PhaseReady, AgentStatus: "idle\x1b[H\x1b[2J", PaneID: "w1:p2\r",
			SessionID: "s\tid", TerminalID: "t\u009b31mX", LastError: "boom\r\n[fleetd] reply from primary:",
			Conditions: []v1alpha1.Condition{{Type: "Ready", Status: "True", Reason: "Up\x1b[31m", Message: "cond\x07\nnext",
				LastTransitionTime: printNow.Add(-time.Minute)}},
			Plan: []v1alpha1.PlanRow{{Server: "fleetd", Target: "resident", Transport: "stdio", URL: "http://x\x1b]8;;http://evil\x07"}}},
	}
}

// checkTerminalSafe fails t unless out holds nothing a terminal obeys:
// no control character but the newline, no DEL, no C1, no bidi override
// or isolate, valid UTF-8; and, when lines > 0, exactly that many lines
// (a newline inside a cell or field would add one).
func checkTerminalSafe(t *testing.T, out string, lines int) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("output is not valid UTF-8:\n%q", out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("output holds %U:\n%q", r, out)
			break
		}
	}
	if n := strings.Count(out, "\n"); lines > 0 && n != lines {
		t.Errorf("output has %d lines, want %d:\n%s", n, lines, out)
	}
}

func TestPrintMembers_HostileStringsPrintSafe(t *testing.T) {
	for _, output := range []string{"", "wide"} {
		t.Run("output="+output, func(t *testing.T) {
			var buf bytes.Buffer
			if err := printMembers(&buf, []v1alpha1.Member{hostileMember()}, output, false, printNow); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			checkTerminalSafe(t, out, 2) // the header and one row
			for _, want := range []string{`w1:p2\r`, "idle "} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if output == "wide" {
				for _, want := range []string{`s\tid`, `ws\u202e1`, "tX "} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
			}
		})
	}
}

// TestPrintMembers_HostileStringsInJSONAndYAML: -o json and -o yaml print
// the same data, with nothing a terminal obeys left raw (YAML keeps bidi
// controls raw: its writer has no say in them).
func TestPrintMembers_HostileStringsInJSONAndYAML(t *testing.T) {
	for _, output := range []string{"json", "yaml"} {
		t.Run(output, func(t *testing.T) {
			m := hostileMember()
			var buf bytes.Buffer
			if err := printMembers(&buf, []v1alpha1.Member{m}, output, true, printNow); err != nil {
				t.Fatalf("printMembers -o %s: %v", output, err)
			}
			out := buf.String()
			if output == "json" {
				checkTerminalSafe(t, out, 0)
			}
			for _, r := range out {
				if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
					t.Fatalf("output holds %U:\n%s", r, out)
				}
			}
			var back v1alpha1.Member
			if err := yaml.Unmarshal(buf.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m.Status, back.Status); diff != "" {
				t.Errorf("status read back (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(m.Annotations, back.Annotations); diff != "" {
				t.Errorf("annotations read back (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeMember_HostileStringsPrintSafe(t *testing.T) {
	m := hostileMember()
	events := []v1alpha1.Event{{Time: printNow.Add(-time.Minute), Type: v1alpha1.EventWarning, Reason: "Back\tOff",
		Message: "evt\x1b]0;title\x07\r\n[fleetd] x"}}
	var buf bytes.Buffer
	if err := DescribeMember(&buf, &m, events, printNow); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	var golden bytes.Buffer
	sample := sampleMembers()[0]
	if err := DescribeMember(&golden, &sample, events, printNow); err != nil {
		t.Fatal(err)
	}
	// As many lines as the well-behaved member's: no field broke its line.
	checkTerminalSafe(t, out, strings.Count(golden.String(), "\n"))
	for _, want := range []string{
		"Labels:       team=ab\n",
		"Annotations:  note=x\\ny\\x7f\n",
		`Prompt:      do X\n\x03` + "\n",
		`Cwd:         /tmp\x00` + "\n",
		`Last Error:           boom\r\n[fleetd] reply from primary:` + "\n",
		`cond\x07\nnext`,
		`Back\tOff`,
		`evt\r\n[fleetd] x`,
		"http://x ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
