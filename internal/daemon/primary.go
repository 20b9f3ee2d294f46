package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
)

// primaryHerdr is the slice of herdr the primary-pane follower needs.
type primaryHerdr interface {
	Subscribe(ctx context.Context, subs []herdr.Subscription) (*herdr.Stream, error)
	GetAgent(ctx context.Context, target string) (*herdr.AgentInfo, error)
}

// primaryFollower feeds the messaging core the agent status of the
// primary's own pane (`fleetd serve --primary-pane`), so that mail for the
// primary with nobody waiting is also typed into that pane, and only while
// its agent is idle or done (DESIGN §5.3, flow 3). The controllers follow
// member panes only; this pane belongs to the user and fleetd never changes
// it beyond typing those prompts.
//
// It holds its own per-pane pane.agent_status_changed subscription and,
// after each (re)subscription, reads the agent once with agent.get so that a
// change made while no stream was open is not lost. A dropped stream or a
// refused subscription (the pane does not exist yet, herdr is down) is
// retried with a capped backoff until ctx ends.
type primaryFollower struct {
	herdr   primaryHerdr
	pane    string
	name    string // the primary's name in the messaging core
	observe func(name, status string, seq uint64)
	log     *slog.Logger
	// minBackoff and maxBackoff bound the wait between attempts.
	minBackoff, maxBackoff time.Duration

	// seq counts the status changes observed: herdr's status events carry
	// no state_change_seq, so the core gets one source of numbering for
	// this pane, growing for the life of the process.
	seq  uint64
	last string
}

// run follows the pane until ctx ends.
func (p *primaryFollower) run(ctx context.Context) {
	backoff := p.minBackoff
	lastErr := ""
	for {
		established, err := p.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if established {
			backoff = p.minBackoff
		}
		// A pane that stays away would log every few seconds: warn when
		// the reason changes, keep the repeats for debugging.
		level := slog.LevelWarn
		if err.Error() == lastErr {
			level = slog.LevelDebug
		}
		lastErr = err.Error()
		p.log.Log(ctx, level, "lost the primary pane's agent status; retrying", "pane", p.pane, "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, p.maxBackoff)
	}
}

// follow subscribes, catches up with agent.get and forwards status events
// until the stream ends. established reports whether the subscription was
// accepted.
func (p *primaryFollower) follow(ctx context.Context) (established bool, err error) {
	stream, err := p.herdr.Subscribe(ctx, []herdr.Subscription{{Type: herdr.SubPaneAgentStatusChanged, PaneID: p.pane}})
	if err != nil {
		return false, err
	}
	defer stream.Close()
	info, err := p.herdr.GetAgent(ctx, p.pane)
	switch {
	case err == nil:
		p.saw(string(info.AgentStatus), false)
	case ctx.Err() != nil:
		return true, ctx.Err()
	default:
		// No agent on the pane yet (or it left): nothing may be typed
		// until an event says otherwise.
		p.log.Info("primary pane has no agent status yet", "pane", p.pane, "err", err)
	}
	for ev := range stream.Events() {
		if ev.Kind == herdr.EventPaneAgentStatusChanged && (ev.PaneID == "" || ev.PaneID == p.pane) {
			p.saw(string(ev.AgentStatus), true)
		}
	}
	if err := stream.Err(); err != nil {
		return true, err
	}
	return true, errors.New("status stream ended")
}

// saw reports one observation to the core. An event is always a change; a
// catch-up read counts as one only if the status differs from the last seen,
// so that re-reading does not look like the agent picking a prompt up.
func (p *primaryFollower) saw(status string, event bool) {
	if status == "" {
		return
	}
	if event || status != p.last {
		p.seq++
	}
	p.last = status
	p.observe(p.name, status, p.seq)
}
