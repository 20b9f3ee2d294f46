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
		c.applyTurnOpen(r.Turn)
	case opTurnDue:
		if t := c.turns[r.ID]; t != nil {
			t.deadline = r.At
		}
	case opTurnStarted:
		if t := c.turns[r.ID]; t != nil {
			t.started = true
		}
	case opTurnClose:
		c.applyTurnClose(r.ID)
	case opEnqueue:
		m := *r.Msg
		w := c.worker(m.To)
		w.queue = append(w.queue, &m)
		c.depth++
	case opDelivering:
		c.applyDelivering(r)
	case opDelivered, opUncertain, opFailed:
		c.applyOutcome(r)
	case opNotSent:
		c.applyNotSent(r)
	case opMail:
		c.applyMail(*r.Msg)
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
		c.applyDrop(r.Who)
	case opNotes:
		w := c.worker(r.Who)
		w.current, w.last = r.ID, r.Last
		w.setUncertain(r.Uncertain)
	case opRequest:
		c.applyRequests(r.IDs)
	}
}

// applyTurnOpen opens a turn (opTurnOpen).
func (c *Core) applyTurnOpen(tr *turnRecord) {
	c.turns[tr.ID] = &turn{id: tr.ID, caller: tr.Caller, worker: tr.Worker, created: tr.Created,
		deadline: tr.Deadline, delivered: tr.Delivered, baseline: tr.Baseline, started: tr.Started}
	if tr.Current {
		c.worker(tr.Worker).current = tr.ID
	}
}

// applyTurnClose ends turn id (opTurnClose).
func (c *Core) applyTurnClose(id string) {
	t := c.turns[id]
	if t == nil {
		return
	}
	delete(c.turns, id)
	w := c.worker(t.worker)
	if w.current == id {
		w.current = ""
	}
	// A reply or turn end proves the worker got the prompt.
	w.setUncertain(slices.DeleteFunc(w.uncertain(), func(d Delivery) bool { return d.TurnID == id }))
}

// applyDelivering starts typing the head of a worker's queue
// (opDelivering): its turn counts as delivered from here.
func (c *Core) applyDelivering(r record) {
	w := c.worker(r.Who)
	if len(w.queue) == 0 || w.queue[0].ID != r.ID {
		return
	}
	m := w.queue[0]
	w.inflight = &delivery{msg: m, baseline: r.Seq, prevCurrent: w.current}
	if t := c.turns[m.TurnID]; t != nil && m.Kind == KindPrompt {
		t.delivered, t.baseline, t.started = true, r.Seq, false
		w.current = t.id
	}
}

// applyOutcome takes a typed message off its worker's queue
// (opDelivered, opUncertain, opFailed) and notes how it went.
func (c *Core) applyOutcome(r record) {
	w, d := c.inflightOf(r)
	if d == nil {
		return
	}
	w.queue = w.queue[1:]
	c.depth--
	d.sent = true
	note := Delivery{MessageID: r.ID, TurnID: d.msg.TurnID, At: r.At, Result: resultFor[r.Op], Reason: r.Reason}
	w.last = &note
	switch r.Op {
	case opUncertain:
		x := w.more()
		x.uncertain = append(x.uncertain, note)
		if len(x.uncertain) > maxNotes {
			x.uncertain = x.uncertain[len(x.uncertain)-maxNotes:]
		}
	case opFailed:
		w.inflight = nil
		if w.current == d.msg.TurnID {
			w.current = d.prevCurrent
		}
	}
}

// applyNotSent keeps a message herdr refused untyped at the head of its
// worker's queue (opNotSent).
func (c *Core) applyNotSent(r record) {
	w, d := c.inflightOf(r)
	if d == nil {
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
}

// inflightOf returns r's worker and its delivery in flight if that is
// r's message (nil otherwise: the record is about another one).
func (c *Core) inflightOf(r record) (*worker, *delivery) {
	w := c.worker(r.Who)
	if d := w.inflight; d != nil && d.msg.ID == r.ID {
		return w, d
	}
	return w, nil
}

// applyMail stores m in its recipient's mailbox (opMail).
func (c *Core) applyMail(m Message) {
	if m.Seq == 0 { // journals written before messages carried one
		m.Seq = c.mailSeq + 1
	}
	c.mailSeq = max(c.mailSeq, m.Seq)
	mb := c.mailbox(m.To)
	mb.msgs = append(mb.msgs, m)
	mb.bytes += int64(len(m.Content))
}

// applyDrop forgets a gone worker's queue, delivery notes and mailbox
// (opDrop).
func (c *Core) applyDrop(who string) {
	w := c.worker(who)
	c.depth -= len(w.queue)
	w.queue, w.inflight, w.current = nil, nil, ""
	w.setUncertain(nil)
	if mb := c.mail[who]; mb != nil {
		// Its pollers go on waiting on the mailbox that replaces it.
		// Not before now: one woken while the drop was being written
		// would wait on this one again and miss the next one's mail.
		mb.arrived.Notify()
		delete(c.mail, who)
	}
}

// applyRequests remembers request ids already served (opRequest), the
// newest Options.MaxRequestIDs of them.
func (c *Core) applyRequests(ids []string) {
	for _, id := range ids {
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
	for _, w := range c.workers.Entries() {
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
		if sending || w.current != "" || w.last != nil || len(w.uncertain()) > 0 {
			// A copy: the snapshot is encoded without the lock, and a turn's
			// close edits the live slice in place.
			recs = append(recs, record{Op: opNotes, Who: w.name, ID: w.current, Last: w.last, Uncertain: slices.Clone(w.uncertain())})
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

func workerName(w *worker) string { return w.name }

func (c *Core) worker(name string) *worker {
	w := c.workers.Get(name)
	if w == nil {
		w = &worker{name: name, status: StatusUnknown}
		c.workers.Put(w)
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
