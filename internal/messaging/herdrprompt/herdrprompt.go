package herdrprompt

import (
	"context"
	"errors"
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
// returns as soon as herdr has typed it. A failure is a
// *messaging.PromptError classified by [Classify] that wraps herdr's error
// unchanged.
func (p Prompter) Prompt(ctx context.Context, target, text string) error {
	if _, err := p.c.PromptAgent(ctx, herdr.AgentPromptParams{Target: target, Text: text}); err != nil {
		err = fmt.Errorf("prompt agent %s: %w", target, err)
		pe := &messaging.PromptError{Verdict: Classify(err), Err: err}
		if herdr.IsCode(err, "agent_blocked") {
			pe.Status = messaging.StatusBlocked
		}
		return pe
	}
	return nil
}

// Classify sorts the errors of agent.prompt: codes herdr returns before it
// types anything are NotSent, agent_prompt_stalled and agent_prompt_failed
// are Uncertain, other herdr codes Failed; herdr unreachable (dial failed) is
// NotSent, a connection that broke after the request is Uncertain, and so is
// anything unrecognised.
func Classify(err error) messaging.Verdict {
	if err == nil {
		return messaging.Delivered
	}
	if he, ok := errors.AsType[*herdr.Error](err); ok {
		switch he.Code {
		case "agent_blocked", "agent_not_ready", "agent_not_idle", "agent_launch_pending",
			"agent_pane_busy", "agent_pane_unavailable", "agent_not_running":
			return messaging.NotSent
		case "agent_prompt_stalled", "agent_prompt_failed", "timeout":
			return messaging.Uncertain
		default:
			return messaging.Failed
		}
	}
	if te, ok := errors.AsType[*herdr.TransportError](err); ok && te.Reason == herdr.ReasonUnavailable {
		return messaging.NotSent
	}
	return messaging.Uncertain
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
