package messaging

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Outcome says how a blocking call ended.
type Outcome string

// Outcomes of Send, Await and Ask.
const (
	OutcomeReply      Outcome = "reply"      // the worker replied (final)
	OutcomeQuestion   Outcome = "question"   // the worker asks; answer with Send{TurnID}
	OutcomeTurnDone   Outcome = "turn_done"  // the worker's turn ended without a reply; Text is its terminal tail
	OutcomeTimeout    Outcome = "timeout"    // the deadline passed; the turn stays open
	OutcomeDispatched Outcome = "dispatched" // Wait was false: queued, not waited for
	OutcomeAnswer     Outcome = "answer"     // Ask: the primary answered
)

// Kind classifies a Message.
type Kind string

// Message kinds.
const (
	KindPrompt         Kind = "prompt"          // primary → worker, typed into the worker's pane
	KindReply          Kind = "reply"           // a worker's final reply nobody was waiting for
	KindProgress       Kind = "progress"        // a worker's non-final reply
	KindQuestion       Kind = "question"        // a worker's question nobody was waiting for
	KindAnswer         Kind = "answer"          // the primary's answer to a question the worker stopped waiting for
	KindTurnDone       Kind = "turn_done"       // a turn ended without a reply; content is the terminal tail
	KindWorkerGone     Kind = "worker_gone"     // a turn ended because its worker went away
	KindDeliveryFailed Kind = "delivery_failed" // a turn ended because herdr refused its prompt
)

// Message is one mailbox entry (and, for prompts, one queued delivery).
type Message struct {
	ID        string    `json:"id"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Kind      Kind      `json:"kind"`
	Content   string    `json:"content"`
	TurnID    string    `json:"turnId,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Seq orders a mailbox: it grows with every message stored in any
	// mailbox and survives restarts and compaction ([PollPage.Next] is
	// built from it). Zero for queued prompts.
	Seq uint64 `json:"seq,omitempty"`
}

// SendRequest is a caller's message to a worker.
type SendRequest struct {
	From    string // the caller (Options.PrimaryName for the primary); resolved by the adapter from the token
	To      string // the worker; optional when TurnID is set
	Content string
	// TurnID continues an open turn: it answers the worker's pending
	// question, or, when none is pending, is delivered into the turn as a
	// follow-up prompt.
	TurnID  string
	Wait    bool          // hold the call until the turn's outcome
	Timeout time.Duration // for Wait; 0 means Options.DefaultTimeout
	// ID, when set, is the caller's own id for this request, for a caller
	// that may make the same request again after a crash (fleetd's relay
	// across nodes hands the core requests it keeps in etcd until the core
	// took them). For a new turn it is the turn's id. It is journalled with
	// the change it causes, and a request whose id the core holds — an
	// open turn of that id, or one of the last [Options.MaxRequestIDs]
	// ids it took — changes nothing: it returns the turn, dispatched (with
	// Wait: held on it while it is open, else not_found). At most
	// [MaxRequestIDBytes] of letters, digits, '-', '_' and '.'.
	ID string
	// Deadline, when set, is the turn's absolute deadline instead of now +
	// Timeout (a request that waited somewhere keeps the deadline it was
	// given); on a continuation it moves the turn's deadline even without
	// Wait.
	Deadline time.Time
}

// MaxRequestIDBytes bounds [SendRequest.ID].
const MaxRequestIDBytes = 64

// checkRequestID reports what makes id unfit to be a request's id.
func checkRequestID(id string) error {
	if len(id) > MaxRequestIDBytes {
		return errorf(CodeInvalid, "request id is %d bytes; the limit is %d", len(id), MaxRequestIDBytes)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return errorf(CodeInvalid, "request id %q: want letters, digits, '-', '_' or '.'", id)
		}
	}
	return nil
}

// SendResult is the outcome of Send or Await.
type SendResult struct {
	Outcome    Outcome
	Text       string // reply, question or terminal tail
	TurnID     string
	Worker     string
	DispatchID string // the queued message's id, when one was queued
}

// ReplyMode says where a worker's reply went.
type ReplyMode string

// Reply modes.
const (
	ReplyResolved ReplyMode = "resolved" // handed to the caller's held call
	ReplyQueued   ReplyMode = "queued"   // stored in the caller's mailbox
	ReplyInjected ReplyMode = "injected" // stored and also queued for typing into the primary's pane
)

// ReplyResult is the outcome of Reply.
type ReplyResult struct {
	Mode   ReplyMode
	TurnID string // the turn the reply belonged to, if any
}

// AskResult is the outcome of Ask: OutcomeAnswer with Answer, or
// OutcomeTimeout (the question stays open; an answer sent later is queued to
// the worker as a follow-up prompt).
type AskResult struct {
	Outcome Outcome
	Answer  string
	TurnID  string
}

// DeliveryResult is the outcome of one delivery attempt.
type DeliveryResult string

// Delivery results.
const (
	DeliveryDelivered DeliveryResult = "delivered"
	DeliveryUncertain DeliveryResult = "uncertain"
	DeliveryFailed    DeliveryResult = "failed"
)

// Delivery describes one message typed (or perhaps typed) into a pane.
type Delivery struct {
	MessageID string         `json:"messageId"`
	TurnID    string         `json:"turnId,omitempty"`
	At        time.Time      `json:"at"`
	Result    DeliveryResult `json:"result"`
	Reason    string         `json:"reason,omitempty"`
}

// TurnStatus describes one open turn.
type TurnStatus struct {
	ID        string
	Caller    string
	CreatedAt time.Time
	Deadline  time.Time // absolute; survives restarts
	Delivered bool      // its prompt reached (or may have reached) the worker
	Waiting   bool      // the caller holds a call on it
	Asking    bool      // the worker waits for an answer
	Question  string    // the pending question, if Asking
}

// WorkerStatus is what the core knows about one worker (bridge_status).
type WorkerStatus struct {
	Worker         string
	AgentStatus    string // last observed; "unknown" before the first observation
	StateChangeSeq uint64
	Gone           bool
	GoneReason     string
	QueueDepth     int    // messages waiting to be typed, including one being typed
	Delivering     string // id of the message being typed or awaiting pickup
	CurrentTurn    string
	OpenTurns      []TurnStatus
	LastDelivery   *Delivery
	Uncertain      []Delivery // deliveries whose outcome is unknown; never re-sent
	Pending        int        // unacknowledged messages in the worker's own mailbox
}

type result struct {
	outcome Outcome
	text    string
	err     error
}

// waiter is one held call. hand gives it its result at most once: whoever
// removes the waiter from the turn (under c.wmu and c.mu) owns the handing.
type waiter struct{ ch chan result }

func newWaiter() *waiter { return &waiter{ch: make(chan result, 1)} }

func (w *waiter) hand(r result) {
	if w != nil {
		w.ch <- r
	}
}

// Send queues content for a worker in a new turn, or continues turn
// req.TurnID (answering a pending question through the rendezvous, never the
// pane). With Wait it blocks until the turn's reply, a question, the end of
// the worker's turn, the timeout (the turn stays open) or ctx's end.
func (c *Core) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	if err := c.checkContent(req.Content); err != nil {
		return SendResult{}, err
	}
	if req.From == "" {
		return SendResult{}, errorf(CodeInvalid, "no caller")
	}
	if err := checkRequestID(req.ID); err != nil {
		return SendResult{}, err
	}
	c.lockW()
	if req.Wait {
		if err := c.acquire(req.From); err != nil {
			c.unlockW()
			return SendResult{}, err
		}
		defer c.release(req.From)
	}
	var (
		t   *turn
		res SendResult
		err error
	)
	if req.ID != "" && c.holds(req) {
		t, res, err = c.replayed(req)
	} else if req.TurnID != "" {
		t, res, err = c.continueTurn(req)
	} else {
		t, res, err = c.openTurn(req)
	}
	if err != nil || !req.Wait {
		c.unlockW()
		if err == nil {
			res.Outcome = OutcomeDispatched
		}
		return res, err
	}
	return c.holdOn(ctx, t)
}

// holdOn holds the caller's call on t until its outcome or t's deadline. It
// is called with c.wmu and c.mu held and releases them.
func (c *Core) holdOn(ctx context.Context, t *turn) (SendResult, error) {
	w := newWaiter()
	t.waiter = w
	deadline := t.deadline
	c.unlockW()
	r := c.await(ctx, w, deadline, func() bool {
		if t.waiter != w {
			return false
		}
		t.waiter = nil
		return true
	})
	if r.err != nil {
		return SendResult{}, r.err
	}
	return SendResult{Outcome: r.outcome, Text: r.text, TurnID: t.id, Worker: t.worker}, nil
}

// due is the deadline req gives its turn, at now: req.Deadline when set,
// else now + req.Timeout (Options.DefaultTimeout when 0).
func (c *Core) due(req SendRequest, now time.Time) time.Time {
	if !req.Deadline.IsZero() {
		return req.Deadline
	}
	return now.Add(cmp.Or(req.Timeout, c.opts.DefaultTimeout))
}

func (c *Core) openTurn(req SendRequest) (*turn, SendResult, error) {
	if req.To == "" {
		return nil, SendResult{}, errorf(CodeInvalid, "no worker named")
	}
	if w := c.workers.Get(req.To); w != nil && w.gone {
		return nil, SendResult{}, errorf(CodeWorkerGone, "%s is gone: %s", req.To, w.goneReason())
	}
	if err := c.heldError(req.To); err != nil {
		return nil, SendResult{}, err
	}
	if c.opts.Admit != nil && req.To != c.opts.PrimaryName {
		if err := c.opts.Admit(req.To); err != nil {
			return nil, SendResult{}, err
		}
	}
	now := c.now()
	id := req.ID
	if id == "" {
		id = c.opts.NewID("t-")
	}
	m := &Message{ID: c.opts.NewID("m-"), From: req.From, To: req.To, Kind: KindPrompt, Content: req.Content, TurnID: id, CreatedAt: now}
	recs := []record{
		{Op: opTurnOpen, Turn: &turnRecord{ID: id, Caller: req.From, Worker: req.To, Created: now, Deadline: c.due(req, now)}},
		{Op: opEnqueue, Msg: m}}
	if req.ID != "" {
		recs = append(recs, record{Op: opRequest, IDs: []string{req.ID}})
	}
	err := c.commit(recs...)
	if err != nil {
		return nil, SendResult{}, err
	}
	c.pump(c.worker(req.To))
	return c.turns[id], SendResult{TurnID: id, Worker: req.To, DispatchID: m.ID}, nil
}

func (c *Core) continueTurn(req SendRequest) (*turn, SendResult, error) {
	t := c.turns[req.TurnID]
	if t == nil || t.caller != req.From || (req.To != "" && req.To != t.worker) {
		return nil, SendResult{}, errorf(CodeNotFound, "no open turn %q for %s", req.TurnID, cmp.Or(req.To, "this caller"))
	}
	if req.Wait && t.waiter != nil {
		return nil, SendResult{}, errorf(CodeTooManyWaiters, "a call is already waiting on turn %s", t.id)
	}
	if err := c.heldError(t.worker); err != nil {
		return nil, SendResult{}, err
	}
	res := SendResult{TurnID: t.id, Worker: t.worker}
	// The caller continues the turn: a turn_done tail read in flight no
	// longer ends it.
	t.closing = false
	var recs []record
	if req.Wait || !req.Deadline.IsZero() {
		recs = append(recs, record{Op: opTurnDue, ID: t.id, At: c.due(req, c.now())})
	}
	if req.ID != "" {
		recs = append(recs, record{Op: opRequest, IDs: []string{req.ID}})
	}
	var m *Message
	if t.ask == nil {
		m = &Message{ID: c.opts.NewID("m-"), From: req.From, To: t.worker, Kind: KindPrompt, Content: req.Content, TurnID: t.id, CreatedAt: c.now()}
		recs = append(recs, record{Op: opEnqueue, Msg: m})
		res.DispatchID = m.ID
	}
	if err := c.commit(recs...); err != nil {
		return nil, SendResult{}, err
	}
	if t.ask != nil {
		t.ask.hand(result{outcome: OutcomeAnswer, text: req.Content})
		t.ask, t.question = nil, ""
	} else {
		c.pump(c.worker(t.worker))
	}
	return t, res, nil
}

// holds reports whether the core has taken req (which has an ID) before:
// an open turn of that id, or an id it remembers.
func (c *Core) holds(req SendRequest) bool {
	if _, ok := c.requests[req.ID]; ok {
		return true
	}
	return req.TurnID == "" && c.turns[req.ID] != nil
}

// replayed answers a request the core has taken before: it changes
// nothing. Without Wait it returns the turn as dispatched; with Wait the
// turn must still be open and free to hold a call on.
func (c *Core) replayed(req SendRequest) (*turn, SendResult, error) {
	id := cmp.Or(req.TurnID, req.ID)
	t := c.turns[id]
	if t != nil && (t.caller != req.From || (req.To != "" && req.To != t.worker)) {
		return nil, SendResult{}, errorf(CodeInvalid, "request id %q names turn %s of another caller or worker", req.ID, id)
	}
	res := SendResult{TurnID: id, Worker: req.To}
	if t != nil {
		res.Worker = t.worker
	}
	if !req.Wait {
		return t, res, nil
	}
	if t == nil {
		return nil, SendResult{}, errorf(CodeNotFound, "request %s was taken already and its turn %s has ended", req.ID, id)
	}
	if t.waiter != nil {
		return nil, SendResult{}, errorf(CodeTooManyWaiters, "a call is already waiting on turn %s", t.id)
	}
	return t, res, nil
}

// TurnWorker returns the worker of open turn id, if the core holds one.
func (c *Core) TurnWorker(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.turns[id]; t != nil {
		return t.worker, true
	}
	return "", false
}

// Await holds a call on an open turn of caller's until the turn's recorded
// absolute deadline: the way back to a turn after a timeout or a restart. A
// pending question is returned at once.
func (c *Core) Await(ctx context.Context, caller, turnID string) (SendResult, error) {
	c.lockW()
	t := c.turns[turnID]
	if t == nil || t.caller != caller {
		c.unlockW()
		return SendResult{}, errorf(CodeNotFound, "no open turn %q", turnID)
	}
	if t.ask != nil {
		c.unlockW()
		return SendResult{Outcome: OutcomeQuestion, Text: t.question, TurnID: t.id, Worker: t.worker}, nil
	}
	if t.waiter != nil {
		c.unlockW()
		return SendResult{}, errorf(CodeTooManyWaiters, "a call is already waiting on turn %s", t.id)
	}
	if err := c.acquire(caller); err != nil {
		c.unlockW()
		return SendResult{}, err
	}
	defer c.release(caller)
	return c.holdOn(ctx, t)
}

// Reply is a worker's answer to its current turn (the turn of the last prompt
// typed into its pane). A final reply ends the turn: it resolves the caller's
// held call, or lands in the caller's mailbox. A non-final reply goes to the
// mailbox as progress and the turn stays open. With no current turn the reply
// goes to the primary's mailbox.
func (c *Core) Reply(ctx context.Context, worker, content string, final bool) (ReplyResult, error) {
	if err := c.checkContent(content); err != nil {
		return ReplyResult{}, err
	}
	c.lockW()
	defer c.unlockW()
	if c.closed {
		return ReplyResult{}, errorf(CodeUnavailable, "messaging core closed")
	}
	kind := KindReply
	if !final {
		kind = KindProgress
	}
	t := c.currentTurn(worker)
	to := c.opts.PrimaryName
	if t != nil {
		to = t.caller
	}
	if t == nil || !final || t.waiter == nil {
		if err := c.roomFor(to, content); err != nil {
			return ReplyResult{}, err
		}
	}
	if t == nil {
		m := c.newMail(worker, c.opts.PrimaryName, kind, content, "")
		mode, err := c.postMail(m)
		return ReplyResult{Mode: mode}, err
	}
	if !final {
		mode, err := c.postMail(c.newMail(worker, t.caller, kind, content, t.id))
		return ReplyResult{Mode: mode, TurnID: t.id}, err
	}
	if t.waiter != nil {
		if err := c.endTurn(t, string(OutcomeReply), result{outcome: OutcomeReply, text: content}, nil); err != nil {
			return ReplyResult{}, err
		}
		return ReplyResult{Mode: ReplyResolved, TurnID: t.id}, nil
	}
	m := c.newMail(worker, t.caller, kind, content, t.id)
	mode := c.mailMode(m)
	if err := c.endTurn(t, string(OutcomeReply), result{}, m); err != nil {
		return ReplyResult{}, err
	}
	return ReplyResult{Mode: mode, TurnID: t.id}, nil
}

// Ask blocks a worker until the caller of its current turn answers (Send with
// the turn id). A waiting Send returns the question at once; otherwise the
// question lands in the caller's mailbox. A worker with no current turn opens
// one addressed to the primary.
func (c *Core) Ask(ctx context.Context, worker, content string, timeout time.Duration) (AskResult, error) {
	if err := c.checkContent(content); err != nil {
		return AskResult{}, err
	}
	c.lockW()
	if w := c.workers.Get(worker); w != nil && w.gone {
		c.unlockW()
		return AskResult{}, errorf(CodeWorkerGone, "%s is gone: %s", worker, w.goneReason())
	}
	if err := c.acquire(worker); err != nil {
		c.unlockW()
		return AskResult{}, err
	}
	defer c.release(worker)
	deadline := c.now().Add(cmp.Or(timeout, c.opts.DefaultTimeout))
	t := c.currentTurn(worker)
	switch {
	case t == nil:
		if err := c.roomFor(c.opts.PrimaryName, content); err != nil {
			c.unlockW()
			return AskResult{}, err
		}
	case t.ask == nil && t.waiter == nil:
		if err := c.roomFor(t.caller, content); err != nil {
			c.unlockW()
			return AskResult{}, err
		}
	}
	if t == nil {
		now := c.now()
		id := c.opts.NewID("t-")
		err := c.commit(record{Op: opTurnOpen, Turn: &turnRecord{ID: id, Caller: c.opts.PrimaryName, Worker: worker,
			Created: now, Deadline: deadline, Delivered: true, Started: true, Current: true}})
		if err != nil {
			c.unlockW()
			return AskResult{}, err
		}
		t = c.turns[id]
	}
	if t.ask != nil {
		c.unlockW()
		return AskResult{}, errorf(CodeTooManyWaiters, "a question is already pending on turn %s", t.id)
	}
	if t.waiter == nil {
		if _, err := c.postMail(c.newMail(worker, t.caller, KindQuestion, content, t.id)); err != nil {
			c.unlockW()
			return AskResult{}, err
		}
	} else {
		t.waiter.hand(result{outcome: OutcomeQuestion, text: content})
		t.waiter = nil
	}
	a := newWaiter()
	t.ask, t.question, t.closing = a, content, false
	c.unlockW()

	r := c.await(ctx, a, deadline, func() bool {
		if t.ask != a {
			return false
		}
		t.ask, t.question = nil, ""
		return true
	})
	if r.err != nil {
		return AskResult{}, r.err
	}
	return AskResult{Outcome: r.outcome, Answer: r.text, TurnID: t.id}, nil
}

// PollRequest asks for one page of a mailbox.
type PollRequest struct {
	// Cursor continues after the last message of an earlier page
	// ([PollPage.Next]); empty starts at the oldest unacknowledged message.
	Cursor string
	// Limit bounds the page's message count; 0 means [DefaultPollLimit].
	Limit int
	// Wait, when no message follows the cursor, blocks until one arrives,
	// Timeout passes (an empty page, not an error) or ctx ends.
	Wait    bool
	Timeout time.Duration // for Wait; 0 means Options.DefaultTimeout
}

// PollPage is one page of a mailbox, oldest first.
type PollPage struct {
	Messages []Message
	// Next is the cursor after the page's last message (the request's own
	// cursor when the page is empty): pass it to read on, or to wait for
	// what arrives later.
	Next string
	// More counts the unacknowledged messages after this page.
	More int
}

// PollPage returns a bounded page of the unacknowledged messages addressed
// to recipient that follow req.Cursor, oldest first. Messages stay in the
// mailbox until acknowledged: a poll without a cursor returns them again
// (at-least-once), one with the previous page's Next returns each once.
func (c *Core) PollPage(ctx context.Context, recipient string, req PollRequest) (PollPage, error) {
	after, err := parseCursor(req.Cursor)
	if err != nil {
		return PollPage{}, err
	}
	limit := cmp.Or(req.Limit, DefaultPollLimit)
	maxBytes := int64(c.opts.MaxPollBytes) // a page always holds its first message, whatever its size
	if limit < 0 || maxBytes < 0 {
		return PollPage{}, errorf(CodeInvalid, "a poll limit must not be negative")
	}
	return c.poll(ctx, recipient, req.Wait, req.Timeout, after, limit, maxBytes)
}

// Poll returns every unacknowledged message addressed to recipient (as
// many as the mailbox bounds let it hold), oldest first. With wait and an empty mailbox it blocks until a message arrives,
// the timeout passes (an empty result, not an error) or ctx ends. Messages
// are returned again until acknowledged (at-least-once). [Core.PollPage]
// returns a bounded page.
func (c *Core) Poll(ctx context.Context, recipient string, wait bool, timeout time.Duration) ([]Message, error) {
	p, err := c.poll(ctx, recipient, wait, timeout, 0, math.MaxInt, math.MaxInt64)
	return p.Messages, err
}

func (c *Core) poll(ctx context.Context, recipient string, wait bool, timeout time.Duration, after uint64, limit int, maxBytes int64) (PollPage, error) {
	c.mu.Lock()
	if p := c.page(recipient, after, limit, maxBytes); len(p.Messages) > 0 || !wait || c.closed {
		c.mu.Unlock()
		return p, nil
	}
	if err := c.acquire(recipient); err != nil {
		c.mu.Unlock()
		return PollPage{}, err
	}
	defer c.release(recipient)
	fired := make(chan struct{})
	tm := c.opts.Clock.AfterFunc(cmp.Or(timeout, c.opts.DefaultTimeout), func() { close(fired) })
	defer tm.Stop()
	for {
		arrived := c.mailbox(recipient).arrived.Changed()
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return PollPage{}, ctx.Err()
		case <-fired:
			return PollPage{Messages: []Message{}, Next: formatCursor(after)}, nil
		case <-arrived:
		}
		c.mu.Lock()
		if p := c.page(recipient, after, limit, maxBytes); len(p.Messages) > 0 || c.closed {
			c.mu.Unlock()
			return p, nil
		}
	}
}

// page cuts recipient's messages after seq into a page of at most limit
// messages and maxBytes of content (but at least one message).
func (c *Core) page(recipient string, after uint64, limit int, maxBytes int64) PollPage {
	msgs := c.mailbox(recipient).msgs
	i, _ := slices.BinarySearchFunc(msgs, after+1, func(m Message, seq uint64) int { return cmp.Compare(m.Seq, seq) })
	p := PollPage{Messages: []Message{}, Next: formatCursor(after)}
	var size int64
	for ; i < len(msgs) && len(p.Messages) < limit; i++ {
		size += int64(len(msgs[i].Content))
		if size > maxBytes && len(p.Messages) > 0 {
			break
		}
		p.Messages = append(p.Messages, msgs[i])
		p.Next = formatCursor(msgs[i].Seq)
	}
	p.More = len(msgs) - i
	return p
}

func formatCursor(seq uint64) string {
	if seq == 0 {
		return ""
	}
	return "c" + strconv.FormatUint(seq, 10)
}

func parseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(s, "c"), 10, 64)
	if err != nil || !strings.HasPrefix(s, "c") {
		return 0, errorf(CodeInvalid, "cursor %q is not one a poll returned (pass its next value unchanged, or none to start from the oldest message)", s)
	}
	return seq, nil
}

// Ack retires messages from recipient's mailbox; they are never returned
// again. Unknown or already acknowledged ids are ignored. It returns how many
// messages it retired.
func (c *Core) Ack(recipient string, ids []string) (int, error) {
	c.lockW()
	defer c.unlockW()
	mb := c.mail[recipient]
	if mb == nil {
		return 0, nil
	}
	var hit []string
	for _, m := range mb.msgs {
		if slices.Contains(ids, m.ID) {
			hit = append(hit, m.ID)
		}
	}
	if len(hit) == 0 {
		return 0, nil
	}
	if err := c.commit(record{Op: opAck, Who: recipient, IDs: hit}); err != nil {
		return 0, err
	}
	return len(hit), nil
}

// Pending is the number of unacknowledged messages addressed to recipient.
func (c *Core) Pending(recipient string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mb := c.mail[recipient]; mb != nil {
		return len(mb.msgs)
	}
	return 0
}

// Status reports what the core knows about a worker. An unknown name yields
// a zero status with AgentStatus "unknown".
func (c *Core) Status(name string) WorkerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := WorkerStatus{Worker: name, AgentStatus: StatusUnknown}
	if w := c.workers.Get(name); w != nil {
		s.AgentStatus, s.StateChangeSeq, s.Gone, s.GoneReason = w.status, w.seq, w.gone, w.goneReason()
		s.QueueDepth, s.CurrentTurn = len(w.queue), w.current
		if w.inflight != nil {
			s.Delivering = w.inflight.msg.ID
		}
		if w.last != nil {
			last := *w.last
			s.LastDelivery = &last
		}
		s.Uncertain = slices.Clone(w.uncertain())
	}
	for _, t := range c.sortedTurns() {
		if t.worker == name {
			s.OpenTurns = append(s.OpenTurns, TurnStatus{ID: t.id, Caller: t.caller, CreatedAt: t.created,
				Deadline: t.deadline, Delivered: t.delivered, Waiting: t.waiter != nil, Asking: t.ask != nil, Question: t.question})
		}
	}
	if mb := c.mail[name]; mb != nil {
		s.Pending = len(mb.msgs)
	}
	return s
}

// Outstanding reports what the core holds open for worker name, in a few
// words, and whether there is anything: a prompt being typed into its
// pane or awaiting pickup, messages queued for it, a question it asked
// that waits for an answer, a turn it started and has not ended (or whose
// end is being read). A turn whose prompt went in but which the agent
// never started holds nothing: an idle agent owes it no work. The member
// controller waits for none of it before closing the worker's tab or
// replacing its agent (controllers.Activity). It reads memory only.
func (c *Core) Outstanding(name string) (why string, busy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outstanding(name)
}

// outstanding is Outstanding with c.mu held.
func (c *Core) outstanding(name string) (why string, busy bool) {
	var out []string
	if w := c.workers.Get(name); w != nil && !w.gone {
		switch {
		case w.inflight != nil && !w.inflight.sent:
			out = append(out, "a prompt is being typed into it")
		case w.inflight != nil:
			out = append(out, "a prompt it was given awaits pickup")
		}
		if n := len(w.queue); n == 1 {
			out = append(out, "1 message is queued for it")
		} else if n > 1 {
			out = append(out, fmt.Sprintf("%d messages are queued for it", n))
		}
	}
	for _, t := range c.sortedTurns() {
		switch {
		case t.worker != name:
		case t.ask != nil:
			out = append(out, fmt.Sprintf("its question in turn %s waits for an answer", t.id))
		case t.closing:
			out = append(out, fmt.Sprintf("the end of turn %s is being read", t.id))
		case t.delivered && t.started:
			out = append(out, fmt.Sprintf("turn %s is open since %s", t.id, t.created.UTC().Format(time.TimeOnly)))
		}
	}
	return strings.Join(out, "; "), len(out) > 0
}

// Hold keeps anything new from reaching member name's agent while the
// caller closes its pane — a replacement that found the agent idle — so
// that no prompt is typed between the caller's look and the close: unless
// the core holds something open for the worker (busy, with why in
// Outstanding's words: then nothing is held and release does nothing),
// every new message to it is refused with worker_gone, saying reason,
// until release. The close's own [Core.WorkerGone] then refuses them until
// the new pane's agent is seen, as after any lost pane. release may be
// called more than once; it never blocks on herdr.
func (c *Core) Hold(name, reason string) (release func(), why string, busy bool) {
	c.lockW()
	defer c.unlockW()
	if why, busy := c.outstanding(name); busy || c.closed {
		return func() {}, why, busy
	}
	w := c.worker(name)
	w.more().held = reason
	var once sync.Once
	return func() {
		once.Do(func() {
			c.lockW()
			defer c.unlockW()
			if x := w.extra; x != nil && x.held == reason {
				x.held = ""
				w.tidy()
			}
			if !c.closed {
				c.pump(w)
			}
		})
	}, "", false
}

// heldError is the refusal of a new message to a held worker, or nil.
// Callers hold c.mu.
func (c *Core) heldError(name string) error {
	if w := c.workers.Get(name); w != nil && w.held() != "" {
		return errorf(CodeWorkerGone, "%s takes no new message now: %s", name, w.held())
	}
	return nil
}

// Busy returns, sorted, the workers something waits on: those with an open
// turn or a message queued for their pane. The primary is not a worker and is
// never listed. fleetd reports those that are no longer running members gone
// ([Core.WorkerGone]), after a restart too, since being gone is not
// journalled.
func (c *Core) Busy() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, t := range c.turns {
		seen[t.worker] = true
	}
	for _, w := range c.workers.Entries() {
		if len(w.queue) > 0 || w.inflight != nil {
			seen[w.name] = true
		}
	}
	delete(seen, c.opts.PrimaryName)
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// --- helpers; callers hold c.wmu and c.mu (or, for reads, c.mu) unless noted ---

func (c *Core) checkContent(s string) error {
	if s == "" {
		return errorf(CodeInvalid, "content is empty")
	}
	if len(s) > c.opts.MaxContentBytes {
		return errorf(CodeTooLarge, "content is %d bytes; the limit is %d", len(s), c.opts.MaxContentBytes)
	}
	return nil
}

func (c *Core) acquire(caller string) error {
	if c.closed {
		return errorf(CodeUnavailable, "messaging core closed")
	}
	if c.waiting[caller] >= c.opts.MaxWaitersPerCaller {
		return errorf(CodeTooManyWaiters, "%s already holds %d waiting calls", caller, c.opts.MaxWaitersPerCaller)
	}
	c.waiting[caller]++
	return nil
}

// release undoes acquire. It takes c.mu itself (it runs deferred, after the
// locks were dropped); the waiting counts are guarded by c.mu alone, since a
// poll, which only reads the state, acquires too.
func (c *Core) release(caller string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiting[caller]--; c.waiting[caller] <= 0 {
		delete(c.waiting, caller)
	}
}

func (c *Core) currentTurn(worker string) *turn {
	if w := c.workers.Get(worker); w != nil {
		return c.turns[w.current]
	}
	return nil
}

func (c *Core) sortedTurns() []*turn {
	out := make([]*turn, 0, len(c.turns))
	for _, t := range c.turns {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.Before(out[j].created)
		}
		return out[i].id < out[j].id
	})
	return out
}

func (c *Core) newMail(from, to string, kind Kind, content, turnID string) *Message {
	c.mailSeq++
	return &Message{ID: c.opts.NewID("m-"), From: from, To: to, Kind: kind, Content: content, TurnID: turnID,
		CreatedAt: c.now(), Seq: c.mailSeq}
}

// roomFor refuses, with CodeMailboxFull, a message of content's size that
// would take to's mailbox over its bounds.
func (c *Core) roomFor(to, content string) error {
	var held int
	var size int64
	if mb := c.mail[to]; mb != nil {
		held, size = len(mb.msgs), mb.bytes
	}
	if held < c.opts.MaxMailboxMessages && size+int64(len(content)) <= c.opts.MaxMailboxBytes {
		return nil
	}
	who := to + "'s"
	if to == c.opts.PrimaryName {
		who = "the primary's"
	}
	return errorf(CodeMailboxFull, "%s mailbox is full: it holds %d unacknowledged messages of %d bytes and takes %d messages, %d bytes; "+
		"this %d-byte message was not stored (an open turn stays open): try again once its mail is read and acknowledged (bridge_poll, bridge_ack)",
		who, held, size, c.opts.MaxMailboxMessages, c.opts.MaxMailboxBytes, len(content))
}

// injectsInto reports whether mail for recipient is also typed into a pane.
func (c *Core) injectsInto(recipient string) bool {
	return recipient == c.opts.PrimaryName && c.opts.PrimaryTarget != ""
}

// typesInto reports whether a copy of the next mail for recipient is
// queued for typing into its pane: the pane is known and its queue holds
// fewer than Options.MaxMailboxMessages copies. (A pane that is never idle
// would otherwise collect a copy of every message ever mailed, acknowledged
// or not; over the bound, mail is stored in the mailbox only.) Callers
// decide before they commit the mail, so mailRecords and mailMode agree.
func (c *Core) typesInto(recipient string) bool {
	return c.injectsInto(recipient) && len(c.worker(recipient).queue) < c.opts.MaxMailboxMessages
}

func (c *Core) mailMode(m *Message) ReplyMode {
	if c.typesInto(m.To) {
		return ReplyInjected
	}
	return ReplyQueued
}

// mailRecords stores m in its recipient's mailbox and, for the primary with a
// known pane, queues a copy for typing into it (see typesInto).
func (c *Core) mailRecords(m *Message) []record {
	recs := []record{{Op: opMail, Msg: m}}
	if c.typesInto(m.To) {
		cp := *m
		cp.ID = c.opts.NewID("m-")
		recs = append(recs, record{Op: opEnqueue, Msg: &cp})
	}
	return recs
}

// mailPosted wakes m's recipient's pollers and its injector.
func (c *Core) mailPosted(m *Message) {
	c.mailbox(m.To).arrived.Notify()
	if c.injectsInto(m.To) {
		c.pump(c.worker(m.To))
	}
}

func (c *Core) postMail(m *Message) (ReplyMode, error) {
	mode := c.mailMode(m)
	if err := c.commit(c.mailRecords(m)...); err != nil {
		return "", err
	}
	c.mailPosted(m)
	return mode, nil
}

// endTurn closes t. Its held call, if any, gets res; otherwise mail (when not
// nil) goes to the caller's mailbox so that nothing is lost. A pending Ask is
// released with not_found (or res's error, when res is one).
func (c *Core) endTurn(t *turn, reason string, res result, mail *Message) error {
	recs := []record{{Op: opTurnClose, ID: t.id, Reason: reason}}
	if t.waiter == nil && mail != nil {
		recs = append(c.mailRecords(mail), recs...)
	}
	if err := c.commit(recs...); err != nil {
		c.opts.Logger.Error("messaging: record turn end", "turn", t.id, "err", err)
		return err
	}
	if t.waiter != nil {
		t.waiter.hand(res)
	} else if mail != nil {
		c.mailPosted(mail)
	}
	if t.ask != nil {
		askErr := res.err
		if askErr == nil {
			askErr = errorf(CodeNotFound, "turn %s ended (%s) before the question was answered", t.id, reason)
		}
		t.ask.hand(result{err: askErr})
	}
	t.waiter, t.ask, t.question = nil, nil, ""
	return nil
}

// await blocks until w gets its result, deadline passes or ctx ends. detach
// runs under c.wmu and c.mu and reports whether it unhooked w before anyone handed it a
// result; if not, the handed result wins. It records the wait's duration.
func (c *Core) await(ctx context.Context, w *waiter, deadline time.Time, detach func() bool) result {
	start := c.now()
	fired := make(chan struct{})
	tm := c.opts.Clock.AfterFunc(max(deadline.Sub(start), 0), func() { close(fired) })
	defer tm.Stop()
	var r result
	select {
	case r = <-w.ch:
	case <-fired:
		r = c.detachOr(w, detach, result{outcome: OutcomeTimeout})
	case <-ctx.Done():
		r = c.detachOr(w, detach, result{err: fmt.Errorf("wait released: %w", ctx.Err())})
	}
	c.metrics.wait.WithLabelValues(waitLabel(r)).Observe(c.now().Sub(start).Seconds())
	return r
}

func (c *Core) detachOr(w *waiter, detach func() bool, r result) result {
	c.lockW()
	ok := detach()
	c.unlockW()
	if ok {
		return r
	}
	return <-w.ch
}

func waitLabel(r result) string {
	switch {
	case r.err == nil:
		return string(r.outcome)
	case errors.Is(r.err, context.Canceled), errors.Is(r.err, context.DeadlineExceeded):
		return "canceled"
	case CodeOf(r.err) != "":
		return string(CodeOf(r.err))
	default:
		return "error"
	}
}
