package messaging

import (
	"slices"
	"sort"
	"time"
)

// Journal record operations. The journal is the history of these; replaying
// it through apply rebuilds the state, and live code changes state only by
// committing records, so the two can never disagree.
const (
	opTurnOpen    = "turn_open"    // Turn: a new turn
	opTurnDue     = "turn_due"     // ID, At: the turn's deadline moved (a new held call)
	opTurnStarted = "turn_started" // ID: the worker was seen working on the turn
	opTurnClose   = "turn_close"   // ID, Reason: the turn ended (reply, turn_done, worker_gone, …)
	opEnqueue     = "enqueue"      // Msg: a message joins its recipient's delivery queue
	opDelivering  = "delivering"   // ID, Who, Seq, At: Prompt is about to be called for the head
	opDelivered   = "delivered"    // ID, Who, At: Prompt returned success
	opNotSent     = "not_sent"     // ID, Who, Reason: herdr refused before typing; head stays queued
	opUncertain   = "uncertain"    // ID, Who, At, Reason: outcome unknown; never re-sent
	opFailed      = "failed"       // ID, Who, At, Reason: herdr refused for good; dropped
	opMail        = "mail"         // Msg: a message enters its recipient's mailbox
	opAck         = "ack"          // Who, IDs: mailbox messages retired
	opDrop        = "drop"         // Who: a worker is gone; its queue, mailbox and notes go
	opNotes       = "notes"        // Who, ID (current turn), Last, Uncertain: compaction only
	opRequest     = "request"      // IDs: callers' request ids taken (SendRequest.ID), oldest first
)

// knownOps is every operation a journal may hold.
var knownOps = map[string]struct{}{
	opTurnOpen: {}, opTurnDue: {}, opTurnStarted: {}, opTurnClose: {}, opEnqueue: {}, opDelivering: {}, opDelivered: {},
	opNotSent: {}, opUncertain: {}, opFailed: {}, opMail: {}, opAck: {}, opDrop: {}, opNotes: {}, opRequest: {},
}

type record struct {
	Op        string      `json:"op"`
	ID        string      `json:"id,omitempty"`
	IDs       []string    `json:"ids,omitempty"`
	Who       string      `json:"who,omitempty"`
	Seq       uint64      `json:"seq,omitempty"`
	At        time.Time   `json:"at,omitzero"`
	Reason    string      `json:"reason,omitempty"`
	Turn      *turnRecord `json:"turn,omitempty"`
	Msg       *Message    `json:"msg,omitempty"`
	Last      *Delivery   `json:"last,omitempty"`
	Uncertain []Delivery  `json:"uncertain,omitempty"`
}

type turnRecord struct {
	ID        string    `json:"id"`
	Caller    string    `json:"caller"`
	Worker    string    `json:"worker"`
	Created   time.Time `json:"created"`
	Deadline  time.Time `json:"deadline"`
	Delivered bool      `json:"delivered,omitempty"`
	Baseline  uint64    `json:"baseline,omitempty"`
	Started   bool      `json:"started,omitempty"`
	Current   bool      `json:"current,omitempty"` // the worker's current turn
}

// maxNotes bounds the uncertain deliveries remembered per worker.
const maxNotes = 32

// apply changes the in-memory state for one committed record. It does no I/O
// and wakes nobody but the pollers of a mailbox it deletes; callers do the
// rest after commit.
func (c *Core) apply(r record) {
	switch r.Op {
	case opTurnOpen:
		tr := r.Turn
		c.turns[tr.ID] = &turn{id: tr.ID, caller: tr.Caller, worker: tr.Worker, created: tr.Created,
			deadline: tr.Deadline, delivered: tr.Delivered, baseline: tr.Baseline, started: tr.Started}
		if tr.Current {
			c.worker(tr.Worker).current = tr.ID
		}
	case opTurnDue:
		if t := c.turns[r.ID]; t != nil {
			t.deadline = r.At
		}
	case opTurnStarted:
		if t := c.turns[r.ID]; t != nil {
			t.started = true
		}
	case opTurnClose:
		t := c.turns[r.ID]
		if t == nil {
			return
		}
		delete(c.turns, r.ID)
		w := c.worker(t.worker)
		if w.current == r.ID {
			w.current = ""
		}
		// A reply or turn end proves the worker got the prompt.
		w.uncertain = slices.DeleteFunc(w.uncertain, func(d Delivery) bool { return d.TurnID == r.ID })
	case opEnqueue:
		m := *r.Msg
		w := c.worker(m.To)
		w.queue = append(w.queue, &m)
		c.depth++
	case opDelivering:
		w := c.worker(r.Who)
		if len(w.queue) == 0 || w.queue[0].ID != r.ID {
			return
		}
		m := w.queue[0]
		d := &delivery{msg: m, baseline: r.Seq, prevCurrent: w.current}
		w.inflight = d
		if t := c.turns[m.TurnID]; t != nil && m.Kind == KindPrompt {
			t.delivered, t.baseline, t.started = true, r.Seq, false
			w.current = t.id
		}
	case opDelivered, opUncertain, opFailed:
		w := c.worker(r.Who)
		d := w.inflight
		if d == nil || d.msg.ID != r.ID {
			return
		}
		w.queue = w.queue[1:]
		c.depth--
		d.sent = true
		note := Delivery{MessageID: r.ID, TurnID: d.msg.TurnID, At: r.At, Result: resultFor[r.Op], Reason: r.Reason}
		w.last = &note
		switch r.Op {
		case opUncertain:
			w.uncertain = append(w.uncertain, note)
			if len(w.uncertain) > maxNotes {
				w.uncertain = w.uncertain[len(w.uncertain)-maxNotes:]
			}
		case opFailed:
			w.inflight = nil
			if w.current == d.msg.TurnID {
				w.current = d.prevCurrent
			}
		}
	case opNotSent:
		w := c.worker(r.Who)
		d := w.inflight
		if d == nil || d.msg.ID != r.ID {
			return
		}
		w.inflight = nil
		if t := c.turns[d.msg.TurnID]; t != nil && d.msg.Kind == KindPrompt {
			// Nothing was typed: what was seen meanwhile was not this turn.
			t.delivered, t.started = false, false
			if w.current == t.id {
				w.current = d.prevCurrent
			}
		}
	case opMail:
		m := *r.Msg
		if m.Seq == 0 { // journals written before messages carried one
			m.Seq = c.mailSeq + 1
		}
		c.mailSeq = max(c.mailSeq, m.Seq)
		mb := c.mailbox(m.To)
		mb.msgs = append(mb.msgs, m)
		mb.bytes += int64(len(m.Content))
	case opAck:
		mb := c.mailbox(r.Who)
		mb.msgs = slices.DeleteFunc(mb.msgs, func(m Message) bool {
			if slices.Contains(r.IDs, m.ID) {
				mb.bytes -= int64(len(m.Content))
				return true
			}
			return false
		})
	case opDrop:
		w := c.worker(r.Who)
		c.depth -= len(w.queue)
		w.queue, w.inflight, w.uncertain, w.current = nil, nil, nil, ""
		if mb := c.mail[r.Who]; mb != nil {
			// Its pollers go on waiting on the mailbox that replaces it.
			// Not before now: one woken while the drop was being written
			// would wait on this one again and miss the next one's mail.
			mb.arrived.Notify()
			delete(c.mail, r.Who)
		}
	case opNotes:
		w := c.worker(r.Who)
		w.current, w.last, w.uncertain = r.ID, r.Last, r.Uncertain
	case opRequest:
		for _, id := range r.IDs {
			if _, ok := c.requests[id]; ok {
				continue
			}
			c.requests[id] = struct{}{}
			c.requestIDs = append(c.requestIDs, id)
		}
		if n := len(c.requestIDs) - c.opts.MaxRequestIDs; n > 0 {
			for _, id := range c.requestIDs[:n] {
				delete(c.requests, id)
			}
			c.requestIDs = slices.Clone(c.requestIDs[n:])
		}
	}
}

var resultFor = map[string]DeliveryResult{
	opDelivered: DeliveryDelivered, opUncertain: DeliveryUncertain, opFailed: DeliveryFailed,
}

// snapshot returns records that rebuild the current live state from nothing.
// They share nothing the state changes in place (messages and delivery notes
// are replaced, never edited), so they may be encoded after the lock is
// released.
// A prompt being typed right now is written as queued and delivering, so a
// crash after compaction still finds it uncertain.
func (c *Core) snapshot() []record {
	var recs []record
	ids := make([]string, 0, len(c.turns))
	for id := range c.turns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := c.turns[id]
		recs = append(recs, record{Op: opTurnOpen, Turn: &turnRecord{ID: t.id, Caller: t.caller, Worker: t.worker,
			Created: t.created, Deadline: t.deadline, Delivered: t.delivered, Baseline: t.baseline, Started: t.started}})
	}
	for _, w := range sortedWorkers(c.workers) {
		for _, m := range w.queue {
			recs = append(recs, record{Op: opEnqueue, Msg: m})
		}
		sending := w.inflight != nil && !w.inflight.sent
		if sending {
			// The delivering record remembers the current turn before it,
			// to restore if herdr refuses: set that first.
			d := w.inflight
			recs = append(recs,
				record{Op: opNotes, Who: w.name, ID: d.prevCurrent},
				record{Op: opDelivering, ID: d.msg.ID, Who: w.name, Seq: d.baseline})
		}
		if sending || w.current != "" || w.last != nil || len(w.uncertain) > 0 {
			// A copy: the snapshot is encoded without the lock, and a turn's
			// close edits the live slice in place.
			recs = append(recs, record{Op: opNotes, Who: w.name, ID: w.current, Last: w.last, Uncertain: slices.Clone(w.uncertain)})
		}
	}
	if len(c.requestIDs) > 0 {
		recs = append(recs, record{Op: opRequest, IDs: slices.Clone(c.requestIDs)})
	}
	names := make([]string, 0, len(c.mail))
	for n := range c.mail {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, m := range c.mail[n].msgs {
			recs = append(recs, record{Op: opMail, Msg: &m})
		}
	}
	return recs
}

func sortedWorkers(ws map[string]*worker) []*worker {
	out := make([]*worker, 0, len(ws))
	for _, w := range ws {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (c *Core) worker(name string) *worker {
	w := c.workers[name]
	if w == nil {
		w = &worker{name: name, status: StatusUnknown}
		c.workers[name] = w
	}
	return w
}

func (c *Core) mailbox(name string) *mailbox {
	mb := c.mail[name]
	if mb == nil {
		mb = &mailbox{}
		c.mail[name] = mb
	}
	return mb
}
