package listener

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	// connection closes the one idle longest (no request in flight:
	// silent since it connected, or kept alive between requests), so a
	// flood of idle connections delays nobody; only when every connection
	// has a request in flight do new ones wait in the kernel's accept
	// queue until one ends. Either way fleetd never runs out of file
	// descriptors.
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

// NewServer returns the HTTP server for handler within limits (which
// have their defaults) and the listener to serve it on: ln capped at
// limits.MaxConns ([connLimiter], which the server's ConnState hook keeps
// informed of idle connections).
//
// http.Server.WriteTimeout is left unset on purpose: it is a deadline on
// the whole response from the end of the request's headers, and would cut
// a blocking delegation held for minutes and every MCP event stream.
// Writes are bounded one by one instead ([stallBound]). ReadTimeout is safe
// for held calls: net/http clears the read deadline once the body is read.
func NewServer(handler http.Handler, ln net.Listener, limits Limits, log *slog.Logger) (*http.Server, net.Listener) {
	capped := newConnLimiter(ln, limits.MaxConns)
	srv := &http.Server{
		Handler:           stallBound(handler, limits.WriteTimeout),
		ConnState:         capped.track,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return srv, capped
}

// stallBound gives every write of a response (and its flushes) a deadline
// of d from the moment it starts, so that a client that stops reading
// frees its connection and handler after d, however long the response
// was held before or streams after.
func stallBound(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		// What net/http itself writes before the handler does (a 100
		// Continue) gets a deadline too, never the last request's.
		sw.arm()
		next.ServeHTTP(sw, r)
		// net/http flushes what is buffered after the handler returns.
		sw.arm()
	})
}

// stallWriter is a ResponseWriter whose writes each get a fresh deadline.
// http.ResponseController reaches the original through Unwrap.
type stallWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// arm sets the connection's write deadline d from now. A writer that has
// no deadlines (a test's recorder) is left as it is.
func (s *stallWriter) arm() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.d)) }

func (s *stallWriter) Write(p []byte) (int, error) {
	s.arm()
	return s.ResponseWriter.Write(p)
}

func (s *stallWriter) FlushError() error {
	s.arm()
	return s.rc.Flush()
}

func (s *stallWriter) Flush() { _ = s.FlushError() }

func (s *stallWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
