package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sync"
	"time"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Defaults of the console's bounds ([Options]).
const (
	DefaultCodeTTL         = 60 * time.Second
	DefaultMaxCodes        = 8
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
	DefaultMaxSessions     = 16
)

// secretBytes is the entropy of a login code, a session id and a CSRF
// token: 256 bits, from crypto/rand.
const secretBytes = 32

// ErrTooManyCodes refuses a new login code while DefaultMaxCodes unexpired
// ones wait to be used.
var ErrTooManyCodes = errors.New("too many unused login codes; use one or wait a minute")

func newSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func digest(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// codes holds the one-time login codes, by hash only: the code itself is
// shown once, to the caller of `fleetd ui`.
type codes struct {
	clock clock.Clock
	ttl   time.Duration
	max   int

	mu      sync.Mutex
	pending []pendingCode
}

type pendingCode struct {
	hash    [sha256.Size]byte
	expires time.Time
}

// mint returns a new code valid for the TTL.
func (c *codes) mint() (string, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropExpiredLocked()
	if len(c.pending) >= c.max {
		return "", time.Time{}, ErrTooManyCodes
	}
	code := newSecret()
	exp := c.clock.Now().Add(c.ttl)
	c.pending = append(c.pending, pendingCode{hash: digest(code), expires: exp})
	return code, exp, nil
}

// redeem consumes code: true once, for an unexpired code it minted. Every
// pending hash is compared in constant time.
func (c *codes) redeem(code string) bool {
	if code == "" {
		return false
	}
	h := digest(code)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropExpiredLocked()
	hit := -1
	for i, p := range c.pending {
		if subtle.ConstantTimeCompare(h[:], p.hash[:]) == 1 {
			hit = i
		}
	}
	if hit < 0 {
		return false
	}
	c.pending = append(c.pending[:hit], c.pending[hit+1:]...)
	return true
}

func (c *codes) dropExpiredLocked() {
	now := c.clock.Now()
	kept := c.pending[:0]
	for _, p := range c.pending {
		if now.Before(p.expires) {
			kept = append(kept, p)
		}
	}
	c.pending = kept
}

// session is one browser's login. Its id lives only in the browser's
// HttpOnly cookie (fleetd keeps its hash); csrf is shown in the pages and
// must come back with every state-changing request.
type session struct {
	csrf     string
	created  time.Time
	lastSeen time.Time
	// done is closed when the session ends (logout, expiry, eviction), so
	// that its open event streams end with it.
	done chan struct{}
}

// sessions holds the logged-in browsers, bounded in number: a new login
// over the bound ends the least recently used session.
type sessions struct {
	clock    clock.Clock
	idle     time.Duration
	lifetime time.Duration
	max      int

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

// start opens a session and returns its id (the cookie value).
func (s *sessions) start() (id string, sess session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.dropExpiredLocked(now)
	for len(s.byID) >= s.max {
		var oldest [sha256.Size]byte
		var at time.Time
		first := true
		for k, v := range s.byID {
			if first || v.lastSeen.Before(at) {
				oldest, at, first = k, v.lastSeen, false
			}
		}
		s.dropLocked(oldest)
	}
	id = newSecret()
	ns := &session{csrf: newSecret(), created: now, lastSeen: now, done: make(chan struct{})}
	s.byID[digest(id)] = ns
	return id, *ns
}

// lookup returns the live session with this id and marks it used.
func (s *sessions) lookup(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.dropExpiredLocked(now)
	ss, ok := s.byID[digest(id)]
	if !ok {
		return session{}, false
	}
	ss.lastSeen = now
	return *ss, true
}

// expiry returns when the session with this id ends unless it is used
// again, and false when it has ended already. It does not count as a use.
func (s *sessions) expiry(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropExpiredLocked(s.clock.Now())
	ss, ok := s.byID[digest(id)]
	if !ok {
		return time.Time{}, false
	}
	idle, end := ss.lastSeen.Add(s.idle), ss.created.Add(s.lifetime)
	if idle.Before(end) {
		return idle, true
	}
	return end, true
}

// end logs a session out.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(digest(id))
}

func (s *sessions) dropLocked(key [sha256.Size]byte) {
	if ss, ok := s.byID[key]; ok {
		close(ss.done)
		delete(s.byID, key)
	}
}

func (s *sessions) dropExpiredLocked(now time.Time) {
	for k, v := range s.byID {
		if now.Sub(v.lastSeen) >= s.idle || now.Sub(v.created) >= s.lifetime {
			s.dropLocked(k)
		}
	}
}

// sameSecret compares two secrets in constant time.
func sameSecret(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
