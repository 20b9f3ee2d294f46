package herdrsim

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// hubEvent is one entry of herdr's event hub: a lifecycle event in its
// EventEnvelope form, plus for agent-status events what per-pane
// subscriptions need.
type hubEvent struct {
	seq    uint64
	kind   string
	data   typed
	line   []byte // {"event":"<kind>","data":{"type":"<kind>",…}}
	paneID string // pane_agent_status_changed only
	status string // pane_agent_status_changed only
	sub    []byte // per-pane form: {"event":"pane.agent_status_changed","data":{…}} without "type"
}

// emitLocked appends a lifecycle event to the hub ring.
func (s *Server) emitLocked(kind string, data typed) {
	data["type"] = kind
	s.lastSeq++
	ev := hubEvent{seq: s.lastSeq, kind: kind, data: data, line: mustMarshal(envelope{Event: kind, Data: data})}
	s.appendEventLocked(ev)
}

func (s *Server) appendEventLocked(ev hubEvent) {
	s.events = append(s.events, ev)
	if over := len(s.events) - s.opts.EventRing; over > 0 {
		// Reslice rather than copy the whole ring on every event: append
		// moves the live tail to a fresh array when the old one is full.
		s.events = s.events[over:]
	}
	s.notifyLocked()
}

// publishStatusLocked publishes p's public status if it changed: the hub's
// pane_agent_status_changed (what events.wait and per-pane subscriptions
// see) followed by pane_updated.
func (s *Server) publishStatusLocked(p *pane) {
	st := p.status()
	if st == p.lastStatus {
		return
	}
	p.lastStatus = st
	if p.agent != nil {
		p.agent.history = append(p.agent.history, st)
	}
	d := statusData(p)
	sub := mustMarshal(envelope{Event: "pane.agent_status_changed", Data: d})
	d.Type = "pane_agent_status_changed"
	var data typed
	json.Unmarshal(mustMarshal(d), &data)
	s.lastSeq++
	s.appendEventLocked(hubEvent{
		seq: s.lastSeq, kind: d.Type, data: data,
		line:   mustMarshal(envelope{Event: d.Type, Data: d}),
		paneID: p.id, status: st, sub: sub,
	})
	s.statusSeq[p.id] = s.lastSeq
	s.emitLocked("pane_updated", typed{"pane": s.paneInfoLocked(p)})
}

// statusData is p's current status in the per-pane (untagged) form.
func statusData(p *pane) statusEventData {
	d := statusEventData{PaneID: p.id, WorkspaceID: p.tab.ws.id, AgentStatus: p.status()}
	if a := p.agent; a != nil && a.ready {
		d.Agent = a.kind
	}
	return d
}

// eventsAfterLocked returns the ring's events newer than seq.
func (s *Server) eventsAfterLocked(seq uint64) []hubEvent {
	// The ring is in sequence order: a binary search, since every
	// subscription of every connection asks on every tick.
	i, _ := slices.BinarySearchFunc(s.events, seq+1, func(ev hubEvent, target uint64) int {
		switch {
		case ev.seq < target:
			return -1
		case ev.seq > target:
			return 1
		}
		return 0
	})
	if i == len(s.events) {
		return nil
	}
	return s.events[i:]
}

// subscription is one entry of an events.subscribe request.
type subscription struct {
	kind    string // lifecycle: the snake_case event kind
	perPane string // per-pane: the dot-named subscription type
	cursor  uint64

	paneID  string
	filter  string // agent_status filter
	initial []byte // status already matching the filter at setup

	source   string
	lines    *int
	matcher  outputMatch
	re       *regexp.Regexp
	matching bool
}

type outputMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// find reports the first line of text that matches.
func (m outputMatch) find(text string, re *regexp.Regexp) (string, bool) {
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if (m.Type == "regex" && re.MatchString(line)) || (m.Type != "regex" && strings.Contains(line, m.Value)) {
			return line, true
		}
	}
	return "", false
}

func (m outputMatch) compile() (*regexp.Regexp, *apiError) {
	if m.Type != "regex" {
		return nil, nil
	}
	re, err := regexp.Compile(m.Value)
	if err != nil {
		return nil, &apiError{Code: "invalid_regex", Message: err.Error()}
	}
	return re, nil
}

// poll returns the subscription's next lines: in protocol 22 every pending
// one (herdr 0.9 sends bursts in full), in protocol 20 at most one per round
// (herdr 0.8.2's per-tick loop). lost reports that, in protocol 22, events
// this subscriber had not yet seen left the retained history.
func (sub *subscription) poll(s *Server) (lines [][]byte, lost bool) {
	one := !s.p22()
	if sub.perPane != "pane.output_matched" && s.p22() && len(s.events) > 0 && s.events[0].seq > sub.cursor+1 {
		return nil, true
	}
	switch sub.perPane {
	case "":
		for _, ev := range s.eventsAfterLocked(sub.cursor) {
			sub.cursor = ev.seq
			if ev.kind == sub.kind {
				lines = append(lines, ev.line)
				if one {
					return lines, false
				}
			}
		}
	case "pane.agent_status_changed":
		saw := false
		if s.statusSeq[sub.paneID] <= sub.cursor {
			// No status event of the pane after the cursor:
			// pollStatusLocked would only move it to the newest event.
			if n := len(s.events); n > 0 && s.events[n-1].seq > sub.cursor {
				sub.cursor = s.events[n-1].seq
			}
		} else {
			saw = s.pollStatusLocked(sub, &lines, one)
			if one && len(lines) > 0 {
				return lines, false
			}
		}
		if saw {
			sub.initial = nil
		}
		if line := sub.initial; line != nil && len(lines) == 0 {
			sub.initial = nil
			return [][]byte{line}, false
		}
	case "pane.output_matched":
		p := s.findPaneLocked(sub.paneID)
		if p == nil {
			return nil, false
		}
		read := s.readLocked(p, waitSource(sub.source), sub.lines, "text")
		line, ok := sub.matcher.find(read.Text, sub.re)
		if !ok {
			sub.matching = false
			return nil, false
		}
		if sub.matching {
			return nil, false
		}
		sub.matching = true
		return [][]byte{mustMarshal(envelope{Event: "pane.output_matched", Data: typed{"pane_id": p.id, "matched_line": line, "read": read}})}, false
	}
	return lines, false
}

// pollStatusLocked is poll's walk of the ring for a per-pane status
// subscription: it appends the pane's status lines after the cursor (at
// most one in protocol 20) and reports whether it saw a status of the pane.
func (s *Server) pollStatusLocked(sub *subscription, lines *[][]byte, one bool) (saw bool) {
	for _, ev := range s.eventsAfterLocked(sub.cursor) {
		sub.cursor = ev.seq
		if ev.paneID != sub.paneID || ev.sub == nil {
			continue
		}
		saw = true
		if sub.filter != "" && sub.filter != ev.status {
			continue
		}
		sub.initial = nil
		*lines = append(*lines, ev.sub)
		if one {
			return saw
		}
	}
	return saw
}

// waitSource is herdr's mapping for waits and subscriptions: recent reads
// unwrapped.
func waitSource(source string) string {
	if source == "recent" {
		return "recent_unwrapped"
	}
	return source
}

type subscribeParams struct {
	Subscriptions []struct {
		Type        string       `json:"type"`
		PaneID      string       `json:"pane_id"`
		AgentStatus *string      `json:"agent_status"`
		Source      string       `json:"source"`
		Lines       *int         `json:"lines"`
		Match       *outputMatch `json:"match"`
	} `json:"subscriptions"`
}

// subscribe runs events.subscribe: setup (all or nothing: the first failure
// is one error line and the end), the ack, then event lines until the peer
// or the fake goes — or, in protocol 22, until the subscriber falls behind
// the retained history (events_lost).
func (s *Server) subscribe(c *conn, req Request) {
	var p subscribeParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		c.writeLine(s.invalidRequest(req, err))
		return
	}
	s.mu.Lock()
	subs := make([]*subscription, 0, len(p.Subscriptions))
	for i, spec := range p.Subscriptions {
		sub := &subscription{}
		switch spec.Type {
		case "pane.agent_status_changed", "pane.output_matched", "pane.scroll_changed":
			sub.perPane, sub.paneID = spec.Type, spec.PaneID
			if spec.Match != nil {
				sub.matcher = *spec.Match
				re, aerr := sub.matcher.compile()
				if aerr != nil {
					s.mu.Unlock()
					c.writeLine(s.errLine(aerr, req, req.ID))
					return
				}
				sub.re = re
			}
			pn := s.findPaneLocked(spec.PaneID)
			if pn == nil {
				s.mu.Unlock()
				c.writeLine(s.errLine(paneNotFound(spec.PaneID), req, s.probeID(req, i)))
				return
			}
			sub.cursor = s.lastSeq
			sub.source, sub.lines = spec.Source, spec.Lines
			if spec.AgentStatus != nil {
				sub.filter = *spec.AgentStatus
				if pn.status() == sub.filter {
					sub.initial = mustMarshal(envelope{Event: "pane.agent_status_changed", Data: statusData(pn)})
				}
			}
		default:
			sub.kind = strings.ReplaceAll(spec.Type, ".", "_")
			if s.opts.NoReplay || s.p22() {
				sub.cursor = s.lastSeq // herdr 0.9: live only, no replay
			}
		}
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	if c.writeLine(successLine{ID: req.ID, Result: result("subscription_started")}) != nil {
		return
	}
	gone := c.watchPeer()
	for {
		s.mu.Lock()
		var out [][]byte
		lost := false
		for _, sub := range subs {
			lines, l := sub.poll(s)
			out = append(out, lines...)
			lost = lost || l
		}
		ch := s.changed.Changed()
		s.mu.Unlock()
		if lost {
			// herdr 0.9: one error line under the request id, then the
			// stream closes; what was already read is not sent.
			c.writeLine(errorLine{ID: req.ID, Error: errorBody{Code: "events_lost",
				Message: "event subscriber fell behind the retained event history; resubscribe and resync with session.snapshot"}})
			return
		}
		for _, line := range out {
			if c.writeRaw(withNewline(line)) != nil {
				return
			}
		}
		if len(out) > 0 {
			continue
		}
		s.mu.Lock()
		select {
		case <-ch: // the model changed while the lines were written
			s.mu.Unlock()
			continue
		default:
		}
		s.parkLocked(c)
		s.mu.Unlock()
		var done bool
		select {
		case <-ch:
		case <-gone:
			done = true
		case <-c.stopped:
			done = true
		}
		s.mu.Lock()
		s.unparkLocked(c)
		s.mu.Unlock()
		if done {
			return
		}
	}
}
