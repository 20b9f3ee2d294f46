// Package tail is a member's terminal tail: what its herdr pane shows, read
// without side effects, and — for a follower — the lines that appear as it
// changes. It is the one place fleetd reads and trims a terminal:
// `fleetd logs` (GET /members/{name}/logs) is built on [Tails], the text a
// turn_done carries and the console's terminal view are read by [Screen],
// and the console's glance at a blocked agent is an [Excerpt].
//
// [Screen] is the read: herdr's agent.read of the visible screen as plain
// text, never a read of more lines than the viewport, because protocol 22
// makes herdr scroll an idle alternate-screen agent (Claude Code, OpenCode)
// through its own history for a longer read, and looking at a terminal must
// change nothing; the blank bottom of the screen is left out and the last
// lines asked for kept. Its callers reach it through a [Reader], the
// messaging core's herdr adapter (herdrprompt.Prompter.ReadTail, which is
// Screen over herdr's client). A tail is therefore at most one screen;
// [MaxLines] bounds what a caller may ask for.
//
// Following ([Tails.Follow]) reads the screen again whenever herdr reports
// activity for the member — every change of its status that the
// controllers' cache of herdr's events produces (agent status, pane,
// phase) wakes the follower through [Members.WaitFor] — and otherwise every
// [Options.Refresh] (default one second). The refresh is needed because
// herdr has no event for new output that a client can subscribe to:
// pane_output_changed exists only as an events.wait match, which herdr
// refuses (unsupported_event_wait_match), and pane.output_matched fires on
// a match, not on change. A working agent prints without changing status,
// so its output shows within one refresh. What the follower emits is
// computed from two screens ([Next]): the lines added at the bottom when
// the screen scrolled or grew, or the whole screen, marked as a redraw,
// when it changed otherwise (a full-screen agent repainting). A slow
// consumer never queues anything: a follower holds one screen, and the
// next read is always of the current one.
//
// This package never writes to a terminal or a pane, never makes text safe
// for one (its callers print through internal/termtext) and holds no state
// beyond a follower's last screen.
package tail
