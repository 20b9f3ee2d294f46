package herdrsim

import (
	"encoding/json"
	"time"
)

// The long-running methods. Each runs on its connection's goroutine, sleeps
// on the model's change broadcast (never a polling loop) and stops silently,
// writing nothing, when the peer closes or sends any byte.

type waitEnd int

const (
	waitDone waitEnd = iota
	waitTimeout
	waitGone
)

// awaitLocked blocks until check (run with the lock held) is true, the
// deadline fires, the peer goes or the fake stops. It is called and returns
// with the lock held.
func (s *Server) awaitLocked(c *conn, deadline <-chan struct{}, check func() bool) waitEnd {
	gone := c.watchPeer()
	defer s.unparkLocked(c)
	for {
		if check() {
			return waitDone
		}
		s.parkLocked(c)
		ch := s.changed.Changed()
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-deadline:
			s.mu.Lock()
			if check() {
				return waitDone
			}
			return waitTimeout
		case <-gone:
			s.mu.Lock()
			return waitGone
		case <-c.stopped:
			s.mu.Lock()
			return waitGone
		}
	}
}

// awaitForLocked is awaitLocked with a deadline of ms milliseconds on the
// clock; nil ms waits without one.
func (s *Server) awaitForLocked(c *conn, ms *uint64, check func() bool) waitEnd {
	var deadline chan struct{}
	if ms != nil {
		deadline = make(chan struct{})
		cancel := s.afterLocked(time.Duration(*ms)*time.Millisecond, func() { close(deadline) })
		defer cancel()
	}
	return s.awaitLocked(c, deadline, check)
}

// response is a long call's answer; nil means write nothing (the peer left).
type response struct {
	id   string
	res  typed
	aerr *apiError
}

func reply(id string, res typed, aerr *apiError) *response {
	return &response{id: id, res: res, aerr: aerr}
}

var defaultUntil = []string{"idle", "done", "blocked"}

// matchedSince reports whether the agent showed one of until since the
// history index from, or shows it now.
func (a *agent) matchedSince(from int, until []string) bool {
	for _, st := range a.history[min(from, len(a.history)):] {
		if untilMatches(until, st) {
			return true
		}
	}
	return !a.gone && !a.released && untilMatches(until, a.pane.status())
}

// agent.prompt: text as a bracketed paste, Enter after EnterDelay. Protocol
// 20 answers without wait before Enter, and checks readiness before
// agent_blocked; protocol 22 checks agent_blocked first and answers only
// after Enter was written — or, under a [Fault] with PromptError, fails with
// that code after typing. With wait: unless already working, the agent must
// advance state_change_seq within min(timeout, 5 s) (agent_prompt_stalled,
// or timeout when timeout_ms ≤ 5000), then reach until within what is left.
func (s *Server) agentPrompt(c *conn, req Request) *response {
	var p struct {
		Target string `json:"target"`
		Text   string `json:"text"`
		Wait   *struct {
			Until     []string `json:"until"`
			TimeoutMS *uint64  `json:"timeout_ms"`
		} `json:"wait"`
	}
	if aerr := decode(req.Params, &p); aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Text == "" {
		return reply(req.ID, nil, errorf("empty_agent_prompt", "agent prompt text is empty"))
	}
	a, aerr := s.resolveAgentLocked(p.Target)
	blocked := func() *apiError {
		if a.state == stateBlocked || a.dialog != "" {
			return errorf("agent_blocked", "agent in pane %s is waiting at an approval or question dialog; nothing was sent", a.pane.id)
		}
		return nil
	}
	if aerr == nil && s.p22() {
		aerr = blocked()
	}
	if aerr == nil {
		aerr = interactiveLocked(a)
	}
	if aerr == nil && !s.p22() {
		aerr = blocked()
	}
	if aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	pn := a.pane
	seq0, hist0, wasWorking := a.seq, len(a.history), pn.status() == stateWorking
	start := s.clock.Now()
	s.pasteLocked(pn, p.Text)
	snap := s.agentInfoLocked(a)
	entered := false
	s.afterLocked(s.opts.EnterDelay, func() {
		if pn.agent == a && !a.gone {
			s.submitLocked(pn)
			entered = true
		}
	})
	s.notifyLocked()
	if s.p22() {
		// herdr 0.9 answers once the Enter is written.
		switch s.awaitLocked(c, nil, func() bool { return entered || pn.agent != a || a.gone }) {
		case waitGone:
			return nil
		}
		if !entered {
			return reply(req.ID, nil, errorf("agent_prompt_failed", "agent in pane %s went away before Enter was sent; the text was typed", pn.id))
		}
		if code := c.promptError; code != "" {
			return reply(req.ID, nil, errorf(code, "agent.prompt failed after typing the text into pane %s", pn.id))
		}
		snap = s.agentInfoLocked(a)
	}
	if p.Wait == nil {
		return reply(req.ID, result("agent_prompted", "agent", snap), nil)
	}
	until := p.Wait.Until
	if len(until) == 0 {
		until = defaultUntil
	}
	timeout := p.Wait.TimeoutMS
	ended := func() bool { return a.gone || a.released }
	if !wasWorking {
		stall := uint64(5000)
		if timeout != nil && *timeout < stall {
			stall = *timeout
		}
		end := s.awaitForLocked(c, &stall, func() bool { return a.seq != seq0 || ended() })
		switch end {
		case waitGone:
			return nil
		case waitTimeout:
			if timeout != nil && *timeout <= 5000 {
				return reply(req.ID, nil, errorf("timeout", "timed out after %d ms waiting for the agent to pick up the prompt", *timeout))
			}
			return reply(req.ID, nil, errorf("agent_prompt_stalled", "agent in pane %s did not react to the prompt within 5000 ms", pn.id))
		}
	}
	var remaining *uint64
	if timeout != nil {
		left := uint64(0)
		if elapsed := uint64(s.clock.Now().Sub(start).Milliseconds()); elapsed < *timeout {
			left = *timeout - elapsed
		}
		remaining = &left
	}
	end := s.awaitForLocked(c, remaining, func() bool { return a.matchedSince(hist0, until) || ended() })
	switch {
	case end == waitGone:
		return nil
	case a.matchedSince(hist0, until):
		return reply(req.ID, result("agent_prompted", "agent", s.agentInfoLocked(a)), nil)
	case ended():
		return reply(req.ID, nil, errorf("agent_not_running", "agent in pane %s is no longer running", pn.id))
	default:
		return reply(req.ID, nil, errorf("timeout", "timed out waiting for agent in pane %s", pn.id))
	}
}

// agent.wait pins the agent once; a status seen in between counts; the
// pane closing or exiting, or the agent being released or replaced, ends
// it with agent_not_running unless the release's final status is wanted.
func (s *Server) agentWait(c *conn, req Request) *response {
	var p struct {
		Target    string   `json:"target"`
		Until     []string `json:"until"`
		TimeoutMS *uint64  `json:"timeout_ms"`
	}
	if aerr := decode(req.Params, &p); aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	until := p.Until
	if len(until) == 0 {
		until = defaultUntil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, aerr := s.resolveAgentLocked(p.Target)
	if aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	hist0 := len(a.history)
	ended := func() bool { return a.gone || a.released }
	end := s.awaitForLocked(c, p.TimeoutMS, func() bool { return a.matchedSince(hist0, until) || ended() })
	info := s.agentInfoLocked(a)
	switch {
	case end == waitGone:
		return nil
	case a.matchedSince(hist0, until):
		if ended() {
			info.AgentStatus = a.history[len(a.history)-1]
		}
		return reply(req.ID, result("agent_info", "agent", info), nil)
	case a.released && untilMatches(until, a.finalStatus):
		info.AgentStatus = a.finalStatus
		return reply(req.ID, result("agent_info", "agent", info), nil)
	case ended():
		return reply(req.ID, nil, errorf("agent_not_running", "agent in pane %s is no longer running", a.pane.id))
	default:
		return reply(req.ID, nil, errorf("timeout", "timed out waiting for agent in pane %s", a.pane.id))
	}
}

// events.wait supports only pane_agent_status_changed; it matches at once
// when the pane already has the status, and fails with pane_not_found
// (under the probe id in protocol 20) when the pane is missing or goes away.
func (s *Server) eventsWait(c *conn, req Request) *response {
	var p struct {
		MatchEvent struct {
			Event       string `json:"event"`
			PaneID      string `json:"pane_id"`
			AgentStatus string `json:"agent_status"`
		} `json:"match_event"`
		TimeoutMS *uint64 `json:"timeout_ms"`
	}
	if aerr := decode(req.Params, &p); aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	m := p.MatchEvent
	if m.Event != "pane_agent_status_changed" {
		return reply(req.ID, nil, errorf("unsupported_event_wait_match", "events.wait does not support %s", m.Event))
	}
	probeID := s.probeID(req, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	pn := s.findPaneLocked(m.PaneID)
	if pn == nil {
		return reply(probeID, nil, paneNotFound(m.PaneID))
	}
	var matched typed
	cursor := s.lastSeq
	check := func() bool {
		for _, ev := range s.eventsAfterLocked(cursor) {
			cursor = ev.seq
			if ev.paneID == m.PaneID && ev.status == m.AgentStatus {
				matched = ev.data
				return true
			}
		}
		if s.findPaneLocked(m.PaneID) != pn {
			return true
		}
		if pn.status() == m.AgentStatus {
			d := statusData(pn)
			d.Type = "pane_agent_status_changed"
			json.Unmarshal(mustMarshal(d), &matched)
			return true
		}
		return false
	}
	end := s.awaitForLocked(c, p.TimeoutMS, check)
	switch {
	case end == waitGone:
		return nil
	case matched != nil:
		return reply(req.ID, result("wait_matched", "event", envelope{Event: "pane_agent_status_changed", Data: matched}), nil)
	case end == waitDone:
		return reply(probeID, nil, paneNotFound(m.PaneID))
	default:
		return reply(req.ID, nil, errorf("timeout", "timed out waiting for pane_agent_status_changed on %s", m.PaneID))
	}
}

// pane.wait_for_output matches per line of the read; text already present
// matches at once.
func (s *Server) waitForOutput(c *conn, req Request) *response {
	var p struct {
		PaneID    string      `json:"pane_id"`
		Source    string      `json:"source"`
		Lines     *int        `json:"lines"`
		Match     outputMatch `json:"match"`
		TimeoutMS *uint64     `json:"timeout_ms"`
	}
	if aerr := decode(req.Params, &p); aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	re, aerr := p.Match.compile()
	if aerr != nil {
		return reply(req.ID, nil, aerr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res typed
	var missing bool
	check := func() bool {
		pn := s.findPaneLocked(p.PaneID)
		if pn == nil {
			missing = true
			return true
		}
		read := s.readLocked(pn, waitSource(p.Source), p.Lines, "text")
		if line, ok := p.Match.find(read.Text, re); ok {
			res = result("output_matched", "pane_id", pn.id, "revision", read.Revision, "matched_line", line, "read", read)
			return true
		}
		return false
	}
	end := s.awaitForLocked(c, p.TimeoutMS, check)
	switch {
	case end == waitGone:
		return nil
	case res != nil:
		return reply(req.ID, res, nil)
	case missing:
		return reply(req.ID, nil, paneNotFound(p.PaneID))
	default:
		return reply(req.ID, nil, errorf("timeout", "timed out waiting for output match"))
	}
}
