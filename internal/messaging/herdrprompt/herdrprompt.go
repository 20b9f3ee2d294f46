package herdrprompt

import (
	"context"
	"fmt"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// Client is the part of *herdr.Client the adapter uses.
type Client interface {
	PromptAgent(ctx context.Context, p herdr.AgentPromptParams) (*herdr.AgentInfo, error)
	ReadAgent(ctx context.Context, p herdr.AgentReadParams) (*herdr.PaneReadResult, error)
}

// Prompter is a messaging.Prompter over a herdr client.
type Prompter struct{ c Client }

var _ messaging.Prompter = Prompter{}

// New returns a Prompter that talks to herdr through c.
func New(c Client) Prompter { return Prompter{c: c} }

// Prompt types text into the agent target (a pane id or live agent name) and
// returns as soon as herdr has typed it.
func (p Prompter) Prompt(ctx context.Context, target, text string) error {
	if _, err := p.c.PromptAgent(ctx, herdr.AgentPromptParams{Target: target, Text: text}); err != nil {
		return fmt.Errorf("prompt agent %s: %w", target, err)
	}
	return nil
}

// ReadTail returns the last lines of the agent's terminal as plain text.
func (p Prompter) ReadTail(ctx context.Context, target string, lines int) (string, error) {
	strip := true
	r, err := p.c.ReadAgent(ctx, herdr.AgentReadParams{Target: target, Source: herdr.SourceRecentUnwrapped,
		Lines: lines, Format: herdr.FormatText, StripANSI: &strip})
	if err != nil {
		return "", fmt.Errorf("read agent %s: %w", target, err)
	}
	return r.Text, nil
}
