package mcpbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrTokenRefused reports that the gateway answered 401 Unauthorized: the
// bearer token is unknown to it or was revoked.
var ErrTokenRefused = errors.New("gateway refused the token")

// ErrUnreachable reports that no HTTP exchange with the gateway was possible
// (connection refused, DNS failure, TLS failure, …).
var ErrUnreachable = errors.New("gateway unreachable")

// Options configures [Run].
type Options struct {
	// URL is the gateway's Streamable HTTP endpoint, e.g.
	// http://127.0.0.1:8080/mcp. Required.
	URL string
	// Token is the bearer token sent to the gateway. Required. It is sent
	// only to URL's origin and never appears in an error or log line.
	Token string
	// TokenEnv names the environment variable Token was read from; errors
	// use it to tell the user where the refused token came from. Empty
	// means "FLEETD_TOKEN".
	TokenEnv string
	// HTTPClient carries the requests; nil means a client over
	// http.DefaultTransport. Run wraps its Transport and never modifies it.
	HTTPClient *http.Client
	// Logger receives problems that do not end the relay (a notification
	// the gateway would not take, a standalone stream that reconnects).
	// Nil discards them.
	Logger *slog.Logger
	// DrainTimeout bounds how long the relay, once stdin has closed, waits
	// for the answers to the calls still in flight; 0 means
	// [DefaultDrainTimeout].
	DrainTimeout time.Duration
}

// DefaultDrainTimeout is the default of [Options.DrainTimeout]: longer than
// a bridge_send held for its default ten minutes.
const DefaultDrainTimeout = 15 * time.Minute

// Protocol details the relay must know about. Everything else in a message
// passes through untouched.
const (
	methodInitialize      = "initialize"
	protocolVersionHeader = "Mcp-Protocol-Version"
	sessionIDHeader       = "Mcp-Session-Id"
	lastEventIDHeader     = "Last-Event-ID"
	// statelessVersion is the first protocol version without the standalone
	// SSE stream (SEP-2575): from it on every request carries its version in
	// _meta and server messages travel only on request streams.
	statelessVersion = "2026-07-28"
)

// Run relays MCP messages between in/out (newline-delimited JSON-RPC, the
// stdio transport) and the Streamable HTTP gateway at opts.URL until in
// reaches EOF, ctx is cancelled, or the gateway fails the session.
//
// It returns nil when in is exhausted, once every call still in flight
// has been answered on out (a script that writes its requests and closes
// stdin still gets its answers; [Options.DrainTimeout] bounds the wait),
// ctx.Err() when ctx is cancelled, and otherwise an error that wraps
// [ErrTokenRefused], [ErrUnreachable] or the transport's failure. Run does not close in or out; a Read on in that never
// returns keeps one reader goroutine alive until it does (as with any
// os.Stdin reader).
func Run(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	endpoint, err := checkOptions(&opts)
	if err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	client := &http.Client{}
	if opts.HTTPClient != nil {
		*client = *opts.HTTPClient
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	auth := &authTransport{bearer: &BearerTransport{origin: origin(endpoint), token: opts.Token, base: base}}
	client.Transport = auth

	stdio, err := (&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("open stdio: %w", err)
	}
	remote, err := (&mcp.StreamableClientTransport{Endpoint: opts.URL, HTTPClient: client}).Connect(ctx)
	if err != nil {
		stdio.Close()
		return fmt.Errorf("open gateway connection to %s: %w", opts.URL, err)
	}

	r := &relay{
		opts:       opts,
		auth:       auth,
		client:     client,
		stdio:      stdio,
		remote:     remote,
		cancel:     cancel,
		initCalls:  make(map[jsonrpc.ID]bool),
		inFlight:   make(map[jsonrpc.ID]bool),
		retryDelay: time.Second,
		maxRetries: 5,
	}
	r.wg.Go(func() { r.up(ctx) })
	r.wg.Go(func() { r.down(ctx) })
	<-ctx.Done()

	// Closing remote ends the gateway session and unblocks down's Read;
	// closing stdio unblocks up's Read. Calls still in flight see ctx done.
	remote.Close()
	stdio.Close()
	r.wg.Wait()

	if err := r.result(); err != nil {
		return err
	}
	return parent.Err()
}

func checkOptions(opts *Options) (*url.URL, error) {
	if opts.TokenEnv == "" {
		opts.TokenEnv = "FLEETD_TOKEN"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Token == "" {
		return nil, fmt.Errorf("no bearer token: $%s is empty or unset", opts.TokenEnv)
	}
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("gateway URL %q: %w", opts.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q: want an absolute http:// or https:// URL such as http://127.0.0.1:8080/mcp", opts.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("gateway URL must not carry user info; the token comes from $%s", opts.TokenEnv)
	}
	return u, nil
}

// relay owns the two connections and every goroutine that touches them.
type relay struct {
	opts   Options
	auth   *authTransport
	client *http.Client
	stdio  mcp.Connection // the harness
	remote mcp.Connection // the gateway

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error

	mu        sync.Mutex
	initCalls map[jsonrpc.ID]bool // initialize requests awaiting their response
	inFlight  map[jsonrpc.ID]bool // the harness's calls not answered yet
	eof       bool                // stdin has closed: stop once inFlight is empty

	// Standalone stream reconnection policy.
	retryDelay time.Duration
	maxRetries int
}

// stop ends the relay; the first non-nil err becomes Run's result. A nil
// err is a clean end (stdin closed).
func (r *relay) stop(err error) {
	r.errOnce.Do(func() { r.err = err })
	r.cancel()
}

func (r *relay) result() error {
	r.errOnce.Do(func() {})
	return r.err
}

// up carries messages from the harness to the gateway.
func (r *relay) up(ctx context.Context) {
	for {
		msg, err := r.stdio.Read(ctx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, io.EOF):
				r.drain(ctx)
			default:
				r.stop(fmt.Errorf("read from stdin: %w", err))
			}
			return
		}
		req, isRequest := msg.(*jsonrpc.Request)
		if isRequest && req.IsCall() {
			r.mu.Lock()
			r.inFlight[req.ID] = true
			r.mu.Unlock()
		}
		switch {
		case isRequest && req.Method == methodInitialize:
			// Sent inline: the session id it yields must be known before
			// anything else goes out.
			r.mu.Lock()
			r.initCalls[req.ID] = true
			r.mu.Unlock()
			r.send(ctx, msg)
		case isRequest && req.IsCall():
			// A call's POST may be held until its result is ready (JSON
			// responses), so each call goes out on its own; otherwise a slow
			// tool call would hold back the harness's answer to a request the
			// gateway makes meanwhile.
			r.wg.Go(func() { r.send(ctx, msg) })
		default:
			// Notifications and responses are answered 202 at once.
			r.send(ctx, msg)
		}
	}
}

// drain ends the relay once every call in flight is answered — at once
// when none is — or when the drain timeout passes first.
func (r *relay) drain(ctx context.Context) {
	r.mu.Lock()
	r.eof = true
	pending := len(r.inFlight)
	r.mu.Unlock()
	if pending == 0 {
		r.stop(nil)
		return
	}
	t := time.NewTimer(cmp.Or(r.opts.DrainTimeout, DefaultDrainTimeout))
	defer t.Stop()
	select {
	case <-ctx.Done(): // the last answer, or an error, ended the relay
	case <-t.C:
		r.opts.Logger.Warn("stdin closed; stopping without the answers to calls still in flight", "calls", pending)
		r.stop(nil)
	}
}

// answered notes that the harness got the answer to call id; the last
// answer after stdin closed ends the relay.
func (r *relay) answered(id jsonrpc.ID) {
	r.mu.Lock()
	delete(r.inFlight, id)
	done := r.eof && len(r.inFlight) == 0
	r.mu.Unlock()
	if done {
		r.stop(nil)
	}
}

// send writes one message to the gateway. A call the gateway could not take
// is answered to the harness with an error, so the harness never waits for a
// response that will not come.
func (r *relay) send(ctx context.Context, msg jsonrpc.Message) {
	err := r.remote.Write(ctx, msg)
	if err == nil || ctx.Err() != nil {
		return
	}
	fatal := r.classify(err)
	req, isCall := msg.(*jsonrpc.Request)
	if isCall && req.IsCall() {
		wire := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		if fatal != nil {
			wire.Message = fatal.Error()
		} else {
			var gatewayErr *jsonrpc.Error
			if errors.As(err, &gatewayErr) {
				wire = gatewayErr
			}
		}
		if werr := r.stdio.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: wire}); werr != nil && ctx.Err() == nil {
			r.stop(fmt.Errorf("write to stdout: %w", werr))
			return
		}
		if fatal == nil {
			r.answered(req.ID)
		}
	} else if fatal == nil {
		r.opts.Logger.Warn("gateway did not take a message", "err", err)
	}
	if fatal != nil {
		r.stop(fatal)
	}
	// Any other failure that broke the session also fails the gateway
	// connection's Read, which ends the relay in down.
}

// classify returns the error that ends the relay for err, or nil when err
// concerns one message only.
func (r *relay) classify(err error) error {
	switch {
	case errors.Is(err, ErrTokenRefused):
		return fmt.Errorf("the gateway at %s refused the token in $%s (HTTP 401 Unauthorized): %w", r.opts.URL, r.opts.TokenEnv, ErrTokenRefused)
	case isTransportError(err):
		return fmt.Errorf("cannot reach the gateway at %s (is `fleetd serve` running?): %w: %w", r.opts.URL, ErrUnreachable, err)
	}
	return nil
}

// isTransportError reports whether err came from the HTTP client failing to
// exchange a request at all (as opposed to the gateway answering badly).
func isTransportError(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr)
}

// down carries messages from the gateway to the harness.
func (r *relay) down(ctx context.Context) {
	for {
		msg, err := r.remote.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if fatal := r.classify(err); fatal != nil {
				r.stop(fatal)
			} else if errors.Is(err, mcp.ErrSessionMissing) {
				r.stop(fmt.Errorf("the gateway at %s ended the session (did fleetd restart?): %w", r.opts.URL, err))
			} else {
				r.stop(fmt.Errorf("connection to the gateway at %s failed: %w", r.opts.URL, err))
			}
			return
		}
		resp, isResponse := msg.(*jsonrpc.Response)
		if isResponse {
			r.observeResponse(ctx, resp)
		}
		if err := r.stdio.Write(ctx, msg); err != nil {
			if ctx.Err() == nil {
				r.stop(fmt.Errorf("write to stdout: %w", err))
			}
			return
		}
		if isResponse {
			r.answered(resp.ID)
		}
	}
}

// observeResponse learns the negotiated protocol version from the response to
// initialize: later requests carry it as a header, and sessions older than
// the stateless protocol get the standalone stream for messages that belong
// to no request.
func (r *relay) observeResponse(ctx context.Context, resp *jsonrpc.Response) {
	r.mu.Lock()
	isInit := r.initCalls[resp.ID]
	delete(r.initCalls, resp.ID)
	r.mu.Unlock()
	if !isInit || resp.Error != nil {
		return
	}
	var result struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(resp.Result, &result); err != nil || result.ProtocolVersion == "" {
		return
	}
	r.auth.setProtocolVersion(result.ProtocolVersion)
	if result.ProtocolVersion < statelessVersion {
		sessionID := r.remote.SessionID()
		r.wg.Go(func() { r.listen(ctx, sessionID) })
	}
}

// nopWriteCloser keeps the relay from closing a writer it does not own.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
