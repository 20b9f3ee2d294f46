package termtext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// The attacks of issue 12 item 3 and their relatives: what a worker, a
// label or an agent's own report can put in a string fleetd shows.
var cases = []struct {
	name       string
	in         string
	text, line string // Text's and Line's output
}{
	{"plain text passes", "all done: 3 files, 2 tests", "all done: 3 files, 2 tests", "all done: 3 files, 2 tests"},
	{"other scripts pass", "fertig ✓ 完成 مرحبا 🏴", "fertig ✓ 完成 مرحبا 🏴", "fertig ✓ 完成 مرحبا 🏴"},
	{"newline", "one\ntwo", "one\ntwo", `one\ntwo`},
	{"tab", "a\tb", "a\tb", `a\tb`},
	{"lone CR is Enter to a terminal", "ok\rrm -rf ~", "ok\nrm -rf ~", `ok\rrm -rf ~`},
	{"CRLF is one newline", "one\r\ntwo\r\n", "one\ntwo\n", `one\r\ntwo\r\n`},
	{"ctrl-C", "stop\x03now", `stop\x03now`, `stop\x03now`},
	{"NUL", "a\x00b", `a\x00b`, `a\x00b`},
	{"BEL", "ding\x07", `ding\x07`, `ding\x07`},
	{"DEL", "x\x7fy", `x\x7fy`, `x\x7fy`},
	{"backspace and form feed", "a\bb\fc\vd", `a\x08b\x0cc\x0bd`, `a\x08b\x0cc\x0bd`},
	{"lone ESC", "a\x1b", `a\x1b`, `a\x1b`},
	{"ESC before a control", "a\x1b\x03b", `a\x1b\x03b`, `a\x1b\x03b`},
	{"colour (SGR)", "\x1b[1;31mred\x1b[0m", "red", "red"},
	{"clear screen and home", "\x1b[2J\x1b[Hgone", "gone", "gone"},
	{"private mode set", "\x1b[?1049h\x1b[?2004lx", "x", "x"},
	{"bracketed paste end breaks out of herdr's paste", "text\x1b[201~\r/exit\r", "text\n/exit\n", `text\r/exit\r`},
	{"bracketed paste start", "\x1b[200~pasted", "pasted", "pasted"},
	{"OSC 52 clipboard write, BEL", "hi\x1b]52;c;cm0gLXJmIH4=\x07there", "hithere", "hithere"},
	{"OSC 52 clipboard write, ST", "hi\x1b]52;c;cm0gLXJmIH4=\x1b\\there", "hithere", "hithere"},
	{"OSC 8 hyperlink keeps its text", "\x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\", "docs", "docs"},
	{"window title", "\x1b]0;owned\x07ok", "ok", "ok"},
	{"unterminated OSC stops at the line break", "a\x1b]52;c;AAAA\nrest", "a\nrest", `a\nrest`},
	{"unterminated OSC to the end", "a\x1b]0;title", "a", "a"},
	{"OSC cut by another sequence", "a\x1b]0;t\x1b[31mb", "ab", "ab"},
	{"DCS", "\x1bP1$r0m\x1b\\x", "x", "x"},
	{"APC, PM, SOS", "\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\x", "x", "x"},
	{"charset switch", "\x1b(0lqqk\x1b(B", "lqqk", "lqqk"},
	{"reset and cursor save", "\x1bc\x1b7x\x1b8", "x", "x"},
	{"malformed CSI ends at the odd byte", "\x1b[12\x03x", `\x03x`, `\x03x`},
	{"CSI cut by a newline", "\x1b[1\nx", "\nx", `\nx`},
	{"CSI to the end", "x\x1b[38;5", "x", "x"},
	{"C1 CSI", "a\u009b31mb", "ab", "ab"},
	{"C1 OSC with C1 ST", "a\u009d52;c;AAAA\u009cb", "ab", "ab"},
	{"C1 OSC ended by BEL", "a\u009d0;t\x07b", "ab", "ab"},
	{"C1 DCS, SOS, PM, APC", "\u0090x\u009c\u0098x\u009c\u009ex\u009c\u009fx\u009cy", "y", "y"},
	{"other C1 controls", "a\u0085b\u009cc\u0080d", `a\u0085b\u009cc\u0080d`, `a\u0085b\u009cc\u0080d`},
	{"bidi override (Trojan Source)", "access\u202e level\u202c", `access\u202e level\u202c`, `access\u202e level\u202c`},
	{"bidi isolates", "\u2066a\u2069\u2067b\u2068c\u2069", `\u2066a\u2069\u2067b\u2068c\u2069`, `\u2066a\u2069\u2067b\u2068c\u2069`},
	{"bidi marks stay", "a\u200eb\u200fc\u061cd", "a\u200eb\u200fc\u061cd", "a\u200eb\u200fc\u061cd"},
	{"line separator", "x\u2028[fleetd] reply\u2029", `x\u2028[fleetd] reply\u2029`, `x\u2028[fleetd] reply\u2029`},
	{"tag characters", "hi\U000e0069\U000e0067", `hi\U000e0069\U000e0067`, `hi\U000e0069\U000e0067`},
	{"invalid UTF-8", "a\xffb\xc3", "a\uFFFDb\uFFFD", "a\uFFFDb\uFFFD"},
	{"raw 8-bit CSI byte is invalid UTF-8", "a\x9b31mb", "a\uFFFD31mb", "a\uFFFD31mb"},
	{"a real U+FFFD stays", "a\uFFFDb", "a\uFFFDb", "a\uFFFDb"},
	{"escapes already shown stay", `a\x1b[31m`, `a\x1b[31m`, `a\x1b[31m`},
}

func TestText(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.in); got != c.text {
				t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
			}
		})
	}
}

func TestLine(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Line(c.in); got != c.line {
				t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
			}
		})
	}
}

// TestText_ReturnsCleanTextUncopied: text that needs no change is the
// string given, not a copy of it.
func TestText_ReturnsCleanTextUncopied(t *testing.T) {
	in := strings.Repeat("ordinary reply text, ✓\n", 100)
	if got := Text(in); got != in {
		t.Errorf("Text changed a clean string")
	}
	if n := testing.AllocsPerRun(100, func() { Text(in) }); n != 0 {
		t.Errorf("Text of a clean block allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { Line("ordinary cell") }); n != 0 {
		t.Errorf("Line of a clean cell allocates %v times, want 0", n)
	}
}

// checkSafe fails t unless out, the result of Text (multiline) or Line,
// holds nothing a terminal would obey.
func checkSafe(t *testing.T, in, out string, multiline bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output of %q is not valid UTF-8: %q", in, out)
	}
	for _, r := range out {
		allowed := multiline && (r == '\n' || r == '\t')
		if !allowed && unsafeRune(r) {
			t.Fatalf("output of %q holds %U: %q", in, r, out)
		}
	}
}

// FuzzClean: whatever the input, neither function's output holds a control
// character (other than the newline and tab Text keeps), an escape
// sequence, a hidden character or invalid UTF-8, and applying it again
// changes nothing.
func FuzzClean(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, multiline := range []bool{true, false} {
			out := clean(in, multiline)
			checkSafe(t, in, out, multiline)
			if again := clean(out, multiline); again != out {
				t.Fatalf("not idempotent (multiline %v): %q -> %q -> %q", multiline, in, out, again)
			}
			// Bounded: a byte becomes at most four (`\x03`).
			if len(out) > 4*len(in) {
				t.Fatalf("output of %q grew from %d to %d bytes", in, len(in), len(out))
			}
		}
	})
}

func TestJSON(t *testing.T) {
	in := map[string]string{"a": "x\x1b[31m\u009b31m\x7f\u202e\u2066\u2028\u0085\U000e0041 é ✓"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(raw)
	want := `{"a":"x\u001b[31m\u009b31m\u007f\u202e\u2066\u2028\u0085` + "\U000e0041 é ✓" + `"}`
	if string(got) != want {
		t.Errorf("JSON(%s) =\n%s\nwant\n%s", raw, got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || !cmp.Equal(in, back) {
		t.Errorf("the escaped JSON reads back as %q, %v; want %q", back, err, in)
	}
	clean := []byte(`{"a": "plain ✓"}`)
	if got := JSON(clean); &got[0] != &clean[0] {
		t.Errorf("JSON copied a text that needs no escape")
	}
}

// BenchmarkText: the cost on the typing path of a content-limit-sized
// (256 KiB) reply, clean (returned as it is) and full of escapes.
func BenchmarkText(b *testing.B) {
	for _, bc := range []struct{ name, unit string }{
		{"clean", "all done: 3 files changed, 2 tests added ✓\n"},
		{"hostile", "\x1b[31mred\x1b[0m\x03\x1b]52;c;cm0=\x07\r\n\u202e"},
	} {
		in := strings.Repeat(bc.unit, (256<<10)/len(bc.unit))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				Text(in)
			}
		})
	}
}
