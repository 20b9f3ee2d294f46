package herdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MaxRequestBytes is herdr's limit on a request line, newline included.
const MaxRequestBytes = 1 << 20

// Observer is told about every call when it completes: the method, the
// outcome code and how long it took. code is "ok" on success, herdr's error
// code when herdr refused, a transport reason ([ReasonUnavailable],
// [ReasonClosed], [ReasonBadResponse]) when herdr was not reachable or broke
// the protocol, "canceled" when the context ended first, or
// "request_too_large" / "encode_error" when the request never left. For
// events.subscribe it covers the call up to the subscription_started ack.
// It is called from the calling goroutine and must not block.
type Observer func(method, code string, d time.Duration)

// Options configure a [Client]. The zero value and nil mean defaults.
type Options struct {
	// SocketPath is herdr's API socket. Empty: [ResolveSocketPath] with the
	// process environment and home directory (unless Dial is set).
	SocketPath string
	// Observer, if set, sees every call (for metrics).
	Observer Observer
	// Dial, if set, opens the connection of each call instead of dialing
	// SocketPath (for example herdrsim.Server.Dial, an in-memory fake).
	// It is called once per request, as herdr takes one request per
	// connection; an error is reported as herdr being unavailable.
	Dial func(ctx context.Context) (net.Conn, error)
}

// Client talks to one herdr server. It holds no connection: every call dials
// the socket (or calls Options.Dial), writes one request line, reads one
// response line and closes, as herdr requires. A Client is safe for
// concurrent use.
type Client struct {
	socketPath string
	observe    Observer
	now        func() time.Time // injectable for StartAgent's deadline in tests
	dial       func(ctx context.Context) (net.Conn, error)
	lastID     atomic.Uint64
	idPrefix   string
	// requests and answers hold the buffers of calls that ended, for the
	// next: a fleet starting makes thousands of calls, and each would
	// otherwise make a request buffer and an answer buffer of its own.
	requests sync.Pool // *requestBuffer
	answers  sync.Pool // *bufio.Reader of answerReadBuffer bytes
}

// New returns a Client. opts may be nil.
func New(opts *Options) *Client {
	if opts == nil {
		opts = &Options{}
	}
	path := opts.SocketPath
	if path == "" && opts.Dial == nil {
		home, _ := os.UserHomeDir() // unset HOME leaves a relative path that fails to dial, with the path in the error
		path = ResolveSocketPath(os.Getenv, home)
	}
	dial := opts.Dial
	if dial == nil {
		dial = func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	}
	return &Client{
		socketPath: path,
		observe:    opts.Observer,
		now:        time.Now,
		dial:       dial,
		idPrefix:   "fleetd-" + strconv.Itoa(os.Getpid()) + "-",
	}
}

// SocketPath is the socket the client dials.
func (c *Client) SocketPath() string { return c.socketPath }

type request struct {
	ID     string `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params"`
}

// requestBuffer encodes request lines, one call's at a time.
type requestBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder // writes to buf
}

// maxPooledRequest is the largest request buffer kept for the next call: a
// prompt can make a request of up to a MiB, which one call may need but a
// pool should not keep.
const maxPooledRequest = 64 << 10

type response struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// exchange is one connection carrying one request. Its conn is closed when ctx
// ends (that is how herdr learns a long call was abandoned) or by close.
type exchange struct {
	method string
	conn   net.Conn
	r      *bufio.Reader
	stop   func() bool
	// answers, if set, is the pool r came from, which close returns it to.
	answers *sync.Pool
}

func (x *exchange) close() {
	x.stop()
	x.conn.Close()
	if x.answers != nil {
		x.r.Reset(nil) // keeps neither the connection nor its bytes
		x.answers.Put(x.r)
		x.answers, x.r = nil, nil
	}
}

// call performs one request/response exchange and reports it to the observer.
// result, if not nil, receives the decoded result object; its embedded
// resultTag receives the object's type tag, which must be wantType.
func (c *Client) call(ctx context.Context, method string, params any, wantType string, result typedResult) error {
	start := c.now()
	x, code, err := c.send(ctx, method, params, 0)
	if err == nil {
		code, err = x.receive(ctx, wantType, result)
		x.close()
	}
	c.report(method, code, start)
	return err
}

func (c *Client) report(method, code string, start time.Time) {
	if c.observe != nil {
		c.observe(method, code, c.now().Sub(start))
	}
}

// Read buffers of a connection: a call reads one answer line, most of them
// a few hundred bytes (a longer one, a listing, is read in as many pieces
// as it takes), and a fleet starting makes thousands of calls, so a call's
// buffer is small and reused by the next call; a stream reads bursts of
// events for its whole life, so its buffer takes several at once.
const (
	answerReadBuffer = 1 << 10
	streamReadBuffer = 4 << 10
)

// send dials herdr and writes the request line; the exchange reads herdr's
// lines with a buffer of bufSize bytes, or (0) with a call's buffer of
// answerReadBuffer bytes, taken from the client's pool and returned by the
// exchange's close. It never writes anything else on the connection
// afterwards and never half-closes it: herdr treats any further byte, or
// EOF, as the client hanging up.
func (c *Client) send(ctx context.Context, method string, params any, bufSize int) (*exchange, string, error) {
	rb := c.requestBuffer()
	defer c.releaseRequestBuffer(rb)
	if params == nil {
		params = struct{}{}
	}
	id := c.idPrefix + strconv.FormatUint(c.lastID.Add(1), 10)
	if err := rb.enc.Encode(request{ID: id, Method: method, Params: params}); err != nil {
		return nil, "encode_error", fmt.Errorf("herdr %s: encode request: %w", method, err)
	}
	line := rb.buf.Bytes() // Encode ends it with the newline
	if len(line) > MaxRequestBytes {
		return nil, "request_too_large", fmt.Errorf("herdr %s: %w (%d bytes)", method, ErrRequestTooLarge, len(line))
	}
	if err := ctx.Err(); err != nil {
		return nil, "canceled", fmt.Errorf("herdr %s: %w", method, err)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "canceled", fmt.Errorf("herdr %s: %w", method, ctx.Err())
		}
		return nil, ReasonUnavailable, &TransportError{Method: method, Reason: ReasonUnavailable, Err: err}
	}
	x := &exchange{
		method: method,
		conn:   conn,
		stop:   context.AfterFunc(ctx, func() { conn.Close() }),
	}
	if bufSize == 0 {
		x.r, x.answers = c.answerReader(conn), &c.answers
	} else {
		x.r = bufio.NewReaderSize(conn, bufSize)
	}
	if _, err := conn.Write(line); err != nil {
		x.close()
		if ctx.Err() != nil {
			return nil, "canceled", fmt.Errorf("herdr %s: %w", method, ctx.Err())
		}
		return nil, ReasonClosed, &TransportError{Method: method, Reason: ReasonClosed, Err: fmt.Errorf("write request: %w", err)}
	}
	wroteRequest(ctx)
	return x, "", nil
}

// requestBuffer returns an empty request buffer, from the pool if it has one.
func (c *Client) requestBuffer() *requestBuffer {
	if rb, ok := c.requests.Get().(*requestBuffer); ok {
		return rb
	}
	rb := &requestBuffer{}
	rb.enc = json.NewEncoder(&rb.buf)
	// No HTML escaping: it would turn each <, > and & of a prompt into six
	// bytes, and a prompt well within the content limit over herdr's 1 MiB.
	rb.enc.SetEscapeHTML(false)
	return rb
}

// releaseRequestBuffer returns rb to the pool, unless a large request grew it.
func (c *Client) releaseRequestBuffer(rb *requestBuffer) {
	if rb.buf.Cap() > maxPooledRequest {
		return
	}
	rb.buf.Reset()
	c.requests.Put(rb)
}

// answerReader returns a call's reader of conn, from the pool if it has one.
func (c *Client) answerReader(conn net.Conn) *bufio.Reader {
	if r, ok := c.answers.Get().(*bufio.Reader); ok {
		r.Reset(conn)
		return r
	}
	return bufio.NewReaderSize(conn, answerReadBuffer)
}

// receive reads and decodes the one response line. The line is read in
// place when it fits the buffer (decoding copies what it keeps), and into
// a slice of its own when it does not.
func (x *exchange) receive(ctx context.Context, wantType string, result typedResult) (string, error) {
	line, err := x.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		head := append([]byte(nil), line...) // the next read overwrites the buffer
		var rest []byte
		rest, err = x.r.ReadBytes('\n')
		line = append(head, rest...)
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		if ctx.Err() != nil {
			return "canceled", fmt.Errorf("herdr %s: %w", x.method, ctx.Err())
		}
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("connection closed before a response: %w", io.ErrUnexpectedEOF)
		}
		return ReasonClosed, &TransportError{Method: x.method, Reason: ReasonClosed, Err: err}
	}
	return decodeResponse(x.method, line, wantType, result)
}

// resultTag is herdr's tag on a result ("type"), embedded in every value a
// call decodes its result into, so that one pass over the answer decodes
// the tag and the result together.
type resultTag struct {
	Type string `json:"type"`
}

func (t *resultTag) resultType() string { return t.Type }

// typedResult is a value a call decodes its result into: its fields, and
// herdr's tag on the result (an embedded resultTag).
type typedResult interface{ resultType() string }

// answer is a response line decoded in one pass: the result straight into
// the caller's value.
type answer struct {
	Result any `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeResponse classifies one response line: herdr's error envelope becomes
// an *Error, anything that is not a well-formed result of type wantType a
// *TransportError. The result is decoded into result (nil: only its type is
// checked) in the same pass as the envelope; result holds what the line
// said only when decodeResponse returns no error. The response's id is not
// checked: a connection carries one request, and herdr's errors come under
// the request id, "" (an unreadable request; always so for invalid_request
// in protocol 20) or protocol 20's "<id>:sub:<n>:probe" for a
// subscription's setup.
func decodeResponse(method string, line []byte, wantType string, result typedResult) (string, error) {
	bad := func(err error) (string, error) {
		return ReasonBadResponse, &TransportError{Method: method, Reason: ReasonBadResponse, Err: err}
	}
	herdrErr := func(code, msg string) (string, error) {
		return code, &Error{Method: method, Code: code, Message: msg}
	}
	if result == nil {
		result = new(resultTag)
	}
	a := answer{Result: result}
	if err := json.Unmarshal(line, &a); err != nil {
		// Whatever the result holds, herdr's error envelope is herdr's
		// error: only a line whose envelope does not decode, or whose
		// result does not fit, is a bad response.
		var env response
		if json.Unmarshal(line, &env) != nil {
			return bad(fmt.Errorf("decode response %.200q: %w", line, err))
		}
		if env.Error != nil {
			return herdrErr(env.Error.Code, env.Error.Message)
		}
		return bad(fmt.Errorf("decode %s result: %w", wantType, err))
	}
	if a.Error != nil {
		return herdrErr(a.Error.Code, a.Error.Message)
	}
	switch t := result.resultType(); {
	case a.Result == nil: // "result": null
		return bad(fmt.Errorf("response has neither result nor error: %.200q", line))
	case t == "":
		return bad(fmt.Errorf("response has neither a typed result nor an error: %.200q", line))
	case t != wantType:
		return bad(fmt.Errorf("result type %q, want %q", t, wantType))
	}
	return "ok", nil
}

// Ping asks herdr for its version and checks that fleetd can drive it: any
// protocol from [MinProtocol] on is accepted. One newer than [LatestProtocol]
// is driven too (herdr's JSON clients ignore unknown fields and treat an
// unknown method as a normal error); [Pong.Warning] then says so, naming the
// version, for the caller to log. An older one returns the Pong together with
// an error matching [ErrProtocolMismatch] that says which herdr to install.
// Optional behaviour must be decided from the Pong's Capabilities or from a
// method's error, never from the protocol number.
func (c *Client) Ping(ctx context.Context) (*Pong, error) {
	var r struct {
		resultTag
		Pong
	}
	if err := c.call(ctx, "ping", nil, "pong", &r); err != nil {
		return nil, err
	}
	p := r.Pong
	if p.Protocol < MinProtocol {
		return &p, fmt.Errorf("%w: herdr %s at %s speaks protocol %d, fleetd needs protocol %d or newer: install herdr 0.8.2 or newer (0.9.x recommended)",
			ErrProtocolMismatch, p.Version, c.socketPath, p.Protocol, MinProtocol)
	}
	return &p, nil
}
