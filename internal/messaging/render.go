package messaging

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/internal/termtext"
)

// quoteMark begins every line of a sender's text that fleetd types into the
// primary's pane, so that fleetd's header is the only line there that does
// not begin with it.
const quoteMark = ">"

// render is the text typed into a pane on someone else's behalf, made safe
// for a terminal (package termtext: escape sequences dropped, controls shown
// escaped, a carriage return made a newline) and at most
// Options.MaxContentBytes long.
//
// A prompt is typed as its sender wrote it. Anything else is mail for the
// primary, typed into its pane: one header line in fleetd's words,
//
//	[fleetd] reply from NAME (turn T):
//
// then the sender's text with every line quoted ("> " before it, ">" alone
// on an empty line). No text a worker sends can start a line of its own, so
// none can pass for fleetd's header: a forged "\n[fleetd] reply from …"
// arrives as "> [fleetd] reply from …", and a carriage return, U+2028 or an
// escape sequence that would break the line another way is a newline (and
// quoted) or shown escaped.
func (c *Core) render(m *Message) string {
	if m.Kind == KindPrompt {
		return clip(termtext.Text(m.Content), c.opts.MaxContentBytes, "the rest of this prompt did not fit into one prompt")
	}
	header := fmt.Sprintf("[fleetd] %s from %s:", termtext.Line(string(m.Kind)), termtext.Line(m.From))
	if m.TurnID != "" {
		header = fmt.Sprintf("[fleetd] %s from %s (turn %s):", termtext.Line(string(m.Kind)), termtext.Line(m.From), termtext.Line(m.TurnID))
	}
	return clip(header+quote(termtext.Text(m.Content)), c.opts.MaxContentBytes,
		"the rest is in your mailbox (bridge_poll)")
}

// quote returns text's lines, each on a line of its own after quoteMark;
// the newlines that end text add no empty line.
func quote(text string) string {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return ""
	}
	var b strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString("\n" + quoteMark)
		if line != "" {
			b.WriteString(" " + line)
		}
	}
	return b.String()
}

// clip bounds text to limit bytes: a longer text is cut at a character
// boundary and ends with a line in fleetd's words saying how much was cut
// and where the rest is (the one line after the header that is fleetd's
// own, and the last). Escaping can make a text longer than the content
// it came from; what is typed stays within the content bound.
func clip(text string, limit int, rest string) string {
	if len(text) <= limit {
		return text
	}
	const notice = "\n[fleetd] %d more bytes cut here: %s"
	// The notice's length with len(text), at least the count it will say.
	keep := limit - len(fmt.Sprintf(notice, len(text), rest))
	room := keep > 0
	if !room {
		keep = limit // a bound too small to say so: cut only
	}
	for keep > 0 && !utf8.RuneStart(text[keep]) {
		keep--
	}
	kept := strings.TrimRight(text[:keep], "\n")
	if !room {
		return kept
	}
	return kept + fmt.Sprintf(notice, len(text)-len(kept), rest)
}
