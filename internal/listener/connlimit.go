package listener

import (
	"context"
	"github.com/fleetd-dev/fleetd/internal/notify"
	"net"
	"net/http"
	"sync"
)

// connLimiter is a listener that keeps at most max connections open. At
// the cap it makes room by closing, of the connections that are waiting
// on their client, the one that has been waiting longest:
//
//   - idle — no request in flight: accepted but silent, or kept alive
//     between requests;
//   - its request still arriving — its headers are in but its body is not
//     (a client sending a body a few bytes at a time), or its handler
//     answered without reading the body;
//   - its answer refused — a write of the response is blocked, or the
//     handler is done and net/http's last flush is (a client that stopped
//     reading).
//
// A connection whose request was read in full and whose handler is
// running — a call held for its outcome, an event stream between events —
// is never closed for room. Only when every open connection is such a call
// does Accept wait for one to end, the next connections waiting in the
// kernel's accept queue. Package mcp caps the calls each caller may hold
// well below the cap, so that this wait does not happen to a probe.
//
// Its track method must be the server's ConnState hook, and its
// [connLimiter.context] the server's ConnContext: that is how it knows
// which connections are idle, and the request handlers ([requestGuard])
// find their connection to say when its request is read and when a write
// is blocked.
type connLimiter struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[*limitedConn]struct{}
	seq  uint64        // orders the spells below, oldest first
	room notify.Signal // whenever a connection closes or becomes evictable
	done chan struct{} // closed by Close
	once sync.Once
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, open: map[*limitedConn]struct{}{}, done: make(chan struct{})}
}

// connState is what a connection is doing, as the cap sees it.
type connState uint8

const (
	connIdle    connState = iota // no request in flight
	connReading                  // a request whose body has not been read in full
	connServing                  // a request read in full, its handler running
)

// limitedConn is an accepted connection counted against the cap.
type limitedConn struct {
	net.Conn
	l *connLimiter

	// Guarded by l.mu.
	state      connState
	since      uint64 // l.seq when it entered state
	writing    int    // response writes in progress
	writeSince uint64 // l.seq when the oldest of them started

	closeOnce sync.Once
}

// Close closes the connection and gives its slot back.
func (c *limitedConn) Close() error {
	c.closeOnce.Do(c.l.release(c))
	return c.Conn.Close()
}

// waiting reports since when c has been waiting on its client (idle, its
// request arriving, or a write blocked); ok is false for a connection
// carrying a call.
func (c *limitedConn) waiting() (since uint64, ok bool) {
	switch {
	case c.state != connServing:
		return c.since, true
	case c.writing > 0:
		return c.writeSince, true
	}
	return 0, false
}

// Accept returns the next connection once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &limitedConn{Conn: raw, l: l}
	for {
		room := l.room.Changed()
		l.mu.Lock()
		if len(l.open) < l.max {
			l.open[c] = struct{}{}
			l.setLocked(c, connIdle)
			l.mu.Unlock()
			return c, nil
		}
		victim := l.victimLocked()
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
			continue
		}
		select {
		case <-room:
		case <-l.done:
			raw.Close()
			return nil, net.ErrClosed
		}
	}
}

// victimLocked returns the connection to close for room, or nil when every
// one carries a call.
func (l *connLimiter) victimLocked() *limitedConn {
	var victim *limitedConn
	var vSince uint64
	for o := range l.open {
		if since, ok := o.waiting(); ok && (victim == nil || since < vSince) {
			victim, vSince = o, since
		}
	}
	return victim
}

// Close stops accepting; open connections are the server's to close.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// connKey is the context key of a request's *limitedConn.
type connKey struct{}

// context is the http.Server's ConnContext hook: it lets a request's
// handler find its connection.
func (l *connLimiter) context(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// connOf returns the connection a request came on; nil when it did not come
// through a connLimiter.
func connOf(r *http.Request) *limitedConn {
	c, _ := r.Context().Value(connKey{}).(*limitedConn)
	return c
}

// track is the http.Server's ConnState hook. net/http reports a
// connection active once a request's headers are read: it is reading
// until its handler says the body is in ([limitedConn.served]).
func (l *connLimiter) track(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateNew, http.StateIdle:
		l.set(c, connIdle)
	case http.StateActive:
		l.set(c, connReading)
	case http.StateHijacked:
		l.set(c, connServing)
	case http.StateClosed:
		c.closeOnce.Do(l.release(c))
	}
}

// served marks c's request read in full: from now its connection carries a
// call. Nil-safe, as are the write marks.
func (c *limitedConn) served() {
	if c != nil {
		c.l.set(c, connServing)
	}
}

// writeStarted and writeEnded bracket a write of a response.
func (c *limitedConn) writeStarted() {
	if c == nil {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.writing++; c.writing == 1 {
		l.seq++
		c.writeSince = l.seq
		l.room.Notify()
	}
}

func (c *limitedConn) writeEnded() {
	if c == nil {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.writing--
}

func (l *connLimiter) set(c *limitedConn, s connState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(c, s)
}

func (l *connLimiter) setLocked(c *limitedConn, s connState) {
	if s == c.state && c.since != 0 {
		return
	}
	l.seq++
	c.state, c.since = s, l.seq
	if s != connServing {
		c.writing = 0   // a new request, or none: the last response is out
		l.room.Notify() // it can be closed for room now
	}
}

// release returns the func that takes c out of the count.
func (l *connLimiter) release(c *limitedConn) func() {
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.open[c]; ok {
			delete(l.open, c)
			l.room.Notify()
		}
	}
}
