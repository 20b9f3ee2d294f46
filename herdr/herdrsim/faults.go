package herdrsim

import (
	"net"
	"time"
)

// Fault is a misbehaviour injected into the fake's answers. The request is
// always recorded first.
type Fault struct {
	// Latency delays handling by this much on the server clock (the peer
	// closing, or the fake stopping, abandons the call).
	Latency time.Duration
	// Hang reads the request and never answers; the connection stays open
	// until the peer closes it or the fake stops.
	Hang bool
	// Drop closes the connection without a response.
	Drop bool
	// Garbage is written, plus a newline, instead of the response.
	Garbage []byte
	// Execute makes the request take effect before Drop, Hang or Garbage,
	// so a client cannot tell whether it happened. Without it the request
	// has no effect. Meant for short calls: a long call runs to its end
	// (its answer discarded) before the fault applies.
	Execute bool
	// PromptError (agent.prompt, protocol 22) lets the call type the text
	// and press Enter as usual — the agent may well take the prompt — and
	// then fail with this code instead of answering agent_prompted:
	// "timeout" or "agent_prompt_failed", herdr 0.9's failures after
	// typing.
	PromptError string
	// Times limits the fault to the next Times matching requests; 0 means
	// until ClearFaults.
	Times int
}

type faultRule struct {
	method string
	fault  Fault
	left   int
}

// InjectFault applies f to requests for method ("" matches every method).
// Later faults for the same request take precedence over earlier ones.
func (s *Server) InjectFault(method string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{method: method, fault: f, left: f.Times})
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) takeFault(method string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.faults) - 1; i >= 0; i-- {
		r := s.faults[i]
		if r.method != "" && r.method != method {
			continue
		}
		if r.fault.Times > 0 {
			r.left--
			if r.left <= 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return r.fault, true
	}
	return Fault{}, false
}

// applyFaults carries out an injected fault; it reports whether the request
// should be dispatched normally.
func (s *Server) applyFaults(c *conn, req Request) bool {
	f, ok := s.takeFault(req.Method)
	if !ok {
		return true
	}
	if f.Latency > 0 {
		fired := make(chan struct{})
		s.mu.Lock()
		cancel := s.afterLocked(f.Latency, func() { close(fired) })
		s.mu.Unlock()
		select {
		case <-fired:
		case <-c.watchPeer():
		case <-c.stopped:
		}
		s.mu.Lock()
		cancel()
		s.mu.Unlock()
		select {
		case <-fired:
		default:
			return false // the peer left or the fake stopped first
		}
	}
	c.promptError = f.PromptError
	if !f.Hang && !f.Drop && f.Garbage == nil {
		return true
	}
	if f.Execute {
		s.dispatch(&conn{Conn: discardConn{c.Conn}, wg: c.wg, method: c.method, r: c.r, stopped: c.stopped, timeout: c.timeout,
			peer: c.peer, promptError: c.promptError}, req)
	}
	switch {
	case f.Hang:
		s.mu.Lock()
		s.parkLocked(c)
		s.mu.Unlock()
		select {
		case <-c.watchPeer():
		case <-c.stopped:
		}
		s.mu.Lock()
		s.unparkLocked(c)
		s.mu.Unlock()
	case f.Garbage != nil:
		c.writeRaw(withNewline(f.Garbage))
	}
	return false
}

// discardConn swallows the response of a request executed under a fault.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }
