package herdrprompt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/tail"
)

// Client is the part of *herdr.Client the adapter uses.
type Client interface {
	PromptAgent(ctx context.Context, p herdr.AgentPromptParams) (*herdr.AgentInfo, error)
	ReadAgent(ctx context.Context, p herdr.AgentReadParams) (*herdr.PaneReadResult, error)
	GetAgent(ctx context.Context, target string) (*herdr.AgentInfo, error)
}

// CheckTimeout bounds the one agent.get of a completion check.
const CheckTimeout = 10 * time.Second

// Prompter is a messaging.Prompter over a herdr client, and the status feed
// that adds herdr's completion evidence ([Prompter.Feed]). Close it when done.
type Prompter struct {
	c      Client
	ctx    context.Context // of the completion checks; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu orders everything passed to the feed's observe: the cache's
	// observations and the changes a completion check adds.
	mu      sync.Mutex
	observe func(name, status string, seq uint64)
	// workers are the agent targets the feed has something to keep for
	// (see worker); a target without an entry passes through unchanged.
	workers map[string]*worker
	held    func() bool // see HoldWhile; nil: never
}

// worker is what the feed knows of one agent target, kept only while it
// keeps something: a prompt whose turn shows no start yet (pending), or
// the changes the feed added (off). A target with neither has no entry
// (release): a thousand quiet members cost the feed nothing.
type worker struct {
	in      uint64 // the last seq observed, as numbered by the caller
	off     uint64 // added to the caller's numbers: the changes the feed added moved them ahead
	status  string // the last status observed
	pending *delivery
}

// delivery is a prompt herdr typed whose turn has shown no start yet.
type delivery struct {
	since    *uint64 // completion_seq in agent.prompt's answer; nil: herdr reports none (protocol 20)
	started  bool    // a working or blocked status was observed since the prompt went out
	checking bool    // a completion check is in flight
}

var _ messaging.Prompter = (*Prompter)(nil)

// New returns a Prompter that talks to herdr through c.
func New(c Client) *Prompter {
	ctx, cancel := context.WithCancel(context.Background())
	return &Prompter{c: c, ctx: ctx, cancel: cancel, workers: map[string]*worker{}}
}

// Close stops the completion checks in flight and waits for them.
func (p *Prompter) Close() {
	p.cancel()
	p.wg.Wait()
}

func (p *Prompter) worker(target string) *worker {
	w := p.workers[target]
	if w == nil {
		w = &worker{}
		p.workers[target] = w
	}
	return w
}

// release forgets target's entry w once it keeps nothing (see worker).
func (p *Prompter) release(target string, w *worker) {
	if w.pending == nil && w.off == 0 {
		delete(p.workers, target)
	}
}

// errHeld is why a prompt was held (see [Prompter.HoldWhile]).
var errHeld = errors.New("held while fleetd's view of herdr is not in sync, or while this node of a fleet cannot confirm its lease in etcd")

// HoldWhile makes Prompt refuse every prompt, before herdr sees it, while
// held reports true, as a refused connect is refused (NotSent: the core
// retries it). fleetd holds prompts while its view of herdr is not in sync
// — herdr away, or back but not read yet — because a herdr that restarted
// with session restore relaunched its agents: a prompt typed into a
// relaunched agent before the read that reports the relaunch would be
// taken by the core for one the old agent lost, and its turn ended.
func (p *Prompter) HoldWhile(held func() bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = held
}

// Prompt types text into the agent target (a pane id or live agent name) and
// returns as soon as herdr has typed it. A failure is a
// *messaging.PromptError classified by [Classify] that wraps herdr's error
// unchanged. The completion_seq in herdr's answer is the baseline of the
// turn's completion evidence (see [Prompter.Feed]).
func (p *Prompter) Prompt(ctx context.Context, target, text string) error {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil && held() {
		err := fmt.Errorf("prompt agent %s: %w", target,
			&herdr.TransportError{Method: "agent.prompt", Reason: herdr.ReasonUnavailable, Err: errHeld})
		return &messaging.PromptError{Verdict: Classify(err), Err: err}
	}
	d := &delivery{}
	p.mu.Lock()
	p.worker(target).pending = d // a start observed from now on belongs to this prompt
	p.mu.Unlock()
	info, err := p.c.PromptAgent(ctx, herdr.AgentPromptParams{Target: target, Text: text})
	p.mu.Lock()
	if w := p.workers[target]; w != nil && w.pending == d {
		if err != nil || info == nil || info.CompletionSeq == nil {
			w.pending = nil // no baseline: the core's working → idle rule alone ends the turn
			p.release(target, w)
		} else {
			since := *info.CompletionSeq
			d.since = &since
		}
	}
	p.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("prompt agent %s: %w", target, err)
		pe := &messaging.PromptError{Verdict: Classify(err), Err: err}
		if herdr.IsCode(err, "agent_blocked") {
			pe.Status = messaging.StatusBlocked
		}
		return pe
	}
	return nil
}

// Feed wraps observe (normally messaging.Core.ObserveStatus) so that a turn
// ends on herdr's evidence even when its working phase was never observed.
// Pass the returned func every status observation of the workers (the
// cache's numbering: seq moves with every change of state); name must be
// the agent target the prompts were typed into (fleetd's member name).
//
// herdr (protocol 22) reports completion_seq, which advances whenever the
// agent finished work. When a prompt was typed (Prompt kept the answer's
// completion_seq) and the worker is observed idle or done with no working or
// blocked status observed since, the feed asks herdr for the agent once
// (agent.get, in the background; at most one check per worker in flight).
// If its completion_seq advanced past the one at delivery and it is still
// idle or done, the turn ran unseen: the feed passes on the change that was
// missed — working, then the status again — numbered after the last seq it
// passed on, and numbers every later observation of that worker past them,
// so the core sees the turn start and end. Where herdr reports no
// completion_seq (protocol 20) observations pass through unchanged, and the
// core's working → idle rule is the only one. Feed may be called once.
func (p *Prompter) Feed(observe func(name, status string, seq uint64)) func(name, status string, seq uint64) {
	p.mu.Lock()
	p.observe = observe
	p.mu.Unlock()
	return p.observed
}

func (p *Prompter) observed(name, status string, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers[name]
	if w == nil {
		p.observe(name, status, seq)
		return
	}
	w.in, w.status = seq, status
	d := w.pending
	if d != nil && (status == messaging.StatusWorking || status == messaging.StatusBlocked) {
		d.started = true
		w.pending = nil // the turn shows its start; the core ends it on its own
		p.release(name, w)
		d = nil
	}
	p.observe(name, status, seq+w.off)
	if d == nil || d.since == nil || d.checking || !idle(status) {
		return
	}
	d.checking = true
	p.wg.Add(1)
	go p.check(name, d)
}

func idle(status string) bool {
	return status == messaging.StatusIdle || status == messaging.StatusDone
}

// check asks herdr whether the turn of delivery d completed unseen, and if
// so passes the missed change on.
func (p *Prompter) check(name string, d *delivery) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, CheckTimeout)
	a, err := p.c.GetAgent(ctx, name)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	d.checking = false
	w := p.workers[name]
	if err != nil || a == nil || a.CompletionSeq == nil || p.ctx.Err() != nil {
		return // the next idle observation checks again
	}
	if w == nil || w.pending != d || d.started || !idle(w.status) || !idle(string(a.AgentStatus)) || *a.CompletionSeq <= *d.since {
		return
	}
	w.pending = nil
	base := w.in + w.off
	w.off += 2 // the entry stays: it numbers the worker's observations from now on
	p.observe(name, messaging.StatusWorking, base+1)
	p.observe(name, w.status, base+2)
}

// Classify sorts the errors of agent.prompt: codes herdr returns before it
// types anything are NotSent; agent_prompt_stalled, and protocol 22's
// failures after the text was typed (agent_prompt_failed, timeout), are
// Uncertain — never re-sent; other herdr codes Failed; herdr unreachable
// (dial failed) is NotSent, a connection that broke after the request is
// Uncertain, and so is anything unrecognised.
func Classify(err error) messaging.Verdict {
	if err == nil {
		return messaging.Delivered
	}
	if he, ok := errors.AsType[*herdr.Error](err); ok {
		switch he.Code {
		case "agent_blocked", "agent_not_ready", "agent_not_idle", "agent_launch_pending",
			"agent_pane_busy", "agent_pane_unavailable", "agent_not_running":
			return messaging.NotSent
		case "agent_prompt_stalled", "agent_prompt_failed", "timeout":
			return messaging.Uncertain
		default:
			return messaging.Failed
		}
	}
	if te, ok := errors.AsType[*herdr.TransportError](err); ok && te.Reason == herdr.ReasonUnavailable {
		return messaging.NotSent
	}
	return messaging.Uncertain
}

// ReadTail returns the last lines (at most lines) of what the agent's
// terminal shows, as plain text: [tail.Screen] over the client, a read of
// the visible screen that changes nothing.
func (p *Prompter) ReadTail(ctx context.Context, target string, lines int) (string, error) {
	return tail.Screen(ctx, p.c, target, lines)
}
