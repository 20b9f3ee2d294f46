package tail

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetd-dev/fleetd/herdr"
)

// Agents is the part of herdr's client a screen is read through
// (*herdr.Client).
type Agents interface {
	ReadAgent(ctx context.Context, p herdr.AgentReadParams) (*herdr.PaneReadResult, error)
}

// Screen reads what the agent target (a pane id or live agent name) shows:
// herdr's visible screen as plain text, ANSI sequences stripped, never more
// lines than the viewport (a longer read makes herdr scroll an idle
// alternate-screen agent through its history). It returns the last lines
// lines (0: all) of it, the blank bottom of the screen left out, joined by
// LF. It is fleetd's one read of a terminal; a [Reader] is this read over
// a client (herdrprompt.Prompter).
func Screen(ctx context.Context, a Agents, target string, lines int) (string, error) {
	strip := true
	r, err := a.ReadAgent(ctx, herdr.AgentReadParams{Target: target, Source: herdr.SourceVisible,
		Format: herdr.FormatText, StripANSI: &strip})
	if err != nil {
		return "", fmt.Errorf("read agent %s: %w", target, err)
	}
	return strings.Join(lastN(split(strings.TrimRight(r.Text, " \n")), lines), "\n"), nil
}

// Excerpt returns the last n lines of a tail that hold something, right
// trimmed, oldest first, joined by LF: what a glance at a terminal shows
// (the console's note of an agent blocked at a prompt).
func Excerpt(text string, n int) string {
	var out []string
	all := strings.Split(text, "\n")
	for i := len(all) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimRight(all[i], " \t"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	slices.Reverse(out)
	return strings.Join(out, "\n")
}
