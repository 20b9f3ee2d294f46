package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text returns s safe to type into a terminal pane or to print as a block of
// lines: newlines and tabs stay, a carriage return or CRLF becomes a newline,
// escape sequences are dropped and every other control character is shown
// escaped (see the package documentation for the whole rule set).
func Text(s string) string { return clean(s, true) }

// Line returns s safe to print as part of one line, a table cell or a
// field: like [Text], but newlines, carriage returns and tabs are shown
// escaped too (`\n`, `\r`, `\t`).
func Line(s string) string { return clean(s, false) }

// The C0 and C1 controls this package reads as more than one character.
const (
	esc = 0x1b
	bel = 0x07

	c1DCS = 0x90
	c1SOS = 0x98
	c1CSI = 0x9b
	c1ST  = 0x9c
	c1OSC = 0x9d
	c1PM  = 0x9e
	c1APC = 0x9f
)

// clean is Text (multiline) or Line (!multiline).
func clean(s string, multiline bool) string {
	i := firstUnsafe(s, multiline)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t':
			if multiline {
				b.WriteByte(byte(r))
			} else {
				quote(&b, r)
			}
		case r == '\r':
			if !multiline {
				quote(&b, r)
				break
			}
			b.WriteByte('\n')
			if i+1 < len(s) && s[i+1] == '\n' {
				size++ // CRLF is one newline
			}
		case r == esc:
			if n := escLen(s[i:]); n > 0 {
				size = n
			} else {
				quote(&b, r)
			}
		case r == c1CSI:
			size += csiLen(s[i+size:])
		case r == c1DCS || r == c1SOS || r == c1OSC || r == c1PM || r == c1APC:
			size += stringLen(s[i+size:])
		case unsafeRune(r):
			quote(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte of s that clean must
// change, or len(s) if there is none.
func firstUnsafe(s string, multiline bool) int {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if (c >= 0x20 && c != 0x7f) || (multiline && (c == '\n' || c == '\t')) {
				i++
				continue
			}
			return i
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return len(s)
}

// unsafeRune reports whether r is shown escaped (newline, tab and carriage
// return aside, which depend on the mode): a C0 or C1 control, DEL, a bidi
// embedding, override or isolate, a line or paragraph separator, a tag
// character.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	case r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return false
}

// quote writes r the way Go quotes it in a string literal.
func quote(b *strings.Builder, r rune) {
	prefix, digits := `\U`, 8
	switch {
	case r == '\n':
		b.WriteString(`\n`)
		return
	case r == '\r':
		b.WriteString(`\r`)
		return
	case r == '\t':
		b.WriteString(`\t`)
		return
	case r < 0x80:
		prefix, digits = `\x`, 2
	case r <= 0xffff:
		prefix, digits = `\u`, 4
	}
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte("0123456789abcdef"[r>>shift&0xf])
	}
}

// escLen returns the length of the escape sequence that starts s (s[0] is
// ESC), or 0 when this ESC starts none: it is then a lone ESC. The forms, as
// ECMA-48 and the terminals that follow it read them:
//
//	ESC [ …              CSI, see csiLen
//	ESC ] P X ^ _ …      OSC, DCS, SOS, PM, APC: a string, see stringLen
//	ESC 0x20–0x2F… F     intermediates then a final 0x30–0x7E (charset switches)
//	ESC 0x30–0x7E        a two-byte sequence (ESC c reset, ESC 7 save, …)
func escLen(s string) int {
	if len(s) < 2 {
		return 0
	}
	switch c := s[1]; {
	case c == '[':
		return 2 + csiLen(s[2:])
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return 2 + stringLen(s[2:])
	case c >= 0x20 && c <= 0x2f:
		j := 2
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
			j++
		}
		return j
	case c >= 0x30 && c <= 0x7e:
		return 2
	}
	return 0
}

// csiLen returns the length of a control sequence's body after its
// introducer: parameter and intermediate bytes (0x20–0x3F, in any order, as
// terminals accept them) and the final byte (0x40–0x7E). A byte of any other
// kind ends a malformed sequence before it; that byte is read as text again.
func csiLen(s string) int {
	for j := 0; j < len(s); j++ {
		switch c := s[j]; {
		case c >= 0x20 && c <= 0x3f:
		case c >= 0x40 && c <= 0x7e:
			return j + 1
		default:
			return j
		}
	}
	return len(s)
}

// stringLen returns the length of a control string's payload after its
// introducer, terminator included: up to BEL, ST (ESC \ or U+009C), or,
// for one that never ends, up to (not including) another ESC, a line break
// or the end of s.
func stringLen(s string) int {
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case bel:
			return j + 1
		case esc:
			if j+1 < len(s) && s[j+1] == '\\' {
				return j + 2
			}
			return j
		case '\n', '\r':
			return j
		case 0xc2: // the first byte of U+0080–U+00BF in UTF-8
			if j+1 < len(s) && s[j+1] == c1ST {
				return j + 2
			}
		}
	}
	return len(s)
}

// JSON returns the JSON text b with every character inside its strings that
// [Text] would show escaped and that encoding/json writes raw — DEL, the C1
// controls, the bidi embeddings, overrides and isolates, U+2028 and U+2029 —
// written as a JSON \u escape: a decoder reads the same data, a terminal
// obeys none of it. (encoding/json already escapes the C0 controls; U+2028
// and U+2029 only when not told otherwise.) Tag characters, outside the
// Basic Multilingual Plane, stay as they are: they move no cursor, and a
// YAML reader of this JSON cannot take the surrogate pair a \u escape of
// one needs. b is returned as it is when nothing needs escaping.
func JSON(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x7f && r <= 0xffff && unsafeRune(r) {
			out = append(out, b[last:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			last = i + size
		}
		i += size
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
