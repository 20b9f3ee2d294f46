// Package termtext makes text that someone else wrote safe to put on a
// terminal: to type into an agent's pane (herdr's agent.prompt) or to print
// from the CLI. Workers, labels, herdr and agents' own reports all supply
// strings that fleetd shows; any of them may carry bytes a terminal obeys
// rather than displays. This package turns such text into text that only
// displays.
//
// Two functions, one rule set:
//
//   - [Text] keeps newlines and tabs, for a block of lines: a prompt typed
//     into a pane, a reply printed by `fleetd send`. A carriage return (a
//     lone CR is the Enter key to a terminal application) becomes a newline;
//     CRLF is one newline.
//   - [Line] keeps neither, for one line: a table cell, a field of
//     `fleetd describe`, a header. Newlines and tabs are shown as `\n`,
//     `\t` (a raw tab would also split a tabwriter column).
//
// Both:
//
//   - drop every escape sequence whole, introducer, parameters and payload:
//     CSI (colours, cursor moves, the bracketed-paste markers ESC[200~ and
//     ESC[201~ — the latter ends herdr's paste early and turns the rest into
//     keystrokes), OSC (window titles, hyperlinks, OSC 52 clipboard writes),
//     DCS, SOS, PM and APC strings, and the two- and three-byte ESC forms
//     (charset switches, resets). The 8-bit C1 introducers (U+009B CSI,
//     U+009D OSC, U+0090 DCS, U+0098, U+009E, U+009F) count as their ESC
//     forms. A string sequence ends at BEL or ST; one that never ends stops
//     at the next line break (kept) so that it cannot swallow the rest of a
//     message. Sequences are formatting or commands, never text: dropping
//     them is what herdr's own strip_ansi does to terminal reads;
//   - show every other control character visibly, the way Go quotes it:
//     C0 (NUL, BEL, ^C = `\x03`, a lone ESC = `\x1b`), DEL (`\x7f`) and C1
//     (`\u0085`). The text says a control was there; the terminal never
//     receives it;
//   - show, in the same way, the Unicode characters that change what a
//     reader sees without being seen: the bidirectional embeddings,
//     overrides and isolates (U+202A–U+202E, U+2066–U+2069; "Trojan
//     Source": a terminal or UI that implements bidi reorders the line so
//     that a human reads something else than the agent receives), the line
//     and paragraph separators U+2028 and U+2029 (a reader may take them for
//     a line break, and a break is what a forged header needs), and the
//     invisible tag characters U+E0000–U+E007F (a model reads them, a human
//     cannot). The bidi marks LRM, RLM and ALM stay: they only steer
//     neutral characters, and right-to-left text needs them;
//   - replace invalid UTF-8 by U+FFFD, byte by byte.
//
// Everything else, every printable character in any script, passes
// unchanged, and text that needs no change is returned as it is, without
// copying. The output never contains a byte below 0x20 other than the
// newline and tab [Text] keeps, never DEL, never a C1 control, and is
// valid UTF-8; applying either function again changes nothing.
//
// [JSON] is the same rule for JSON output meant for a terminal: it writes
// the characters encoding/json leaves raw (DEL, C1, bidi controls, U+2028,
// U+2029) as \u escapes, which a decoder reads back unchanged.
//
// The output can be longer than the input (a control byte becomes four
// characters): a caller with a byte budget bounds the result, not the input.
// This package only rewrites strings: it knows no terminals, panes or
// framing. How fleetd frames worker text so that it cannot pass for
// fleetd's own lines is the messaging core's business.
package termtext
