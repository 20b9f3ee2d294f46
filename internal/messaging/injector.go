package messaging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Agent statuses the core understands, as [Core.ObserveStatus] receives them.
// They are the core's own words; they coincide with herdr's agent statuses,
// which the herdr adapter (package herdrprompt) pins with a test.
const (
	StatusIdle    = "idle"
	StatusWorking = "working"
	StatusBlocked = "blocked"
	StatusDone    = "done"
	StatusUnknown = "unknown"
)

// worker is one recipient's injector state: its FIFO, what herdr last said
// about it, and the delivery in flight. Every member observed has one, so
// what few workers need at a time is in extra (112 bytes, not 192, for a
// quiet one).
type worker struct {
	name   string
	status string
	seq    uint64
	gone   bool
	// restored: the worker comes from the journal and has not been
	// observed since; its next observation rebases its turn (sequence
	// numbers from before a restart are not comparable).
	restored bool

	queue    []*Message // FIFO; queue[0] is the head
	inflight *delivery  // at most one: being typed, or typed and awaiting pickup
	current  string     // turn of the last prompt delivered; replies and asks belong to it
	last     *Delivery

	extra *workerExtra // nil while it would hold nothing (tidy)
}

// workerExtra is the part of a worker's state most workers do not need at
// a given time, made on first use (more) and dropped once empty again
// (tidy).
type workerExtra struct {
	goneReason string
	// held: why nothing new may reach the worker's agent now (its pane is
	// being closed: Core.Hold); "" while it may.
	held      string
	uncertain []Delivery

	// A prompt herdr refused without saying why the agent cannot take it
	// (herdr unreachable for a moment) is retried on retry, after a backoff
	// that grows with notSent, the refusals in a row: no message waits
	// for a status change that may not come until the next resync.
	retry   clock.Timer
	notSent int
}

// more returns w's extra state, made if w has none.
func (w *worker) more() *workerExtra {
	if w.extra == nil {
		w.extra = &workerExtra{}
	}
	return w.extra
}

// tidy drops w's extra state if it holds nothing; call it after clearing
// any of its fields.
func (w *worker) tidy() {
	if x := w.extra; x != nil && x.goneReason == "" && x.held == "" && len(x.uncertain) == 0 && x.retry == nil && x.notSent == 0 {
		w.extra = nil
	}
}

// goneReason is why w is gone, as WorkerGone was told.
func (w *worker) goneReason() string {
	if w.extra == nil {
		return ""
	}
	return w.extra.goneReason
}

// held is why nothing new may reach w's agent now; "" while it may.
func (w *worker) held() string {
	if w.extra == nil {
		return ""
	}
	return w.extra.held
}

// uncertain are w's deliveries of unknown outcome, oldest first.
func (w *worker) uncertain() []Delivery {
	if w.extra == nil {
		return nil
	}
	return w.extra.uncertain
}

// setUncertain replaces w's deliveries of unknown outcome.
func (w *worker) setUncertain(ds []Delivery) {
	if len(ds) > 0 {
		w.more().uncertain = ds
	} else if w.extra != nil {
		w.extra.uncertain = nil
		w.tidy()
	}
}

// Retries of a prompt herdr refused without a status: the first after
// notSentRetry, doubling up to notSentRetryMax.
const (
	notSentRetry    = 250 * time.Millisecond
	notSentRetryMax = 5 * time.Second
)

func (w *worker) stopRetry() {
	if x := w.extra; x != nil && x.retry != nil {
		x.retry.Stop()
		x.retry = nil
		w.tidy()
	}
}

// delivery is the head message while Prompt runs (sent == false) and, after
// it returned, until the agent shows it picked the prompt up.
type delivery struct {
	msg         *Message
	baseline    uint64 // worker's state_change_seq when Prompt was called
	prevCurrent string
	sent        bool
	grace       clock.Timer
}

func (w *worker) stopGrace() {
	if w.inflight != nil && w.inflight.grace != nil {
		w.inflight.grace.Stop()
		w.inflight.grace = nil
	}
}

func deliverable(status string) bool { return status == StatusIdle || status == StatusDone }

// Verdict is how the injector treats the outcome of one Prompt call.
type Verdict int

const (
	// Delivered: herdr accepted the prompt.
	Delivered Verdict = iota
	// NotSent: herdr refused before typing anything (agent blocked, busy, not
	// ready; herdr unreachable). The message stays at the head of the queue
	// and is retried on the next status observation.
	NotSent
	// Uncertain: the prompt may or may not have been typed (stalled, the
	// connection broke mid-call, the call was cut). Never re-sent.
	Uncertain
	// Failed: herdr refused for good (no such agent or pane). The message is
	// dropped and its turn fails with delivery_failed.
	Failed
)

func (v Verdict) String() string {
	switch v {
	case Delivered:
		return "delivered"
	case NotSent:
		return "not_sent"
	case Uncertain:
		return "uncertain"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// PromptError is how a [Prompter] reports a failed Prompt in the core's
// terms: what the failure means for the message (Verdict) and, when the
// refusal revealed it, the agent's status. The Prompter's adapter (package
// herdrprompt for herdr) decides both; the core never reads a multiplexer's
// error codes.
type PromptError struct {
	// Verdict is NotSent, Uncertain or Failed.
	Verdict Verdict
	// Status, if not "", is the agent's status the refusal showed (e.g.
	// StatusBlocked: the agent waits at a dialog). The core keeps it until
	// the next observation.
	Status string
	// Err is the adapter's own error, kept for the log and for errors.Is/As.
	Err error
}

func (e *PromptError) Error() string { return e.Err.Error() }
func (e *PromptError) Unwrap() error { return e.Err }

// DefaultClassify reads a [*PromptError] anywhere in err's chain; any other
// error is Uncertain (the prompt may have been typed), and nil is Delivered.
func DefaultClassify(err error) Verdict {
	if err == nil {
		return Delivered
	}
	if pe, ok := errors.AsType[*PromptError](err); ok {
		return pe.Verdict
	}
	return Uncertain
}

// ObserveStatus feeds the injector what herdr reports about a worker's agent
// (or, under Options.PrimaryName, the primary's pane). The reconciler calls
// it for every pane.agent_status_changed event and after every resync.
//
// seq must grow with every status change of the agent and never go back
// while fleetd runs: herdr's state_change_seq (agent.get, agent.list) or,
// since herdr's status events do not carry it, a per-pane count of the status
// events received. Use one source per pane. The numbering may restart with a
// new pane (after WorkerGone) or a new fleetd process: the first observation
// of a restored worker rebases its open turn, and a turn that had started
// and is found idle or done then ends with turn_done.
//
// ObserveStatus never blocks on herdr. A worker previously reported gone
// comes back with its first observation.
func (c *Core) ObserveStatus(name, status string, seq uint64) {
	c.lockW()
	defer c.unlockW()
	if c.closed {
		return
	}
	w := c.worker(name)
	w.gone = false
	if w.extra != nil {
		w.extra.goneReason = ""
		w.tidy()
	}
	w.status, w.seq = status, seq
	if w.restored {
		w.restored = false
		if t := c.turns[w.current]; t != nil && t.delivered {
			// A start or end that happened while fleetd was down shows
			// now: no later observation can, the baseline moves past it.
			t.baseline = seq
			c.advanceTurn(t, status)
		}
	}

	if d := w.inflight; d != nil && d.sent && (seq > d.baseline || status == StatusWorking) {
		c.pickedUp(w)
	}
	if t := c.turns[w.current]; t != nil && t.delivered && seq > t.baseline {
		c.advanceTurn(t, status)
	}
	c.pump(w)
}

// advanceTurn moves delivered turn t on by the worker's status: working or
// blocked means it started; idle or done after a start, with no question
// pending, means it ended without a reply. Callers hold c.wmu and c.mu.
func (c *Core) advanceTurn(t *turn, status string) {
	if !t.started && (status == StatusWorking || status == StatusBlocked) {
		if err := c.commit(record{Op: opTurnStarted, ID: t.id}); err != nil {
			c.opts.Logger.Error("messaging: record turn start", "turn", t.id, "err", err)
		}
	}
	// While the turn's own prompt is being typed, herdr may still refuse
	// it untyped (the status seen meanwhile was the agent's before the
	// prompt): the end waits for the outcome (delivered re-checks).
	if w := c.workers.Get(t.worker); w != nil && w.inflight != nil && !w.inflight.sent && w.inflight.msg.TurnID == t.id {
		return
	}
	if t.started && deliverable(status) && t.ask == nil && !t.closing {
		c.beginTurnDone(t)
	}
}

// pickedUp ends the pickup wait of w's in-flight delivery.
func (c *Core) pickedUp(w *worker) {
	w.stopGrace()
	w.inflight = nil
}

// pump starts delivering w's head message if nothing is in flight and the
// agent is idle or done. While the tail of a finished turn is being read it
// waits, so that the tail shows that turn and not the next prompt; the tail
// reader pumps when it is done. Callers hold c.wmu and c.mu.
func (c *Core) pump(w *worker) {
	if c.closed || w.gone || w.held() != "" || w.inflight != nil || len(w.queue) == 0 || !deliverable(w.status) {
		return
	}
	if t := c.turns[w.current]; t != nil && t.closing {
		return
	}
	target := c.opts.Target(w.name)
	if w.name == c.opts.PrimaryName {
		target = c.opts.PrimaryTarget
	}
	m := w.queue[0]
	if err := c.commit(record{Op: opDelivering, ID: m.ID, Who: w.name, Seq: w.seq, At: c.now()}); err != nil {
		c.opts.Logger.Error("messaging: record delivery start", "message", m.ID, "err", err)
		return
	}
	d := w.inflight
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.PromptTimeout)
		err := c.prompt.Prompt(ctx, target, c.render(m))
		cancel()
		c.lockW()
		defer c.unlockW()
		c.delivered(w, d, err)
	}()
}

// delivered records the outcome of a Prompt call. Callers hold c.wmu and c.mu.
func (c *Core) delivered(w *worker, d *delivery, err error) {
	if c.closed || w.inflight != d {
		return // the worker went away meanwhile, or the core stopped
	}
	verdict := c.opts.Classify(err)
	rec := record{ID: d.msg.ID, Who: w.name, At: c.now()}
	if err != nil {
		rec.Reason = err.Error()
	}
	if x := w.extra; x != nil && verdict != NotSent {
		x.notSent = 0
		w.tidy()
	}
	switch verdict {
	case Delivered:
		rec.Op = opDelivered
	case NotSent:
		rec.Op = opNotSent
	case Uncertain:
		rec.Op = opUncertain
	default:
		rec.Op = opFailed
	}
	if err := c.commit(rec); err != nil {
		c.opts.Logger.Error("messaging: record delivery outcome", "message", d.msg.ID, "err", err)
		return
	}
	c.opts.Logger.Info("messaging delivery", "to", w.name, "message", d.msg.ID, "turn", d.msg.TurnID, "result", rec.Op)
	switch verdict {
	case NotSent:
		// herdr knows better than our last observation: a status it
		// showed waits for the next one. Without one (herdr did not
		// answer), retry after a backoff, since a status change may not
		// come before the next resync.
		if pe, ok := errors.AsType[*PromptError](err); ok && pe.Status != "" {
			if w.seq == d.baseline {
				w.status = pe.Status
				return
			}
			// A status observed while the prompt was out may be newer
			// than the refusal (a dialog answered meanwhile): go by it.
			c.pump(w)
			return
		}
		w.stopRetry()
		x := w.more()
		delay := min(notSentRetry<<min(x.notSent, 8), notSentRetryMax)
		x.notSent++
		x.retry = c.opts.Clock.AfterFunc(delay, func() {
			c.lockW()
			defer c.unlockW()
			if x := w.extra; x != nil {
				x.retry = nil
				w.tidy()
			}
			if !c.closed {
				c.pump(w)
			}
		})
	case Failed:
		if t := c.turns[d.msg.TurnID]; t != nil && d.msg.Kind == KindPrompt {
			msg := fmt.Sprintf("herdr refused the prompt for %s: %v", w.name, err)
			c.endTurn(t, string(CodeDeliveryFailed), result{err: &Error{Code: CodeDeliveryFailed, Msg: msg}},
				c.newMail(w.name, t.caller, KindDeliveryFailed, msg, t.id))
		}
		c.pump(w)
	default:
		if t := c.turns[w.current]; t != nil && t.delivered && w.seq > t.baseline {
			c.advanceTurn(t, w.status)
		}
		if w.seq > d.baseline || w.status == StatusWorking {
			c.pickedUp(w)
			c.pump(w)
			return
		}
		d.grace = c.opts.Clock.AfterFunc(c.opts.PickupGrace, func() {
			c.lockW()
			defer c.unlockW()
			if c.closed || w.inflight != d {
				return
			}
			c.opts.Logger.Info("messaging: no pickup observed within grace", "to", w.name, "message", d.msg.ID)
			w.inflight = nil
			c.pump(w)
		})
	}
}

// beginTurnDone handles a worker whose turn ended without a reply: it reads
// the terminal's tail and ends the turn with it (flow 4). Callers hold c.wmu and c.mu.
func (c *Core) beginTurnDone(t *turn) {
	t.closing = true
	target := c.opts.Target(t.worker)
	lines := c.opts.TailLines
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.PromptTimeout)
		tail, err := c.prompt.ReadTail(ctx, target, lines)
		cancel()
		if err != nil {
			tail = fmt.Sprintf("(the worker's turn ended without a reply; its terminal could not be read: %v)", err)
		}
		c.lockW()
		defer c.unlockW()
		if c.closed {
			return
		}
		if c.turns[t.id] == t && t.closing && t.ask == nil {
			t.closing = false
			c.endTurn(t, string(OutcomeTurnDone), result{outcome: OutcomeTurnDone, text: tail},
				c.newMail(t.worker, t.caller, KindTurnDone, tail, t.id))
		}
		t.closing = false
		c.pump(c.worker(t.worker))
	}()
}

// WorkerGone tells the core a worker was deleted or paused, or its pane died:
// every call waiting on it fails with worker_gone, its queue, mailbox and
// delivery notes are dropped, and each of its open turns whose caller is not
// waiting leaves a worker_gone notice in the caller's mailbox. A later
// ObserveStatus for the same name brings the worker back (a restarted pane).
func (c *Core) WorkerGone(name, reason string) {
	c.lockW()
	defer c.unlockW()
	if c.closed {
		return
	}
	w := c.worker(name)
	w.stopGrace()
	w.gone = true
	if reason != "" {
		w.more().goneReason = reason
	} else if w.extra != nil {
		w.extra.goneReason = ""
		w.tidy()
	}
	w.status, w.seq = StatusUnknown, 0

	closed := 0
	for _, t := range c.sortedTurns() {
		if t.worker != name {
			continue
		}
		closed++
		c.endTurn(t, string(CodeWorkerGone), result{err: errorf(CodeWorkerGone, "%s is gone: %s", name, reason)},
			c.newMail(name, t.caller, KindWorkerGone, fmt.Sprintf("%s is gone (%s); the turn ended without a reply", name, reason), t.id))
	}
	// The drop wakes the mailbox's pollers when it is applied.
	if err := c.commit(record{Op: opDrop, Who: name}); err != nil {
		c.opts.Logger.Error("messaging: record worker gone", "worker", name, "err", err)
	}
	c.opts.Logger.Info("messaging: worker gone", "worker", name, "reason", reason, "turns_closed", closed)
}

// AgentRelaunched tells the core that the worker's agent was relaunched: a
// new process in the same pane (herdr restarted with session restore and
// started every agent again, resumed in its own session), so what the old
// process was given is gone with it. Each open turn whose prompt was typed
// into the old agent ends with [OutcomeTurnDone] and a text that says so —
// the prompt is never typed again, since the old agent may have acted on
// part of it — and its caller's held call returns, or, with nobody waiting,
// the notice goes to the caller's mailbox. A question the old agent was
// waiting on is released. Messages still queued stay queued and go to the
// new agent as the injector's status gating allows; a prompt being typed
// right now is left to its outcome. reason says what happened, in a few
// words.
//
// A live handoff of the multiplexer, where the agent keeps running, is not
// a relaunch: its turns must stay open.
func (c *Core) AgentRelaunched(name, reason string) {
	c.lockW()
	defer c.unlockW()
	if c.closed {
		return
	}
	w := c.worker(name)
	if d := w.inflight; d != nil && d.sent {
		c.pickedUp(w) // the old agent can no longer pick it up
	}
	ended := 0
	for _, t := range c.sortedTurns() {
		if t.worker != name || !t.delivered {
			continue
		}
		if d := w.inflight; d != nil && !d.sent && d.msg.TurnID == t.id {
			continue // being typed now: its outcome decides
		}
		if slices.ContainsFunc(w.queue, func(m *Message) bool { return m.TurnID == t.id }) {
			continue // its prompt (herdr refused it untyped) or a follow-up is still queued: the new agent gets it
		}
		msg := fmt.Sprintf("(%s's agent was relaunched before it replied: %s. The prompt had been typed into the agent "+
			"that is gone, and is not typed again; the agent may have acted on part of it. Check %s's work and send it again if it is still wanted.)",
			name, reason, name)
		if err := c.endTurn(t, string(OutcomeTurnDone), result{outcome: OutcomeTurnDone, text: msg},
			c.newMail(name, t.caller, KindTurnDone, msg, t.id)); err == nil {
			ended++
		}
	}
	c.opts.Logger.Info("messaging: worker's agent relaunched", "worker", name, "reason", reason, "turns_ended", ended)
	// The queue goes on as the last status allows: a new agent that is
	// not ready yet refuses untyped (herdr's agent_not_ready), and its
	// status may have been observed before this call.
	c.pump(w)
}
