package listener

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of [Limits]. docs/security.md ("The listener's bounds")
// repeats them for operators.
const (
	// DefaultMaxConns caps the connections open at once. Each worker's MCP
	// client holds a few (its stream, one per call in flight); fleetd's
	// file descriptors must stay well below the process limit.
	DefaultMaxConns = 512
	// DefaultReadHeaderTimeout closes a connection whose request headers
	// have not all arrived this long after its first byte (or, on a new
	// connection, after it was accepted).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading one whole request, headers and
	// body. It never cuts a call that is held once read.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds each write of a response, not the
	// response: a client that stops reading is cut, a held call or an
	// open event stream is not.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection with no request
	// in flight.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header block.
	DefaultMaxHeaderBytes = 64 << 10
)

// Limits bound the REST/MCP/metrics listener, so that no number of
// idle, slow or stalled clients can take it down; request bodies are
// bounded by size in package mcp (mcp.Options.MaxBodyBytes). A zero field
// means its default; a negative one is an error.
type Limits struct {
	// MaxConns caps the connections open at once. At the cap a new
	// connection closes the one that has been waiting on its client
	// longest — idle (silent since it connected, or kept alive between
	// requests), its request body still arriving, or its answer not read
	// ([connLimiter]) — so that a flood of idle, slow or stalled
	// connections delays nobody.
	// Only when every connection carries a call (its request read, its
	// handler running) do new ones wait in the kernel's accept queue until
	// one ends; [Limits.HeldCalls] keeps that from happening. Either way
	// fleetd never runs out of file descriptors.
	MaxConns int
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response (a per-write deadline
	// set through http.ResponseController), never the time a call is held.
	WriteTimeout time.Duration
	// IdleTimeout closes kept-alive connections with nothing in flight.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block.
	MaxHeaderBytes int
}

// WithDefaults returns l with every zero field set to its default, or an
// error naming a negative one.
func (l *Limits) WithDefaults() (Limits, error) {
	var v Limits
	if l != nil {
		v = *l
	}
	for _, d := range []struct {
		name string
		val  time.Duration
	}{{"ReadHeaderTimeout", v.ReadHeaderTimeout}, {"ReadTimeout", v.ReadTimeout}, {"WriteTimeout", v.WriteTimeout}, {"IdleTimeout", v.IdleTimeout}} {
		if d.val < 0 {
			return v, fmt.Errorf("listener limits: %s is %v; want a positive duration, or 0 for the default", d.name, d.val)
		}
	}
	if v.MaxConns < 0 || v.MaxHeaderBytes < 0 {
		return v, fmt.Errorf("listener limits: MaxConns %d, MaxHeaderBytes %d; want positive numbers, or 0 for the defaults", v.MaxConns, v.MaxHeaderBytes)
	}
	v.MaxConns = cmp.Or(v.MaxConns, DefaultMaxConns)
	v.ReadHeaderTimeout = cmp.Or(v.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	v.ReadTimeout = cmp.Or(v.ReadTimeout, DefaultReadTimeout)
	v.WriteTimeout = cmp.Or(v.WriteTimeout, DefaultWriteTimeout)
	v.IdleTimeout = cmp.Or(v.IdleTimeout, DefaultIdleTimeout)
	v.MaxHeaderBytes = cmp.Or(v.MaxHeaderBytes, DefaultMaxHeaderBytes)
	return v, nil
}

// HeldCalls is how many calls held for their outcome (waits, watches, log
// follows, event streams) the listener's connections carry at most, all
// callers together, for the handlers to enforce (mcp.Options.Holds, the
// console's): three quarters of MaxConns, so that at least a quarter of
// the connections is always left for everything else — /healthz and
// /readyz, short calls — and the connection cap never has to make a probe
// wait. l must have its defaults.
func (l Limits) HeldCalls() int { return max(1, l.MaxConns*3/4) }

// NewServer returns the HTTP server for handler within limits (which
// have their defaults) and the listener to serve it on: ln capped at
// limits.MaxConns ([connLimiter], which the server's ConnState and
// ConnContext hooks and [requestGuard] keep informed of what each
// connection is doing).
//
// http.Server.WriteTimeout is left unset on purpose: it is a deadline on
// the whole response from the end of the request's headers, and would cut
// a blocking delegation held for minutes and every MCP event stream.
// Writes are bounded one by one instead ([requestGuard]). ReadTimeout is
// safe for held calls: net/http clears the read deadline once the body is
// read.
func NewServer(handler http.Handler, ln net.Listener, limits Limits, log *slog.Logger) (*http.Server, net.Listener) {
	capped := newConnLimiter(ln, limits.MaxConns)
	srv := &http.Server{
		Handler:           requestGuard(handler, limits.WriteTimeout),
		ConnState:         capped.track,
		ConnContext:       capped.context,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return srv, capped
}

// requestGuard wraps every request's handler:
//
//   - It tells the connection cap when the request has been read in full
//     (its body read to its end, or it has none): until then the
//     connection may be closed for room, from then on it carries a call.
//   - A response to a request whose body was not read in full, and every
//     401 and 413, closes the connection (Connection: close). The answer
//     is sent at once, and what is left of such a body is read for at most
//     a second and 4 MiB (linger) so that the client sees the answer, not
//     a reset, then never again: net/http would otherwise read up to 256
//     KiB of it after the handler returns, for as long as the read timeout
//     allows, from a client that sends it a byte at a time.
//   - Every write of the response (and its flushes) gets a deadline of d
//     from the moment it starts, so that a client that stops reading frees
//     its connection and handler after d, however long the response was
//     held before or streams after; while a write is blocked the cap may
//     close the connection for room.
func requestGuard(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := connOf(r)
		body := &requestBody{ReadCloser: r.Body, left: r.ContentLength, conn: c}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			body.finish()
		} else {
			r.Body = body
		}
		gw := &guardedWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d, conn: c, body: body}
		// What net/http itself writes before the handler does (a 100
		// Continue) gets a deadline too, never the last request's.
		gw.arm()
		next.ServeHTTP(gw, r)
		if !body.done() {
			body.linger(gw.rc)
			// net/http drains an unread body after the handler returns;
			// with the read deadline passed, that read ends at once.
			_ = gw.rc.SetReadDeadline(time.Now())
		}
		// net/http flushes what is buffered after the handler returns:
		// from here on the connection only waits for its client.
		gw.arm()
		c.writeStarted()
	})
}

// requestBody is a request's body that reports when it has been read in
// full. left is what remains of a declared length (-1: none declared).
type requestBody struct {
	io.ReadCloser
	left int64
	conn *limitedConn

	mu  sync.Mutex
	end bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if err != nil || b.left == 0 {
		// EOF, the declared length read, or an error after which nothing
		// more is read of it (the response closes the connection).
		b.finish()
	}
	return n, err
}

// finish marks the body read in full, once.
func (b *requestBody) finish() {
	b.mu.Lock()
	first := !b.end
	b.end = true
	b.mu.Unlock()
	if first {
		b.conn.served()
	}
}

// Bounds of the lingering read of a body the handler left unread.
const (
	lingerBytes = 4 << 20
	lingerTime  = time.Second
)

// linger sends the answer given before the body was read (a 401, a 413)
// and then reads, and drops, what the client is still sending of its body
// for a moment — at most lingerBytes, within lingerTime — so that a client
// that writes its whole body before it reads (most do) reads the answer
// rather than a reset: a connection closed with unread data in it is
// reset, and the reset can take the answer with it. A client slower than
// that is cut off all the same; meanwhile the connection waits on its
// client, where the cap may close it for room.
func (b *requestBody) linger(rc *http.ResponseController) {
	if rc.Flush() != nil {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, b.ReadCloser, lingerBytes)
}

func (b *requestBody) done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.end
}

// guardedWriter is a request's ResponseWriter: each write gets a fresh
// deadline and is known to the connection cap while it runs, and the
// response closes the connection when [requestGuard] says it must.
// http.ResponseController reaches the original through Unwrap.
type guardedWriter struct {
	http.ResponseWriter
	rc          *http.ResponseController
	d           time.Duration
	conn        *limitedConn
	body        *requestBody
	wroteHeader bool
}

// arm sets the connection's write deadline d from now. A writer that has
// no deadlines (a test's recorder) is left as it is.
func (g *guardedWriter) arm() { _ = g.rc.SetWriteDeadline(time.Now().Add(g.d)) }

func (g *guardedWriter) WriteHeader(code int) {
	if !g.wroteHeader && code >= 200 {
		g.wroteHeader = true
		if code == http.StatusUnauthorized || code == http.StatusRequestEntityTooLarge || !g.body.done() {
			g.Header().Set("Connection", "close")
		}
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	g.arm()
	g.conn.writeStarted()
	defer g.conn.writeEnded()
	return g.ResponseWriter.Write(p)
}

func (g *guardedWriter) FlushError() error {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	g.arm()
	g.conn.writeStarted()
	defer g.conn.writeEnded()
	return g.rc.Flush()
}

func (g *guardedWriter) Flush() { _ = g.FlushError() }

func (g *guardedWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
