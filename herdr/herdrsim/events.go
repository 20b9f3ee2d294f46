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
	case "pane.scroll_changed":
		// No scroll is modelled: the entry has nothing to send, but its
		// stream has seen every event so far, as herdr's reader has.
		if n := len(s.events); n > 0 {
			sub.cursor = max(sub.cursor, s.events[n-1].seq)
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

// newSubscriptionLocked sets up one entry of a subscription; a failure is
// answered under the request id, or under the entry's probe id (probe).
func (s *Server) newSubscriptionLocked(spec subscribeSpec) (sub *subscription, aerr *apiError, probe bool) {
	sub = &subscription{}
	switch spec.Type {
	case "pane.agent_status_changed", "pane.output_matched", "pane.scroll_changed":
		sub.perPane, sub.paneID = spec.Type, spec.PaneID
		if spec.Match != nil {
			sub.matcher = *spec.Match
			re, aerr := sub.matcher.compile()
			if aerr != nil {
				return nil, aerr, false
			}
			sub.re = re
		}
		pn := s.findPaneLocked(spec.PaneID)
		if pn == nil {
			return nil, paneNotFound(spec.PaneID), true
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
	return sub, nil, false
}

// subSet is the entries of one events.subscribe request, polled together
// every round: each entry's lines, entry after entry in the request's
// order, as if each were polled on its own (subscription.poll).
//
// In protocol 22 the lifecycle and per-pane status entries all start at the
// newest event and take every pending event each round, so they share one
// cursor, and a round walks the events since it once, handing each to the
// entries of its kind or pane: a round costs what happened, not how many
// entries the request has (fleetd's has one per pane it runs). Other
// entries, and every entry in protocol 20 (one line per entry per round),
// are polled one by one.
type subSet struct {
	subs []*subscription
	// indexed is whether the protocol-22 walk serves the lifecycle and
	// per-pane status entries; cursor is where it is in the ring.
	indexed bool
	cursor  uint64
	byKind  map[string][]int // lifecycle kind → its entries
	byPane  map[string][]int // pane id → its per-pane status entries
	polled  []int            // entries polled one by one
	// initial lists the per-pane status entries whose status matched
	// their filter at setup: in the first round each sends that status
	// unless a status of its pane came first.
	initial []int
}

// newSubSet indexes subs for polling (see subSet).
func (s *Server) newSubSet(subs []*subscription) *subSet {
	set := &subSet{subs: subs, indexed: s.p22(), cursor: s.lastSeq}
	for i, sub := range subs {
		switch {
		case !set.indexed, sub.perPane != "" && sub.perPane != "pane.agent_status_changed":
			set.polled = append(set.polled, i)
		case sub.perPane == "":
			set.byKind = addIndex(set.byKind, sub.kind, i)
		default:
			set.byPane = addIndex(set.byPane, sub.paneID, i)
			if sub.initial != nil {
				set.initial = append(set.initial, i)
			}
		}
	}
	return set
}

func addIndex(m map[string][]int, key string, i int) map[string][]int {
	if m == nil {
		m = map[string][]int{}
	}
	m[key] = append(m[key], i)
	return m
}

// entryLine is a line due to the entry at index sub.
type entryLine struct {
	sub  int
	line []byte
}

// poll is one round: the lines due, in the request's entry order, or lost
// (protocol 22) when one of its entries fell behind the retained history.
func (set *subSet) poll(s *Server) (out [][]byte, lost bool) {
	var due []entryLine
	if set.indexed && (len(set.byKind) > 0 || len(set.byPane) > 0) {
		if len(s.events) > 0 && s.events[0].seq > set.cursor+1 {
			return nil, true
		}
		var saw map[int]bool // initial entries whose pane reported a status this round
		for _, ev := range s.eventsAfterLocked(set.cursor) {
			set.cursor = ev.seq
			for _, i := range set.byKind[ev.kind] {
				due = append(due, entryLine{i, ev.line})
			}
			if ev.sub == nil {
				continue
			}
			for _, i := range set.byPane[ev.paneID] {
				sub := set.subs[i]
				if sub.initial != nil {
					if saw == nil {
						saw = map[int]bool{}
					}
					saw[i] = true
				}
				if sub.filter != "" && sub.filter != ev.status {
					continue
				}
				sub.initial = nil
				due = append(due, entryLine{i, ev.sub})
			}
		}
		for _, i := range set.initial {
			if sub := set.subs[i]; sub.initial != nil && !saw[i] {
				due = append(due, entryLine{i, sub.initial})
			}
			set.subs[i].initial = nil
		}
		set.initial = nil
	}
	for _, i := range set.polled {
		lines, l := set.subs[i].poll(s)
		if l {
			return nil, true
		}
		for _, line := range lines {
			due = append(due, entryLine{i, line})
		}
	}
	slices.SortStableFunc(due, func(a, b entryLine) int { return a.sub - b.sub })
	out = make([][]byte, len(due))
	for i, d := range due {
		out[i] = d.line
	}
	return out, false
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
	Subscriptions []subscribeSpec `json:"subscriptions"`
}

// subscribeSpec is one entry of an events.subscribe request.
type subscribeSpec struct {
	Type        string       `json:"type"`
	PaneID      string       `json:"pane_id"`
	AgentStatus *string      `json:"agent_status"`
	Source      string       `json:"source"`
	Lines       *int         `json:"lines"`
	Match       *outputMatch `json:"match"`
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
		sub, aerr, probe := s.newSubscriptionLocked(spec)
		if aerr != nil {
			s.mu.Unlock()
			id := req.ID
			if probe {
				id = s.probeID(req, i)
			}
			c.writeLine(s.errLine(aerr, req, id))
			return
		}
		subs = append(subs, sub)
	}
	set := s.newSubSet(subs)
	s.mu.Unlock()
	if c.writeLine(successLine{ID: req.ID, Result: result("subscription_started")}) != nil {
		return
	}
	gone := c.watchPeer()
	for {
		s.mu.Lock()
		out, lost := set.poll(s)
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
