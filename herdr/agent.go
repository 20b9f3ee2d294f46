package herdr

import (
	"context"
	"fmt"
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
	Agent AgentInfo `json:"agent"`
}

// LaunchAgent calls agent.start: herdr types the agent's command into the pane
// and returns at once with the agent launch-pending. Most callers want
// [Client.StartAgent], which also waits for readiness.
func (c *Client) LaunchAgent(ctx context.Context, p AgentStartParams) (*AgentStarted, error) {
	var r AgentStarted
	if err := c.call(ctx, "agent.start", p, "agent_started", &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// StartAgent starts an agent the way herdr's CLI does: agent.start, then
// agent.get by name every pollInterval (DefaultPollInterval if ≤ 0) until the
// agent is interactive-ready, which it returns. It fails, with an error
// matching [ErrAgentStartFailed], when the agent is neither launch-pending nor
// ready (herdr gave up: another agent was detected or the process exited),
// when polling fails (herdr clears the name of a failed launch, so agent.get
// then says agent_not_found), or — also matching [ErrAgentStartTimeout] — when
// p.TimeoutMS (default 30 s) passes first. herdr does not kill the process of
// a failed launch; the caller decides what to do with the pane.
func (c *Client) StartAgent(ctx context.Context, p AgentStartParams, pollInterval time.Duration) (*AgentInfo, error) {
	if pollInterval <= 0 {
		pollInterval = DefaultPollInterval
	}
	timeout := DefaultAgentStartTimeout
	if p.TimeoutMS > 0 {
		timeout = time.Duration(p.TimeoutMS) * time.Millisecond
	}
	start := c.now()
	started, err := c.LaunchAgent(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("start agent %q in %s: %w", p.Name, p.PaneID, err)
	}
	if started.Agent.InteractiveReady {
		return &started.Agent, nil
	}
	timer := time.NewTimer(pollInterval)
	defer timer.Stop()
	for {
		if elapsed := c.now().Sub(start); elapsed >= timeout {
			return nil, fmt.Errorf("start agent %q in %s: %w: %w: not interactive-ready after %s",
				p.Name, p.PaneID, ErrAgentStartFailed, ErrAgentStartTimeout, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start agent %q in %s: %w", p.Name, p.PaneID, ctx.Err())
		case <-timer.C:
		}
		a, err := c.GetAgent(ctx, p.Name)
		if err != nil {
			return nil, fmt.Errorf("start agent %q in %s: %w: %w", p.Name, p.PaneID, ErrAgentStartFailed, err)
		}
		if a.InteractiveReady {
			return a, nil
		}
		if !a.LaunchPending {
			return nil, fmt.Errorf("start agent %q in %s: %w: herdr reports it neither launch-pending nor ready (status %s, agent %q)",
				p.Name, p.PaneID, ErrAgentStartFailed, a.AgentStatus, a.Agent)
		}
		timer.Reset(pollInterval)
	}
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

// ReadAgent reads the terminal text of an agent's pane (agent.read).
func (c *Client) ReadAgent(ctx context.Context, p AgentReadParams) (*PaneReadResult, error) {
	var r struct {
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
