package mcp

// MCP sessions live in memory until their client ends them with a DELETE;
// a client that never does (it crashed, it was killed, it loops on
// initialize) would hold each one forever. The gateway therefore keeps
// its own table of the sessions it has handed out, keyed by the token
// that opened them, and bounds them two ways:
//
//   - idle expiry: a session with no request in flight for
//     Options.SessionTimeout is closed. A request in flight includes the
//     client's standalone event stream (GET /mcp) and a call held for
//     minutes, so a client that is connected and listening never expires,
//     however long it goes without calling a tool. (The go-sdk's own
//     StreamableHTTPOptions.SessionTimeout counts only POSTs as activity
//     and would close, say, the stdio bridge of an idle Claude Desktop
//     while it listens; that is why the gateway does not use it.)
//   - a cap per token: a token may hold Options.MaxSessionsPerToken
//     sessions. A new session over the cap evicts that token's least
//     recently used session with nothing in flight — only ever the same
//     token's, so no caller can end another's session, and a client that
//     leaks sessions (it restarts without a DELETE) keeps working instead
//     of being locked out until its old sessions expire. When every one
//     of them has a request in flight, the new session is refused with
//     HTTP 429 and a JSON-RPC error saying so; nothing in flight is ever
//     cut.
//
// A closed session is gone from the SDK too: its client's next request
// gets 404 and, as the MCP specification requires, starts a new session.

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fleetd-dev/fleetd/internal/clock"
	"github.com/fleetd-dev/fleetd/internal/notify"
)

// Defaults of the session bounds; docs/security.md repeats them.
const (
	// DefaultSessionTimeout is how long a session may go with no request
	// in flight before it is closed.
	DefaultSessionTimeout = time.Hour
	// DefaultMaxSessionsPerToken is how many sessions one token may hold.
	DefaultMaxSessionsPerToken = 32
)

// sessionIDHeader is the Streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// sessionTable is the gateway's table of open MCP sessions.
type sessionTable struct {
	clock   clock.Clock
	timeout time.Duration
	max     int
	// find returns the SDK's session with an id, nil once it is closed.
	find func(id string) *sdk.ServerSession

	mu     sync.Mutex
	byID   map[string]*session
	perKey map[string]int // sessions and reservations of each token
	useSeq uint64         // orders uses, for least recently used
	// changed is notified on every change; it costs a request, the hot
	// path, nothing while nobody waits (only waitFor, in tests, does).
	changed notify.Signal
	// closing counts the sessions being closed in the background.
	closing sync.WaitGroup
}

// session is one open session of the table.
type session struct {
	id, key  string
	ss       *sdk.ServerSession
	inFlight int         // requests being served on it
	lastUse  uint64      // useSeq of its last request
	idle     clock.Timer // runs while nothing is in flight
}

func newSessionTable(c clock.Clock, timeout time.Duration, max int, find func(string) *sdk.ServerSession) *sessionTable {
	return &sessionTable{clock: c, timeout: timeout, max: max, find: find,
		byID: map[string]*session{}, perKey: map[string]int{}}
}

// enter marks a request on session id by the token key as in flight; the
// returned func marks it done. It returns nil for a session the table
// does not hold for key (the SDK answers those: 404, or 403 for another
// token's).
func (t *sessionTable) enter(id, key string) (done func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.byID[id]
	if s == nil || s.key != key {
		return nil
	}
	return t.enterLocked(s)
}

func (t *sessionTable) enterLocked(s *session) (done func()) {
	s.inFlight++
	t.useSeq++
	s.lastUse = t.useSeq
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	t.changed.Notify()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			s.inFlight--
			if s.inFlight == 0 && t.byID[s.id] == s {
				t.armLocked(s)
			}
			t.changed.Notify()
		})
	}
}

// armLocked starts s's idle timer.
func (t *sessionTable) armLocked(s *session) {
	var timer clock.Timer
	timer = t.clock.AfterFunc(t.timeout, func() {
		t.mu.Lock()
		// Superseded: a request came in (and stopped the timer too late),
		// or the session is already gone.
		if s.idle != timer || s.inFlight > 0 || t.byID[s.id] != s {
			t.mu.Unlock()
			return
		}
		t.dropLocked(s)
		t.mu.Unlock()
		t.close(s.ss)
	})
	s.idle = timer
}

// dropLocked removes s from the table (not from the SDK).
func (t *sessionTable) dropLocked(s *session) {
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	delete(t.byID, s.id)
	t.release(s.key)
	t.changed.Notify()
}

// waitFor blocks until cond holds for the table's sessions (read under
// its lock) or ctx ends, for tests.
func (t *sessionTable) waitFor(ctx context.Context, cond func(map[string]*session) bool) error {
	return notify.Wait(ctx, &t.changed, func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return cond(t.byID)
	})
}

func (t *sessionTable) release(key string) {
	if t.perKey[key]--; t.perKey[key] <= 0 {
		delete(t.perKey, key)
	}
}

// forget drops session id of key after its client ended it (DELETE).
func (t *sessionTable) forget(id, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byID[id]; s != nil && s.key == key {
		t.dropLocked(s)
	}
}

// errTooManySessions is reserve's refusal: every session of the token has
// a request in flight.
type errTooManySessions struct{ max int }

func (e errTooManySessions) Error() string {
	return fmt.Sprintf("too_many_sessions: this token already holds %d MCP sessions (the limit), each with a request in flight; end one (DELETE /mcp with its Mcp-Session-Id header) or wait for a call to return, then initialize again", e.max)
}

// reserve takes a slot for a new session of key, evicting key's least
// recently used idle session if key is at the cap. The caller must
// either commit or cancel the reservation.
func (t *sessionTable) reserve(key string) error {
	t.mu.Lock()
	var victim *session
	if t.perKey[key] >= t.max {
		for _, s := range t.byID {
			if s.key == key && s.inFlight == 0 && (victim == nil || s.lastUse < victim.lastUse) {
				victim = s
			}
		}
		if victim == nil {
			t.mu.Unlock()
			return errTooManySessions{t.max}
		}
		t.dropLocked(victim)
	}
	t.perKey[key]++
	t.mu.Unlock()
	if victim != nil {
		t.close(victim.ss)
	}
	return nil
}

// commit turns key's reservation into session id, with the request that
// opened it in flight; it returns that request's done, or nil (and gives
// the slot back) when no session was opened.
func (t *sessionTable) commit(id, key string) (done func()) {
	var ss *sdk.ServerSession
	if id != "" {
		ss = t.find(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ss == nil {
		t.release(key)
		return nil
	}
	s := &session{id: id, key: key, ss: ss}
	t.byID[id] = s
	return t.enterLocked(s)
}

// gone drops session id of key if the SDK no longer has it (it closed a
// session whose initialization failed).
func (t *sessionTable) gone(id, key string) {
	if t.find(id) == nil {
		t.forget(id, key)
	}
}

// close ends an SDK session in the background: Close waits for the
// session's tool handlers to return, and one may still run (for minutes,
// a held call) after its client went away; neither a new client's
// initialize nor a timer should wait for that.
func (t *sessionTable) close(ss *sdk.ServerSession) {
	t.closing.Go(func() { ss.Close() })
}

// closeAll stops every idle timer and empties the table; the SDK's
// sessions are closed by the caller, who then calls settle.
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byID {
		t.dropLocked(s)
	}
}

// settle waits until every session the table closed is closed.
func (t *sessionTable) settle() { t.closing.Wait() }

// serve runs one authenticated /mcp request through the table: a request
// on a session is in flight for as long as next serves it; a request that
// opens a session (a POST without a session id) must get a slot first.
func (t *sessionTable) serve(w http.ResponseWriter, r *http.Request, key string, next http.Handler) {
	if id := r.Header.Get(sessionIDHeader); id != "" {
		if done := t.enter(id, key); done != nil {
			defer done()
		}
		next.ServeHTTP(w, r)
		if r.Method == http.MethodDelete {
			t.forget(id, key)
		}
		return
	}
	if r.Method != http.MethodPost {
		next.ServeHTTP(w, r) // the SDK refuses it
		return
	}
	if err := t.reserve(key); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%s}}`+"\n", jsonrpcServerError, quote(err.Error()))
		return
	}
	ow := &openingWriter{ResponseWriter: w, rc: http.NewResponseController(w), table: t, key: key}
	next.ServeHTTP(ow, r)
	ow.finish()
}

// openingWriter is the ResponseWriter of a request that may open a
// session. The SDK sets the new session's id header before it writes
// anything, so the session enters the table — with this request in flight
// — before its client can learn the id and open its event stream.
type openingWriter struct {
	http.ResponseWriter
	rc        *http.ResponseController
	table     *sessionTable
	key       string
	committed bool
	id        string
	done      func()
}

func (o *openingWriter) commit() {
	if o.committed {
		return
	}
	o.committed = true
	o.id = o.Header().Get(sessionIDHeader)
	o.done = o.table.commit(o.id, o.key)
}

// finish ends the opening request: the slot goes back if no session
// opened, and a session the SDK closed again (its initialization failed)
// leaves the table.
func (o *openingWriter) finish() {
	o.commit()
	if o.done == nil {
		return
	}
	o.done()
	o.table.gone(o.id, o.key)
}

func (o *openingWriter) WriteHeader(code int) {
	o.commit()
	o.ResponseWriter.WriteHeader(code)
}

func (o *openingWriter) Write(p []byte) (int, error) {
	o.commit()
	return o.ResponseWriter.Write(p)
}

func (o *openingWriter) FlushError() error {
	o.commit()
	return o.rc.Flush()
}

func (o *openingWriter) Flush() { _ = o.FlushError() }

func (o *openingWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// jsonrpcServerError is JSON-RPC's implementation-defined server error.
const jsonrpcServerError = -32000

// sessionBounds are Options' session fields with their defaults.
func (o Options) sessionBounds() (timeout time.Duration, max int, err error) {
	if o.SessionTimeout < 0 || o.MaxSessionsPerToken < 0 {
		return 0, 0, fmt.Errorf("MCP sessions: SessionTimeout %v, MaxSessionsPerToken %d; want positive values, or 0 for the defaults", o.SessionTimeout, o.MaxSessionsPerToken)
	}
	return cmp.Or(o.SessionTimeout, DefaultSessionTimeout), cmp.Or(o.MaxSessionsPerToken, DefaultMaxSessionsPerToken), nil
}
