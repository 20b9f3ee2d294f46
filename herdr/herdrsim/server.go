package herdrsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// MaxRequestBytes is herdr's request-line limit (without the newline).
const MaxRequestBytes = 1 << 20

// The herdr protocols the fake speaks: protocol 22 (herdr 0.9.x, what
// people run) by default, protocol 20 (herdr 0.8.2) with Options.Protocol.
// Each has its schema in herdr/internal/schemacheck.
const (
	DefaultProtocol = 22
	Protocol20      = 20
)

// Validator checks the fake's incoming request lines against herdr's wire
// contract. Tests pass herdr's own JSON Schema (package
// herdr/herdrsim/validated, whose Start sets it); a fake run inside a
// product binary (fleetd serve --herdr=sim) has none, so that no JSON
// Schema validator is linked into it.
type Validator interface {
	// Request returns an error for a line that is not a herdr request:
	// not an object, a missing or mistyped id, method or param, or an
	// unknown method.
	Request(line []byte) error
}

// ProtocolValidator is a Validator that knows one wire contract per herdr
// protocol: Start replaces it by ForProtocol(Options.Protocol), so that a
// fake is checked against the schema of the protocol it speaks.
type ProtocolValidator interface {
	Validator
	ForProtocol(protocol int) Validator
}

// Options configures a fake. The zero value (or a nil *Options) gives a
// temporary socket, the real clock, instant agent readiness and instant
// prompt pick-up.
type Options struct {
	// SocketPath is where to listen; "" creates a temporary directory that
	// Close removes. It must be "" with InMemory.
	SocketPath string
	// InMemory serves without a socket: there is no listener and no socket
	// file, and clients connect with [Server.Dial], which serves each
	// connection over a [net.Pipe] with the same code as an accepted socket
	// connection (one request per connection, schema checks, faults, long
	// calls, streams). [Server.Stop] and [Server.Restart] still model herdr
	// going down and up: while the fake is stopped, Dial fails as a refused
	// connect does. This is the mode for tests under testing/synctest, where
	// a goroutine blocked on a real socket would keep virtual time from
	// moving. Panes get an empty HERDR_SOCKET_PATH.
	InMemory bool
	// Clock drives every modelled delay (with AfterFunc callbacks); nil is
	// the real clock. Pass a *clock.Fake to step time from a test.
	Clock clock.Clock
	// ReadyDelay is how long after agent.start the agent becomes
	// interactive_ready (herdr: a 3 s settle plus detection). Zero makes it
	// ready as soon as agent.start has been answered; agent.start itself
	// always reports launch_pending, as herdr does.
	ReadyDelay time.Duration
	// EnterDelay is the gap between agent.prompt typing the text and
	// pressing Enter, when the agent picks the prompt up (herdr: 300 ms).
	// Zero presses Enter as soon as the prompt call has taken its snapshot.
	EnterDelay time.Duration
	// Behavior is the default behaviour of agents; SetBehavior overrides it
	// per pane.
	Behavior Behavior
	// NoReplay (protocol 20 only) starts lifecycle subscriptions at the
	// current event instead of replaying the ring of recent events. herdr
	// 0.8.2 replays (source-derived, unverified: src/api/event_hub.rs starts
	// subscribers at sequence 0), so protocol 20 replays by default;
	// protocol 22 never replays.
	NoReplay bool
	// EventRing is how many events the hub retains (herdr's history): the
	// replay ring of protocol 20, and in protocol 22 the history a
	// subscriber must keep up with — one that falls further behind gets
	// events_lost and its stream closes. 0 is herdr's 512; tests set a small
	// one to provoke events_lost.
	EventRing int
	// Protocol selects the herdr the fake is: 0 or 22 is herdr 0.9.3
	// (protocol 22), 20 is herdr 0.8.2 (protocol 20). Any other value is
	// reported by ping as is (to test a client's version handling) and
	// behaves as 22 when above it, as 20 otherwise.
	Protocol int
	// Version is what ping reports; "" gives "0.9.3" for protocol 22 and
	// newer, "0.8.2" otherwise.
	Version string
	// ShellStartDelay is how long a new pane's shell takes to start, on the
	// Clock; until then agent.start on the pane fails with agent_pane_busy
	// (herdr 0.9). Zero: shells are up at once.
	ShellStartDelay time.Duration
	// BinPath is the HERDR_BIN_PATH injected into panes; "" gives "herdr".
	BinPath string
	// Cwd is the cwd of panes created without one; "" is the fake's own
	// working directory.
	Cwd string
	// InitialWorkspace starts the fake with one workspace (w1, one tab, one
	// pane), as a herdr session that has a workspace open; its creation
	// events are in the ring. Without it the fake starts empty.
	InitialWorkspace bool
	// RequestTimeout is herdr's limit for the request line to arrive and
	// for each response write (real time, not the Clock); 0 is 5 s.
	RequestTimeout time.Duration
	// Validator, if set, checks every request line before it is served; a
	// line it rejects is answered with invalid_request and an empty id, as
	// herdr answers a line it cannot parse. nil checks no shapes: a
	// malformed request then gets whatever the method's own decoding makes
	// of it (an unknown method: not_implemented). Tests set it (package
	// herdr/herdrsim/validated); only a product binary leaves it nil.
	Validator Validator
}

// Request is one request line as the fake received it.
type Request struct {
	ID     string          // "" when the line had no string id
	Method string          // "" when the line had no string method
	Params json.RawMessage // nil when absent
	Line   []byte          // the raw line without its newline
}

// Server is a fake herdr server on a Unix socket, or on in-memory
// connections with [Options.InMemory]. All methods are safe for concurrent
// use.
type Server struct {
	opts   Options
	clock  clock.Clock
	path   string
	tmpDir string

	mu            sync.Mutex
	changed       notify.Signal // notified on every state change
	closed        bool
	stopped       chan struct{} // closed when serving stops; replaced on Restart
	serving       bool          // between listen and Stop
	listener      net.Listener  // nil in memory
	conns         map[net.Conn]struct{}
	workspaces    []*workspace
	activeWS      *workspace
	nextWorkspace int
	termCounter   uint64
	events        []hubEvent
	lastSeq       uint64
	// statusSeq is, per pane id, the seq of the pane's newest
	// pane_agent_status_changed event: a per-pane subscription with none
	// after its cursor skips the ring (subscription.poll), where a client
	// watching a thousand panes had every one of them search it on every
	// change, under mu.
	statusSeq     map[string]uint64
	behaviors     map[string]Behavior
	faults        []*faultRule
	requests      []Request
	calls         map[string]int
	parked        map[string]int // long calls blocked waiting, per method
	parkedChanged notify.Signal  // notified when parked changes
	timers        map[int]func() bool
	nextTimer     int
	trusted       []string // repositories a worktree method was asked to trust

	wg sync.WaitGroup // accept loop, connections, hooks
}

// Start listens on the socket (or, with Options.InMemory, accepts
// [Server.Dial]) and serves until Close.
func Start(opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.InMemory && o.SocketPath != "" {
		return nil, errors.New("herdrsim: SocketPath and InMemory exclude each other")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Protocol == 0 {
		o.Protocol = DefaultProtocol
	}
	if o.Version == "" {
		o.Version = "0.8.2"
		if o.Protocol >= DefaultProtocol {
			o.Version = "0.9.3"
		}
	}
	if pv, ok := o.Validator.(ProtocolValidator); ok {
		o.Validator = pv.ForProtocol(o.Protocol)
	}
	if o.BinPath == "" {
		o.BinPath = "herdr"
	}
	if o.EventRing <= 0 {
		o.EventRing = 512
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("herdrsim: default cwd: %w", err)
		}
		o.Cwd = wd
	}
	s := &Server{
		opts:      o,
		clock:     o.Clock,
		path:      o.SocketPath,
		conns:     map[net.Conn]struct{}{},
		behaviors: map[string]Behavior{},
		calls:     map[string]int{},
		parked:    map[string]int{},
		statusSeq: map[string]uint64{},
		timers:    map[int]func() bool{},
	}
	if o.InitialWorkspace {
		s.mu.Lock()
		s.workspaceCreate(json.RawMessage(`{}`))
		s.mu.Unlock()
	}
	if s.path == "" && !o.InMemory {
		dir, err := os.MkdirTemp("", "herdrsim")
		if err != nil {
			return nil, fmt.Errorf("herdrsim: socket directory: %w", err)
		}
		s.tmpDir = dir
		s.path = filepath.Join(dir, "herdr.sock")
	}
	if err := s.listen(); err != nil {
		if s.tmpDir != "" {
			os.RemoveAll(s.tmpDir)
		}
		return nil, err
	}
	return s, nil
}

// Protocol is the protocol the fake speaks (what ping reports).
func (s *Server) Protocol() int { return s.opts.Protocol }

// p22 reports whether the fake behaves as herdr 0.9 (protocol 22).
func (s *Server) p22() bool { return s.opts.Protocol >= DefaultProtocol }

// SocketPath is the path the fake listens on; "" in memory.
func (s *Server) SocketPath() string { return s.path }

// Clock is the clock the fake runs on.
func (s *Server) Clock() clock.Clock { return s.clock }

func (s *Server) listen() error {
	if s.opts.InMemory {
		s.mu.Lock()
		s.serving = true
		s.stopped = make(chan struct{})
		s.mu.Unlock()
		return nil
	}
	l, err := net.Listen("unix", s.path)
	if err != nil {
		return fmt.Errorf("herdrsim: listen on %s: %w", s.path, err)
	}
	if err := os.Chmod(s.path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("herdrsim: chmod socket %s: %w", s.path, err)
	}
	s.mu.Lock()
	s.listener = l
	s.serving = true
	s.stopped = make(chan struct{})
	stopped := s.stopped
	s.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop(l, stopped)
	return nil
}

func (s *Server) acceptLoop(l net.Listener, stopped chan struct{}) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.listener != l {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.serveLocked(c, stopped)
		s.mu.Unlock()
	}
}

// serveLocked serves one connection, accepted or dialled in memory, in its
// own goroutine until the exchange is over or the fake stops. s.mu must be
// held.
func (s *Server) serveLocked(c net.Conn, stopped <-chan struct{}) {
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
		s.serveConn(c, stopped)
	}()
}

// Dial opens a client connection to the fake, as a client dials herdr's
// socket: one connection for one request, as herdr requires. In memory it
// is one end of a [net.Pipe] whose other end the fake serves exactly like an
// accepted socket connection, and while the fake is stopped or closed it
// fails like a refused connect (a dial *net.OpError wrapping
// syscall.ECONNREFUSED); otherwise it dials the socket. It suits
// herdr.Options.Dial.
func (s *Server) Dial(ctx context.Context) (net.Conn, error) {
	if !s.opts.InMemory {
		var d net.Dialer
		return d.DialContext(ctx, "unix", s.path)
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.serving {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	client, server := net.Pipe()
	s.serveLocked(server, s.stopped)
	return client, nil
}

// Stop stops serving: the listener closes, the socket file is removed and
// every open connection (including streams and waits) is dropped without a
// response; in memory, Dial is refused from then on. The model is kept;
// Restart serves it again on the same path.
func (s *Server) Stop() error {
	s.mu.Lock()
	if !s.serving {
		s.mu.Unlock()
		return nil
	}
	l := s.listener
	s.listener = nil
	s.serving = false
	close(s.stopped)
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	err := l.Close()
	os.Remove(s.path)
	if err != nil {
		return fmt.Errorf("herdrsim: stop: %w", err)
	}
	return nil
}

// Restart serves the kept model again on the same socket path (or, in
// memory, accepts Dial again) after Stop.
func (s *Server) Restart() error {
	s.mu.Lock()
	running, closed := s.serving, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("herdrsim: restart after Close")
	}
	if running {
		return errors.New("herdrsim: restart while serving")
	}
	return s.listen()
}

// Close stops serving, cancels every pending timer, waits for the fake's
// goroutines and removes a temporary socket directory.
func (s *Server) Close() error {
	err := s.Stop()
	s.mu.Lock()
	s.closed = true
	for id, stop := range s.timers {
		stop()
		delete(s.timers, id)
	}
	s.notifyLocked()
	s.mu.Unlock()
	s.wg.Wait()
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
	}
	return err
}

// notifyLocked wakes every waiter and stream: the model changed.
func (s *Server) notifyLocked() { s.changed.Notify() }

// afterLocked runs f with the lock held once d has passed on the clock,
// unless the server closes or the returned cancel (called with the lock
// held) runs first. d <= 0 runs f before returning.
func (s *Server) afterLocked(d time.Duration, f func()) (cancel func()) {
	if d <= 0 {
		f()
		return func() {}
	}
	s.nextTimer++
	id := s.nextTimer
	s.timers[id] = s.clock.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.timers[id]; !ok || s.closed {
			return
		}
		delete(s.timers, id)
		f()
		s.notifyLocked()
	}).Stop
	return func() {
		if stop, ok := s.timers[id]; ok {
			stop()
			delete(s.timers, id)
		}
	}
}

// conn is one accepted connection after its request line was read.
type conn struct {
	net.Conn
	wg      *sync.WaitGroup
	method  string
	parked  bool
	r       *bufio.Reader
	stopped <-chan struct{}
	timeout time.Duration
	peer    *peerWatch // shared with the copy a Fault with Execute dispatches

	promptError string // Fault.PromptError for this agent.prompt
}

// peerWatch is a connection's one peer-closed probe.
type peerWatch struct {
	once sync.Once
	gone chan struct{} // closed when the peer closes or sends anything
}

// watchPeer starts herdr's peer-closed probe, once per connection: EOF or
// any byte from the client after the request line means the client is gone.
func (c *conn) watchPeer() <-chan struct{} {
	w := c.peer
	w.once.Do(func() {
		w.gone = make(chan struct{})
		if c.r.Buffered() > 0 {
			close(w.gone)
			return
		}
		c.wg.Add(1)
		go func() { // ends when the peer writes, closes, or the handler closes the connection
			defer c.wg.Done()
			c.r.ReadByte()
			close(w.gone)
		}()
	})
	return w.gone
}

func (c *conn) writeLine(v any) error {
	return c.writeRaw(withNewline(mustMarshal(v)))
}

// withNewline returns a fresh copy of line with a newline appended; lines
// from the event ring are shared between streams and never written to.
func withNewline(line []byte) []byte {
	b := make([]byte, len(line)+1)
	copy(b, line)
	b[len(line)] = '\n'
	return b
}

func (c *conn) writeRaw(b []byte) error {
	c.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.Write(b)
	return err
}

// connReadBuffer is a connection's read buffer: one request line most of
// the time, a few hundred bytes; a longer one (up to MaxRequestBytes) is
// read in pieces (readRequestLine). 64 KiB per connection was a third of
// the bytes a repair benchmark allocated.
const connReadBuffer = 4 << 10

func (s *Server) serveConn(nc net.Conn, stopped <-chan struct{}) {
	c := &conn{Conn: nc, wg: &s.wg, r: bufio.NewReaderSize(nc, connReadBuffer), stopped: stopped, timeout: s.opts.RequestTimeout, peer: &peerWatch{}}
	nc.SetReadDeadline(time.Now().Add(s.opts.RequestTimeout))
	line, ok := readRequestLine(c.r)
	if !ok {
		return // too big, too late, cut short, empty or not UTF-8: no response
	}
	nc.SetReadDeadline(time.Time{})
	req := s.record(line)
	if v := s.opts.Validator; v != nil {
		if err := v.Request(line); err != nil {
			c.writeLine(s.invalidRequest(req, requestProblem(line, req)))
			return
		}
	}
	c.method = req.Method
	if !s.applyFaults(c, req) {
		return
	}
	s.dispatch(c, req)
}

// readRequestLine reads up to the first newline. Bytes after it stay in the
// reader and are never interpreted as a request.
func readRequestLine(r *bufio.Reader) ([]byte, bool) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) || len(line) > MaxRequestBytes {
			return nil, false
		}
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	if len(line) > MaxRequestBytes || len(bytes.TrimSpace(line)) == 0 || !utf8.Valid(line) {
		return nil, false
	}
	return line, true
}

// requestProblem says briefly why a line the schema rejects is not a
// request, in the spirit of herdr's serde messages.
func requestProblem(line []byte, req Request) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		return err
	}
	switch {
	case req.ID == "" && !bytes.Equal(probe["id"], []byte(`""`)):
		return errors.New("id: expected a string")
	case req.Method == "":
		return errors.New("method: expected a string")
	case probe["params"] == nil:
		return fmt.Errorf("method %q: missing field `params`", req.Method)
	}
	return fmt.Errorf("method %q: unknown method, or params missing a field or holding a wrong type or value", req.Method)
}

func (s *Server) record(line []byte) Request {
	var probe struct {
		ID     any             `json:"id"`
		Method any             `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	req := Request{Line: append([]byte(nil), line...)}
	if json.Unmarshal(line, &probe) == nil {
		req.ID, _ = probe.ID.(string)
		req.Method, _ = probe.Method.(string)
		req.Params = probe.Params
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if req.Method != "" {
		s.calls[req.Method]++
	}
	s.notifyLocked()
	s.mu.Unlock()
	return req
}

// Requests returns every request line received so far, in arrival order,
// including ones the fake rejected.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Calls counts the requests received per method name.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// WaitCalls blocks until at least n requests for method have arrived or ctx
// ends; tests use it to know a long call has reached the fake.
func (s *Server) WaitCalls(ctx context.Context, method string, n int) error {
	return s.waitUntil(ctx, func() bool { return s.calls[method] >= n })
}

// WaitParked blocks until at least n calls of method are parked or ctx
// ends. A call is parked while it waits for the model to change (agent.wait,
// agent.prompt with wait, events.wait, pane.wait_for_output, an
// events.subscribe stream with nothing to send) or hangs under a Fault.
// Tests use it to act only once a wait has resolved its target and started
// waiting.
func (s *Server) WaitParked(ctx context.Context, method string, n int) error {
	return s.wait(ctx, &s.parkedChanged, func() bool { return s.parked[method] >= n })
}

// parkLocked marks c as parked, once; unparkLocked undoes it. They signal
// WaitParked only, not the model's change broadcast, so parking never
// wakes other waits or streams.
func (s *Server) parkLocked(c *conn) {
	if !c.parked {
		c.parked = true
		s.parked[c.method]++
		s.signalParkedLocked()
	}
}

func (s *Server) unparkLocked(c *conn) {
	if c.parked {
		c.parked = false
		s.parked[c.method]--
		s.signalParkedLocked()
	}
}

func (s *Server) signalParkedLocked() { s.parkedChanged.Notify() }

// waitUntil blocks until cond (evaluated with the lock held) is true.
func (s *Server) waitUntil(ctx context.Context, cond func() bool) error {
	return s.wait(ctx, &s.changed, cond)
}

// wait blocks until cond, evaluated with the lock held, is true after a
// change of sig, or ctx ends (its cause is returned).
func (s *Server) wait(ctx context.Context, sig *notify.Signal, cond func() bool) error {
	return notify.Wait(ctx, sig, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	})
}
