package herdr

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// DefaultPollInterval is how often [Client.StartAgent] polls agent.get, as
// herdr's CLI does.
const DefaultPollInterval = 100 * time.Millisecond

// DefaultAgentStartTimeout is herdr's agent.start timeout when none is given.
const DefaultAgentStartTimeout = 30 * time.Second

type agentTarget struct {
	Target string `json:"target"`
}

type agentResult struct {
	resultTag
	Agent AgentInfo `json:"agent"`
}

// LaunchAgent calls agent.start: herdr types the agent's command into the pane
// and returns at once with the agent launch-pending. Most callers want
// [Client.StartAgent], which also waits for readiness.
func (c *Client) LaunchAgent(ctx context.Context, p AgentStartParams) (*AgentStarted, error) {
	var r struct {
		resultTag
		AgentStarted
	}
	if err := c.call(ctx, "agent.start", p, "agent_started", &r); err != nil {
		return nil, err
	}
	return &r.AgentStarted, nil
}

// DefaultBusyRetry bounds how long [Client.StartAgent] retries
// agent_pane_busy on a fresh pane whose shell is still starting, as herdr's
// CLI does (2 s).
const DefaultBusyRetry = 2 * time.Second

// StartAgent starts an agent the way herdr's CLI does and waits until it is
// interactive-ready, which it returns:
//
//   - it pins the pane's terminal_id first (pane.get);
//   - it calls agent.start, retrying agent_pane_busy every pollInterval for
//     up to [DefaultBusyRetry] (herdr 0.9 refuses a new pane whose shell is
//     still starting), re-reading the pane before each retry;
//   - it polls agent.get by name every pollInterval (DefaultPollInterval if
//     ≤ 0) until the agent is interactive-ready.
//
// It fails fast, with errors matching [ErrAgentStartFailed], when the pane
// gets another terminal_id ([ErrPaneReplaced]), when herdr reports another
// agent kind than p.Kind ([ErrAgentKindMismatch]), when the agent is neither
// launch-pending nor ready (herdr gave up: another agent was detected or the
// process exited), when polling fails (herdr clears the name of a failed
// launch, so agent.get then says agent_not_found), or — also matching
// [ErrAgentStartTimeout] — when p.TimeoutMS (default 30 s) passes first. A
// refusal of agent.start itself (agent_pane_busy after the retries,
// agent_name_taken, …) is herdr's *Error, not a readiness failure.
//
// An agent that comes up blocked at a dialog (launch-pending, not
// interactive-ready, status blocked) is not a failed start: StartAgent
// returns its info with an error matching [ErrAgentAwaitingInput] at once;
// herdr keeps it pending without a deadline until a person answers. herdr
// does not kill the process of a failed launch; the caller decides what to
// do with the pane. All waiting is on the client's clock.
func (c *Client) StartAgent(ctx context.Context, p AgentStartParams, pollInterval time.Duration) (*AgentInfo, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	timeout := DefaultAgentStartTimeout
	if p.TimeoutMS > 0 {
		timeout = time.Duration(p.TimeoutMS) * time.Millisecond
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("start agent %q in %s: "+format, append([]any{p.Name, p.PaneID}, args...)...)
	}
	start := c.now()
	pane, err := c.GetPane(ctx, p.PaneID)
	if err != nil {
		return nil, fail("%w", err)
	}
	terminal := pane.TerminalID
	var started *AgentStarted
	for {
		started, err = c.LaunchAgent(ctx, p)
		if !IsCode(err, "agent_pane_busy") || c.now().Sub(start) >= DefaultBusyRetry {
			break
		}
		if err := c.sleep(ctx, pollInterval); err != nil {
			return nil, fail("%w", err)
		}
		pane, err := c.GetPane(ctx, p.PaneID)
		if err != nil {
			return nil, fail("%w", err)
		}
		if pane.TerminalID != terminal {
			return nil, fail("%w: %w: terminal %s became %s while its shell started", ErrAgentStartFailed, ErrPaneReplaced, terminal, pane.TerminalID)
		}
	}
	if err != nil {
		return nil, fail("%w", err)
	}
	a := &started.Agent
	for {
		switch {
		case a.TerminalID != "" && a.TerminalID != terminal:
			return nil, fail("%w: %w: terminal %s became %s", ErrAgentStartFailed, ErrPaneReplaced, terminal, a.TerminalID)
		case a.Agent != "" && CanonicalKind(a.Agent) != CanonicalKind(p.Kind):
			return nil, fail("%w: %w: herdr reports a %s agent, want %s", ErrAgentStartFailed, ErrAgentKindMismatch, a.Agent, p.Kind)
		case a.InteractiveReady:
			return a, nil
		case a.LaunchPending && a.AgentStatus == StatusBlocked:
			return a, fail("%w (status blocked, launch pending)", ErrAgentAwaitingInput)
		case !a.LaunchPending:
			return nil, fail("%w: herdr reports it neither launch-pending nor ready (status %s, agent %q)",
				ErrAgentStartFailed, a.AgentStatus, a.Agent)
		}
		if c.now().Sub(start) >= timeout {
			return nil, fail("%w: %w: not interactive-ready after %s", ErrAgentStartFailed, ErrAgentStartTimeout, timeout)
		}
		if err := c.sleep(ctx, pollInterval); err != nil {
			return nil, fail("%w", err)
		}
		if a, err = c.GetAgent(ctx, p.Name); err != nil {
			return nil, fail("%w: %w", ErrAgentStartFailed, err)
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CanonicalKind is herdr's canonical spelling of an agent kind: lower case,
// with herdr's aliases resolved (claude-code → claude, cursor-agent →
// cursor, kiro-cli → kiro, qwen-code → qwen).
func CanonicalKind(kind string) string {
	k := strings.ToLower(kind)
	switch k {
	case "claude-code":
		return "claude"
	case "cursor-agent":
		return "cursor"
	case "kiro-cli":
		return "kiro"
	case "qwen-code":
		return "qwen"
	}
	return k
}

// GetAgent returns an agent by pane id or live agent name (agent.get).
func (c *Client) GetAgent(ctx context.Context, target string) (*AgentInfo, error) {
	var r agentResult
	if err := c.call(ctx, "agent.get", agentTarget{target}, "agent_info", &r); err != nil {
		return nil, err
	}
	return &r.Agent, nil
}

// ListAgents lists all agents (agent.list).
func (c *Client) ListAgents(ctx context.Context) ([]AgentInfo, error) {
	var r struct {
		resultTag
		Agents []AgentInfo `json:"agents"`
	}
	if err := c.call(ctx, "agent.list", nil, "agent_list", &r); err != nil {
		return nil, err
	}
	return r.Agents, nil
}

// PromptAgent types a prompt into an agent and presses Enter (agent.prompt).
// herdr refuses a blocked agent with agent_blocked and sends nothing. With
// p.Wait it is a long call that ends when ctx does.
func (c *Client) PromptAgent(ctx context.Context, p AgentPromptParams) (*AgentInfo, error) {
	var r agentResult
	if err := c.call(ctx, "agent.prompt", p, "agent_prompted", &r); err != nil {
		return nil, err
	}
	return &r.Agent, nil
}

// WaitAgent waits until the agent's status is one of p.Until (agent.wait). It
// is a long call: cancelling ctx closes the connection, which herdr notices
// within 100 ms.
func (c *Client) WaitAgent(ctx context.Context, p AgentWaitParams) (*AgentInfo, error) {
	var r agentResult
	if err := c.call(ctx, "agent.wait", p, "agent_info", &r); err != nil {
		return nil, err
	}
	return &r.Agent, nil
}

// ReadAgent reads the terminal text of an agent's pane (agent.read). Beware:
// herdr 0.9 serves a read of more recent lines than the screen
// (scroll.viewport_rows) of an idle alternate-screen agent (Claude Code,
// OpenCode) by scrolling the agent's own history with mouse input; read
// SourceVisible, or no more lines than the viewport, when a read must have
// no effect.
func (c *Client) ReadAgent(ctx context.Context, p AgentReadParams) (*PaneReadResult, error) {
	var r struct {
		resultTag
		Read PaneReadResult `json:"read"`
	}
	if err := c.call(ctx, "agent.read", p, "pane_read", &r); err != nil {
		return nil, err
	}
	return &r.Read, nil
}

// SendAgentKeys presses keys in an agent's pane (agent.send_keys).
func (c *Client) SendAgentKeys(ctx context.Context, target string, keys []string) error {
	return c.call(ctx, "agent.send_keys", struct {
		Target string   `json:"target"`
		Keys   []string `json:"keys"`
	}{target, nonNil(keys)}, "ok", nil)
}

// RenameAgent gives an agent a new name, or clears its name when name is empty
// (agent.rename).
func (c *Client) RenameAgent(ctx context.Context, target, name string) (*AgentInfo, error) {
	var r agentResult
	if err := c.call(ctx, "agent.rename", struct {
		Target string `json:"target"`
		Name   string `json:"name,omitempty"`
	}{target, name}, "agent_info", &r); err != nil {
		return nil, err
	}
	return &r.Agent, nil
}
