package listener

import (
	"net"
	"net/http"
	"sync"
)

// connLimiter is a listener that keeps at most max connections open. At
// the cap it makes room by closing the connection that has been idle
// longest — one with no request in flight: accepted but silent, or kept
// alive between requests — so that a flood of idle connections cannot keep
// a real request (a /healthz probe) waiting for the idle timeouts; only
// when every open connection has a request in flight does Accept wait for
// one to close, the next connections waiting in the kernel's accept queue.
//
// Its track method must be the server's ConnState hook: that is how it
// knows which connections are idle.
type connLimiter struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[*limitedConn]struct{}
	seq  uint64        // orders idle spells, oldest first
	room chan struct{} // closed and replaced whenever a connection closes or goes idle
	done chan struct{} // closed by Close
	once sync.Once
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, open: map[*limitedConn]struct{}{},
		room: make(chan struct{}), done: make(chan struct{})}
}

// limitedConn is an accepted connection counted against the cap.
type limitedConn struct {
	net.Conn
	l         *connLimiter
	idle      bool   // no request in flight (guarded by l.mu)
	idleSince uint64 // l.seq when it went idle
	closeOnce sync.Once
}

// Close closes the connection and gives its slot back.
func (c *limitedConn) Close() error {
	c.closeOnce.Do(c.l.release(c))
	return c.Conn.Close()
}

// Accept returns the next connection once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &limitedConn{Conn: raw, l: l}
	for {
		l.mu.Lock()
		if len(l.open) < l.max {
			l.open[c] = struct{}{}
			l.markLocked(c, true)
			l.mu.Unlock()
			return c, nil
		}
		var victim *limitedConn
		for o := range l.open {
			if o.idle && (victim == nil || o.idleSince < victim.idleSince) {
				victim = o
			}
		}
		room := l.room
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

// Close stops accepting; open connections are the server's to close.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// track is the http.Server's ConnState hook.
func (l *connLimiter) track(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateNew, http.StateIdle:
		l.mu.Lock()
		l.markLocked(c, true)
		l.mu.Unlock()
	case http.StateActive, http.StateHijacked:
		l.mu.Lock()
		l.markLocked(c, false)
		l.mu.Unlock()
	case http.StateClosed:
		c.closeOnce.Do(l.release(c))
	}
}

func (l *connLimiter) markLocked(c *limitedConn, idle bool) {
	if idle && !c.idle {
		l.seq++
		c.idleSince = l.seq
		l.notifyLocked()
	}
	c.idle = idle
}

func (l *connLimiter) notifyLocked() {
	close(l.room)
	l.room = make(chan struct{})
}

// release returns the func that takes c out of the count.
func (l *connLimiter) release(c *limitedConn) func() {
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.open[c]; ok {
			delete(l.open, c)
			l.notifyLocked()
		}
	}
}
