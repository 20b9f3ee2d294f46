package messaging

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/journal"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"github.com/fleetd-dev/fleetd/internal/sortedindex"
	"github.com/fleetd-dev/fleetd/internal/statedir"
)

// Prompter is the slice of herdr the core needs: type a prompt into an agent
// (agent.prompt, without wait) and read the recent tail of its terminal
// (agent.read). target is a herdr agent target (a pane id or a live agent
// name). A failed Prompt returns a [*PromptError] that tells "refused,
// nothing typed" from "outcome unknown"; the adapter classifies its
// multiplexer's errors (package herdrprompt does herdr's).
type Prompter interface {
	Prompt(ctx context.Context, target, text string) error
	ReadTail(ctx context.Context, target string, lines int) (string, error)
}

// DefaultPrimaryName is the primary's name in From and To when the caller
// names none ([Options.PrimaryName], [FirstPromptsOptions.From]).
const DefaultPrimaryName = "primary"

// Options tunes a Core. A nil *Options means all defaults.
type Options struct {
	// Clock is the core's only source of time: deadlines are computed from
	// Now and waited for with AfterFunc, so a test can run the whole core
	// inside a testing/synctest bubble or on a clock.Fake. Default clock.Real.
	Clock clock.Clock
	// Registerer receives fleetd_rendezvous_wait_seconds and
	// fleetd_injector_queue_depth; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger defaults to a discarding logger. Content is never logged.
	Logger *slog.Logger

	// PrimaryName is the identity of the primary as used in From/To and as
	// the mailbox recipient for replies that have no waiting call. Default
	// [DefaultPrimaryName].
	PrimaryName string
	// PrimaryTarget is the herdr target of the primary's own pane, when
	// fleetd knows it. Mailbox messages for the primary are then also typed
	// into that pane (status-gated like any delivery; feed its status with
	// ObserveStatus(PrimaryName, …)). Empty: mailbox only.
	PrimaryTarget string
	// Target maps a worker name to its herdr target. Default: the name itself
	// (fleetd starts each agent with its member name).
	Target func(worker string) string
	// Admit, if set, is asked before a new turn to worker is opened (Send
	// without a TurnID); a non-nil error refuses the send unchanged. fleetd
	// refuses names that are not members (CodeNotFound) and paused members
	// (CodeWorkerGone), so that nothing waits for a pane that will not come.
	// It runs with the core's lock held and must not call the Core.
	Admit func(worker string) error

	// MaxContentBytes bounds every content argument. Default
	// v1alpha1.MaxContentBytes (256 KiB), the limit a Member's spec.prompt
	// is held to when it is decoded.
	MaxContentBytes int
	// MaxMailboxMessages and MaxMailboxBytes bound each recipient's mailbox:
	// how many unacknowledged messages it holds and their content's total
	// size. A worker's reply, progress note or question that would go over
	// either is refused with [CodeMailboxFull] and nothing is stored (the
	// turn stays open; the worker may try again once the recipient has
	// acknowledged mail); what is already stored is never dropped. Notices
	// the core writes itself when a turn ends (turn_done, worker_gone,
	// delivery_failed) are accepted over the limit, so that no turn ends
	// unreported; there is at most one per turn. Defaults 1000 messages and
	// 64 MiB.
	MaxMailboxMessages int
	MaxMailboxBytes    int64
	// MaxPollBytes bounds the content one [Core.PollPage] returns when the
	// request names no bound; a page always carries at least one message
	// (at most MaxContentBytes). Default 1 MiB.
	MaxPollBytes int
	// MaxWaitersPerCaller bounds the blocking calls one caller may hold at
	// once (Send with Wait, Await, Ask, Poll with wait). Default 1024: the
	// primary holds one call per worker it delegates to, and a fleet has
	// hundreds of workers; the bound only stops a runaway caller.
	MaxWaitersPerCaller int
	// DefaultTimeout applies when a call passes a zero timeout. Default 10 min.
	DefaultTimeout time.Duration
	// PickupGrace is how long the injector waits, after a delivery, for the
	// agent to show it picked the prompt up (state_change_seq advances or it
	// reports working) before it considers the turn begun anyway and may
	// deliver the next message. Default 10 s.
	PickupGrace time.Duration
	// PromptTimeout bounds one Prompt call. Default 30 s.
	PromptTimeout time.Duration
	// TailLines is how many terminal lines a turn_done result carries.
	// Default 60.
	TailLines int
	// CompactBytes: once the journal is larger than this and at least twice
	// its live content, it is rewritten with only live state — when it has
	// doubled since the last compaction, and after every acknowledgement
	// (or dropped worker) that leaves it mostly history. Default 4 MiB.
	CompactBytes int64
	// Classify sorts Prompt errors. Default DefaultClassify (the
	// Prompter's *PromptError).
	Classify func(error) Verdict
	// wrapJournal, if set, wraps the journal's file (tests inject faults).
	wrapJournal func(journal.File) journal.File
	// MaxRequestIDs is how many callers' request ids ([SendRequest.ID]) the
	// core remembers, journalled, after their turn ended: a request made
	// again within that many later ones changes nothing. Default 4096.
	MaxRequestIDs int
	// NewID returns a fresh unique id with the given prefix ("t-" turns,
	// "m-" messages). Default: prefix + 16 random hex digits.
	NewID func(prefix string) string
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Clock == nil {
		r.Clock = clock.Real{}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.PrimaryName == "" {
		r.PrimaryName = DefaultPrimaryName
	}
	if r.Target == nil {
		r.Target = func(w string) string { return w }
	}
	if r.MaxContentBytes <= 0 {
		r.MaxContentBytes = v1alpha1.MaxContentBytes
	}
	if r.MaxMailboxMessages <= 0 {
		r.MaxMailboxMessages = DefaultMaxMailboxMessages
	}
	if r.MaxMailboxBytes <= 0 {
		r.MaxMailboxBytes = DefaultMaxMailboxBytes
	}
	if r.MaxPollBytes <= 0 {
		r.MaxPollBytes = DefaultMaxPollBytes
	}
	if r.MaxWaitersPerCaller <= 0 {
		r.MaxWaitersPerCaller = 1024
	}
	if r.DefaultTimeout <= 0 {
		r.DefaultTimeout = 10 * time.Minute
	}
	if r.PickupGrace <= 0 {
		r.PickupGrace = 10 * time.Second
	}
	if r.PromptTimeout <= 0 {
		r.PromptTimeout = 30 * time.Second
	}
	if r.TailLines <= 0 {
		r.TailLines = 60
	}
	if r.CompactBytes <= 0 {
		r.CompactBytes = 4 << 20
	}
	if r.Classify == nil {
		r.Classify = DefaultClassify
	}
	if r.NewID == nil {
		r.NewID = randomID
	}
	if r.MaxRequestIDs <= 0 {
		r.MaxRequestIDs = 4096
	}
	return r
}

// Defaults of the mailbox bounds ([Options.MaxMailboxMessages],
// [Options.MaxMailboxBytes], [Options.MaxPollBytes]) and of a page's
// message count ([PollRequest.Limit]).
const (
	DefaultMaxMailboxMessages       = 1000
	DefaultMaxMailboxBytes    int64 = 64 << 20
	DefaultMaxPollBytes             = 1 << 20
	DefaultPollLimit                = 100
)

func randomID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// JournalFile is the journal's file name inside the directory given to New.
const JournalFile = "messaging.journal"

// Core is the messaging core: rendezvous, mailboxes and the injector, backed
// by a journal. All methods are safe for concurrent use.
type Core struct {
	opts    Options
	prompt  Prompter
	metrics *metrics

	// ctx is the parent of every background call (Prompt, ReadTail); Close
	// cancels it and waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// wmu, the commit lock, serialises everything that changes the state:
	// it is held for a whole state-changing call, journal write included,
	// and taken before mu. mu guards the in-memory state; commit releases
	// it while the journal is written and fsynced (wmu keeps every other
	// writer out meanwhile), so that a call that only reads takes mu alone
	// and never waits on the disk. See "Concurrency" in doc.go.
	wmu       sync.Mutex
	mu        sync.Mutex
	closed    bool
	j         *journal.Journal
	compactAt int64
	// compacted, while a rewrite of the journal runs in the background, is
	// closed when it ends; nil otherwise.
	compacted chan struct{}
	// recompact: a commit found the journal worth compacting while a
	// rewrite ran; the rewrite looks again when it ends.
	recompact bool
	turns     map[string]*turn
	// workers by name, sorted: a thousand members' workers take 8 KB
	// where a map takes 53 KB. A worker, once made, is never dropped.
	workers sortedindex.Index[worker]
	mail    map[string]*mailbox
	waiting map[string]int // caller → blocking calls held
	depth   int            // messages queued in all injectors
	mailSeq uint64         // the last Message.Seq handed out
	// requests holds the callers' request ids taken (SendRequest.ID);
	// requestIDs is the same, oldest first, at most Options.MaxRequestIDs.
	requests   map[string]struct{}
	requestIDs []string
	inflate    float64 // liveBytes' correction, from the last compaction
	// changed is notified by every unlockW: a call that may have changed
	// the state ended.
	changed notify.Signal
}

// turn is one exchange between a caller (the primary) and a worker: the
// prompt, any questions and answers, and the final reply.
type turn struct {
	id, caller, worker string
	created, deadline  time.Time
	delivered          bool   // a prompt of this turn reached, or may have reached, the worker
	baseline           uint64 // worker's state_change_seq when that prompt went out
	started            bool   // the worker was seen working after the delivery
	closing            bool   // a turn_done tail read is in flight

	waiter   *waiter // the caller's held call, if any
	ask      *waiter // the worker's pending Ask, if any
	question string
}

// mailbox holds a recipient's unacknowledged messages in arrival order.
type mailbox struct {
	msgs    []Message     // in Seq order
	bytes   int64         // total content size of msgs
	arrived notify.Signal // a message arrived (or the mailbox was dropped, or the core closed)
}

// New opens (or creates) the journal in dir, restores the state it records
// and returns a running Core. Deliveries that were in flight when the previous
// process died are marked uncertain and not retried.
func New(dir string, p Prompter, opts *Options) (*Core, error) {
	if p == nil {
		return nil, errors.New("messaging: nil Prompter")
	}
	o := opts.withDefaults()
	if err := os.MkdirAll(dir, statedir.DirMode); err != nil {
		return nil, fmt.Errorf("messaging: state directory: %w", err)
	}
	path := JournalPath(dir)
	j, recs, dropped, err := journal.OpenWith(path, &journal.Options{Wrap: o.wrapJournal})
	if err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{
		opts: o, prompt: p, metrics: newMetrics(), ctx: ctx, cancel: cancel, j: j,
		turns: map[string]*turn{}, workers: sortedindex.New(workerName, nil),
		mail: map[string]*mailbox{}, waiting: map[string]int{}, inflate: 1, requests: map[string]struct{}{},
	}
	if dropped > 0 {
		o.Logger.Warn("messaging journal had a torn last record; dropped it", "path", path, "bytes", dropped)
	}
	for i, raw := range recs {
		r, err := decodeRecord(raw)
		if err != nil {
			j.Close()
			cancel()
			return nil, fmt.Errorf("messaging: %w: %s: record %d: %v", ErrJournalCorrupt, path, i+1, err)
		}
		c.apply(r)
	}
	c.lockW()
	defer c.unlockW()
	c.compactAt = max(o.CompactBytes, 2*j.Size())
	if err := c.recoverInFlight(); err != nil {
		j.Close()
		cancel()
		return nil, fmt.Errorf("messaging: %w", err)
	}
	c.metrics.depth.Set(float64(c.depth))
	if err := c.metrics.register(o.Registerer); err != nil {
		j.Close()
		cancel()
		return nil, fmt.Errorf("messaging: %w", err)
	}
	return c, nil
}

// recoverInFlight runs once after replay: a prompt that was being typed when
// the process died may or may not have reached the agent, so it becomes
// uncertain; pickup tracking does not survive a restart, and every worker
// waits for its first observation to rebase its turn.
func (c *Core) recoverInFlight() error {
	var recs []record
	for _, w := range c.workers.Entries() {
		if d := w.inflight; d != nil && !d.sent {
			recs = append(recs, record{Op: opUncertain, ID: d.msg.ID, Who: w.name, At: c.now(),
				Reason: "fleetd stopped while the prompt was being delivered"})
		}
	}
	if err := c.commit(recs...); err != nil {
		return err
	}
	for _, w := range c.workers.Entries() {
		w.inflight, w.restored = nil, true
	}
	return nil
}

// Close stops background deliveries, releases every blocked call with
// CodeUnavailable and closes the journal. Everything acknowledged stays in
// the journal for the next New.
func (c *Core) Close() error {
	c.lockW()
	if c.closed {
		c.unlockW()
		return nil
	}
	c.closed = true
	for _, w := range c.workers.Entries() {
		w.stopGrace()
		w.stopRetry()
	}
	for _, t := range c.turns {
		err := errorf(CodeUnavailable, "messaging core closed")
		t.waiter.hand(result{err: err})
		t.ask.hand(result{err: err})
		t.waiter, t.ask = nil, nil
	}
	for _, mb := range c.mail {
		mb.arrived.Notify()
	}
	c.unlockW()
	c.cancel()
	c.wg.Wait()
	return c.j.Close()
}

func (c *Core) now() time.Time { return c.opts.Clock.Now() }

// lockW takes the commit lock and the state lock, for a call that changes
// the state; unlockW releases both.
func (c *Core) lockW() {
	c.wmu.Lock()
	c.mu.Lock()
}

func (c *Core) unlockW() {
	c.changed.Notify()
	c.mu.Unlock()
	c.wmu.Unlock()
}

// Changed returns a channel that is closed after the next call that may
// have changed the state (a send, reply, question, answer, ack, status
// observation, a turn's end), for a watcher that shows the state (the
// browser console) to wake on instead of polling. It may close for a call
// that changed nothing; a watcher reads the state again and compares.
func (c *Core) Changed() <-chan struct{} { return c.changed.Changed() }

// commit makes recs durable (one write, one fsync) and then applies them to
// the in-memory state. On error nothing is applied. Callers hold c.wmu and
// c.mu (lockW); commit releases c.mu while it writes and fsyncs, so calls
// that only read go on meanwhile and see the state before recs, and retakes
// it to apply them: a record's effect is never visible before it is
// durable. c.wmu keeps every other change out for the whole time.
func (c *Core) commit(recs ...record) error {
	if len(recs) == 0 {
		return nil
	}
	if c.closed {
		return errorf(CodeUnavailable, "messaging core closed")
	}
	raw := make([][]byte, len(recs))
	for i, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return &Error{Code: CodeUnavailable, Msg: "encode journal record", Err: err}
		}
		raw[i] = b
	}
	c.mu.Unlock()
	err := c.j.Append(raw...)
	size := c.j.Size()
	c.mu.Lock()
	if err != nil {
		return &Error{Code: CodeUnavailable, Msg: "write journal", Err: err}
	}
	for _, r := range recs {
		c.apply(r)
	}
	c.metrics.depth.Set(float64(c.depth))
	if size > c.compactAt || (retires(recs) && c.mostlyHistory(size)) {
		if c.compacted != nil {
			c.recompact = true
		} else {
			c.compact()
		}
	}
	return nil
}

// retires reports whether recs take messages out of the live state (an ack,
// a worker's drop), after which the journal may be mostly history.
func retires(recs []record) bool {
	for _, r := range recs {
		if r.Op == opAck || r.Op == opDrop {
			return true
		}
	}
	return false
}

// mostlyHistory reports whether a journal of size bytes is worth compacting
// because it is mostly history: over Options.CompactBytes and over twice
// the live state.
func (c *Core) mostlyHistory(size int64) bool {
	return size > c.opts.CompactBytes && size > 2*c.liveBytes()
}

// liveBytes estimates the size of a snapshot of the live state: its content
// plus a record's framing per entry, scaled by how far the last compaction
// found such estimates off (JSON escaping can grow content up to six
// times), so that a compaction is not followed by another on every ack.
func (c *Core) liveBytes() int64 {
	return int64(float64(c.estimate()) * c.inflate)
}

// estimate is liveBytes before its correction.
func (c *Core) estimate() int64 {
	const perRecord = 256
	n := int64(len(c.turns)+c.workers.Len()) * perRecord
	for _, mb := range c.mail {
		n += mb.bytes + int64(len(mb.msgs))*perRecord
	}
	for _, w := range c.workers.Entries() {
		for _, m := range w.queue {
			n += int64(len(m.Content)) + perRecord
		}
	}
	return n
}

// compact starts rewriting the journal with only live state. The snapshot
// is taken here, in memory, under c.wmu and c.mu, at a point no append can
// cross ([journal.Journal.BeginRewrite]); a goroutine that holds neither
// lock encodes it and writes the new file, while commits go on appending to
// the old one, and the journal carries what they appended into the new file
// when it switches. A failure is logged and leaves the old journal in place;
// it never loses an acknowledged record. Callers hold c.wmu and c.mu.
func (c *Core) compact() {
	recs := c.snapshot()
	est := c.estimate()
	rw, err := c.j.BeginRewrite()
	if err != nil {
		c.opts.Logger.Error("messaging journal compaction failed", "err", err)
		return
	}
	done := make(chan struct{})
	c.compacted = done
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		raw := make([][]byte, 0, len(recs))
		var snapBytes int64
		for _, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				rw.Abort()
				c.compactDone(done, 0, 0, 0, fmt.Errorf("encode snapshot: %w", err))
				return
			}
			raw = append(raw, b)
			snapBytes += int64(len(b)) + 10 // checksum, separator, newline
		}
		err := rw.Finish(raw)
		c.compactDone(done, len(raw), snapBytes, est, err)
	}()
}

// compactDone records the end of the compaction that signals done: it
// wrote n records of snapBytes for a state whose estimate was est, or failed
// with err. A compaction wanted meanwhile starts now.
func (c *Core) compactDone(done chan struct{}, n int, snapBytes, est int64, err error) {
	size := c.j.Size()
	c.lockW()
	defer c.unlockW()
	defer close(done)
	c.compacted = nil
	if err != nil {
		c.opts.Logger.Error("messaging journal compaction failed", "err", err)
		c.compactAt, c.recompact = 2*size, false
		return
	}
	c.compactAt = max(c.opts.CompactBytes, 2*size)
	// The snapshot against the estimate of the same state (the file also
	// holds what was appended meanwhile).
	c.inflate = 1
	if est > 0 && snapBytes > est {
		c.inflate = float64(snapBytes) / float64(est)
	}
	c.opts.Logger.Info("messaging journal compacted", "records", n, "bytes", size)
	// What was retired while this one ran is still in the new file.
	if c.recompact {
		c.recompact = false
		if !c.closed && (size > c.compactAt || c.mostlyHistory(size)) {
			c.compact()
		}
	}
}
