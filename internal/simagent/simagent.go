package simagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/internal/harness"
	"github.com/fleetd-dev/fleetd/internal/mcpbridge"
)

// ReplyPrefix starts every reply: a prompt "hello" is answered "echo: hello".
const ReplyPrefix = "echo: "

// A prompt that starts with "sleep N " (N a number of seconds, or a Go
// duration such as 90s or 2m; at most MaxTurn) keeps the agent working
// for that long before it replies to the rest: "sleep 5 write the summary"
// is answered "echo: write the summary" five seconds later. It is a turn
// that lasts, to try what fleetd does with a busy agent — a deletion, a
// pause or a spec change waits for the turn to end.
const (
	SleepPrefix = "sleep "
	MaxTurn     = 5 * time.Minute
)

// turnOf splits a prompt into how long its turn lasts and what is
// answered: "sleep 5 x" is 5 s and "x"; any other prompt is answered at
// once, whole.
func turnOf(prompt string) (time.Duration, string) {
	rest, ok := strings.CutPrefix(prompt, SleepPrefix)
	if !ok {
		return 0, prompt
	}
	word, text, _ := strings.Cut(rest, " ")
	d, err := time.ParseDuration(word)
	if err != nil {
		n, nerr := strconv.Atoi(word)
		if nerr != nil {
			return 0, prompt
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return 0, prompt
	}
	return min(d, MaxTurn), text
}

// Herdr is the part of the simulated herdr an agent drives
// (*herdrsim.Server satisfies it).
type Herdr interface {
	// PaneEnv returns the environment the pane's process was started with.
	PaneEnv(paneID string) (map[string]string, bool)
	// SetAgentState moves the pane's agent to idle, working, blocked or
	// unknown.
	SetAgentState(paneID, state string) error
	// WriteOutput appends text to the pane's screen.
	WriteOutput(paneID, text string) error
}

var _ Herdr = (*herdrsim.Server)(nil)

// Options configure [New]. The zero value is usable.
type Options struct {
	// Logger receives one line per failed prompt; nil discards.
	Logger *slog.Logger
	// HTTPClient carries the MCP requests; nil uses http.DefaultTransport.
	// Its Transport is wrapped, never modified.
	HTTPClient *http.Client
	// ReplyTimeout bounds connecting and calling bridge_reply for one
	// prompt; 0 is 30 s.
	ReplyTimeout time.Duration
}

// Agents answers prompts typed into the simulated herdr's agents. Create it
// with [New], put [Agents.Behavior] into herdrsim.Options, [Agents.Attach]
// the started server, and [Agents.Close] it before closing the server.
type Agents struct {
	log     *slog.Logger
	client  *http.Client
	timeout time.Duration

	ctx    context.Context // cancelled by Close; parent of every prompt's work
	cancel context.CancelFunc

	mu     sync.Mutex
	herdr  Herdr
	closed bool
	wg     sync.WaitGroup
}

// New returns Agents with nothing attached yet; opts may be nil.
func New(opts *Options) *Agents {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReplyTimeout <= 0 {
		o.ReplyTimeout = 30 * time.Second
	}
	client := &http.Client{}
	if o.HTTPClient != nil {
		*client = *o.HTTPClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Agents{log: o.Logger, client: client, timeout: o.ReplyTimeout, ctx: ctx, cancel: cancel}
}

// Behavior is the herdrsim behaviour of an answering agent: it launches
// normally, reports its own session once ready (reopened when its
// launch resumes one, as Claude Code's and Codex's do), and hands every
// prompt to a.
func (a *Agents) Behavior() herdrsim.Behavior {
	return herdrsim.Behavior{OnPrompt: a.prompted, ReportSession: true}
}

// Attach tells a which simulated herdr its agents live in. The server is
// created with a's Behavior, so it exists only after the behaviour does;
// prompts arriving before Attach are logged and left unanswered.
func (a *Agents) Attach(h Herdr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.herdr = h
}

// Close cancels prompts still being answered and waits for them. Prompts
// arriving afterwards are ignored. It is safe to call more than once.
func (a *Agents) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// prompted is the OnPrompt hook: it starts the prompt's own goroutine and
// returns, so the fake is never held up by a gateway call.
func (a *Agents) prompted(paneID, prompt string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if a.herdr == nil {
		a.log.Error("simulated agent prompted before the simulated herdr was attached", "pane", paneID)
		return
	}
	h := a.herdr
	a.wg.Go(func() {
		if err := a.answer(a.ctx, h, paneID, prompt); err != nil {
			a.log.Warn("simulated agent could not answer", "pane", paneID, "err", err)
		}
	})
}

// answer runs one turn: working (for as long as the prompt asks), print
// and reply, idle. The agent goes idle even when the reply failed, as a
// real agent ends its turn.
func (a *Agents) answer(ctx context.Context, h Herdr, paneID, prompt string) error {
	if err := h.SetAgentState(paneID, "working"); err != nil {
		return fmt.Errorf("start working: %w", err)
	}
	lasts, rest := turnOf(prompt)
	text := ReplyPrefix + rest
	err := a.work(ctx, lasts)
	if err == nil {
		err = h.WriteOutput(paneID, text)
	}
	if err == nil {
		err = a.reply(ctx, h, paneID, text)
	}
	if ierr := h.SetAgentState(paneID, "idle"); ierr != nil {
		err = errors.Join(err, fmt.Errorf("end turn: %w", ierr))
	}
	return err
}

// work keeps the agent busy for d, or until ctx ends (Close).
func (a *Agents) work(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reply connects to the gateway named in the pane's environment with the
// pane's token and calls bridge_reply.
func (a *Agents) reply(ctx context.Context, h Herdr, paneID, text string) error {
	env, ok := h.PaneEnv(paneID)
	if !ok {
		return fmt.Errorf("pane %s is gone", paneID)
	}
	url, token := env[harness.URLEnv], env[harness.TokenEnv]
	if url == "" || token == "" {
		return fmt.Errorf("pane %s has no %s or %s in its environment: it was not started by fleetd", paneID, harness.URLEnv, harness.TokenEnv)
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	session, err := connect(ctx, url, token, a.client, a.ctx)
	if err != nil {
		return err
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "bridge_reply", Arguments: map[string]any{"content": text}})
	if err != nil {
		return fmt.Errorf("call bridge_reply: %w", err)
	}
	if res.IsError {
		return fmt.Errorf("bridge_reply refused: %s", resultText(res))
	}
	return nil
}

// resultText joins the text content of a tool result.
func resultText(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if s != "" {
				s += "\n"
			}
			s += t.Text
		}
	}
	return s
}

// connect opens an MCP session with the Streamable HTTP endpoint url,
// presenting token as "Authorization: Bearer" to url's origin (see
// mcpbridge.BearerTransport). It uses a copy of client whose Transport is
// wrapped, and no standalone SSE stream: the session only carries its own
// calls. Once stop is done no request is sent any more, so that closing a
// session whose call was cancelled does not wait on the gateway.
func connect(ctx context.Context, url, token string, client *http.Client, stop context.Context) (*mcp.ClientSession, error) {
	bearer, err := mcpbridge.NewBearerTransport(url, token, client.Transport)
	if err != nil {
		return nil, err
	}
	c := *client
	c.Transport = &stoppableTransport{base: bearer, stop: stop}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "fleetd-sim-agent", Version: "v1alpha1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &c, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to gateway %s: %w", url, err)
	}
	return session, nil
}

// stoppableTransport refuses new requests once stop is done.
type stoppableTransport struct {
	base http.RoundTripper
	stop context.Context
}

func (t *stoppableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.stop.Err(); err != nil {
		return nil, fmt.Errorf("simulated agents stopped: %w", err)
	}
	return t.base.RoundTrip(r)
}
