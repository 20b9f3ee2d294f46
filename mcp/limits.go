package mcp

// Two bounds are checked where a tool call enters, before the messaging
// core sees it: every timeoutMs argument lies in [0, MaxTimeout] (a negative
// or overflowing one is invalid_argument, never a wrapped duration), and
// each caller — each bearer token — gets a token bucket of tool calls
// (golang.org/x/time/rate): [Options.ToolCallRate] per second with bursts of
// [Options.ToolCallBurst]. A call over it fails at once with rate_limited
// and says when to retry; it is not queued, so a flooding worker holds no
// memory and no goroutine of fleetd's.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/fleetd-dev/fleetd/internal/quota"
	"github.com/fleetd-dev/fleetd/internal/tokens"
)

// MaxTimeout bounds every timeoutMs argument of the bridge tools and of
// POST /members: 24 hours.
const MaxTimeout = 24 * time.Hour

// Defaults of [Options.ToolCallRate] and [Options.ToolCallBurst].
const (
	DefaultToolCallRate  = 20.0
	DefaultToolCallBurst = 100
)

// timeoutArg turns a timeoutMs argument into a duration; 0 means the
// tool's default.
func timeoutArg(ms int64) (time.Duration, error) {
	if ms < 0 || ms > MaxTimeout.Milliseconds() {
		return 0, toolErr(codeInvalidArgument, "timeoutMs: %d is out of range; want 0 (the default) up to %d (24 hours)", ms, MaxTimeout.Milliseconds())
	}
	return millis(ms), nil
}

// boundTimeout writes timeoutMs's range into an input schema that has the
// property, so that models see it (and the SDK checks it first).
func boundTimeout(s *jsonschema.Schema) *jsonschema.Schema {
	if p := s.Properties["timeoutMs"]; p != nil {
		p.Minimum, p.Maximum = ptr(0.0), ptr(float64(MaxTimeout.Milliseconds()))
	}
	return s
}

// callerLimits holds one token bucket per caller.
type callerLimits struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// maxIdleBuckets is how many callers' buckets are kept before full (idle)
// ones are forgotten; a forgotten bucket comes back full, so forgetting it
// changes nothing a caller can notice.
const maxIdleBuckets = 1024

func newCallerLimits(perSecond float64, burst int) *callerLimits {
	switch {
	case perSecond < 0:
		return nil
	case perSecond == 0:
		perSecond = DefaultToolCallRate
	}
	if burst <= 0 {
		burst = DefaultToolCallBurst
	}
	return &callerLimits{limit: rate.Limit(perSecond), burst: burst, now: time.Now, buckets: map[string]*rate.Limiter{}}
}

// allow takes one call from key's bucket, or says why it cannot.
func (l *callerLimits) allow(key string) *ToolError {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= maxIdleBuckets {
			for k, old := range l.buckets {
				if old.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return nil
	}
	r := b.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return toolErr(codeRateLimited, "too many tool calls with this token: the limit is %s per second with bursts of %d; retry in %s",
		formatRate(float64(l.limit)), l.burst, wait.Round(time.Millisecond))
}

func formatRate(r float64) string {
	if r == math.Trunc(r) {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%g", r)
}

// rateLimit refuses a tool call over its caller's rate with rate_limited.
// It runs inside toolMiddleware, which gives the refusal its code and
// counts it.
func (s *restServer) rateLimit(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ctr, ok := req.(*sdk.CallToolRequest)
		if method != "tools/call" || s.limits == nil || !ok || ctr.Extra == nil || ctr.Extra.TokenInfo == nil {
			return next(ctx, method, req)
		}
		if te := s.limits.allow(ctr.Extra.TokenInfo.UserID); te != nil {
			var res sdk.CallToolResult
			res.SetError(te)
			return &res, nil
		}
		return next(ctx, method, req)
	}
}

// Held calls. A call held for its outcome — bridge_send with wait,
// bridge_ask, bridge_poll and GET /inbox with wait, a member watch, a log
// follow, an MCP session's event stream (GET /mcp) — keeps its connection
// for as long as it is held (one call, one connection: the listener speaks
// HTTP/1.1), and the listener never closes such a connection for room
// (internal/listener). So that no caller can fill the listener with them,
// every held call takes a slot of [Options.Holds] first, a quota shared
// with the console's event streams: a worker token holds at most
// [DefaultMaxHeldPerToken], the workers together at most three quarters of
// the quota — the last quarter is the primary's — and the quota is itself
// at most three quarters of the listener's connections
// (listener.Limits.HeldCalls), the rest being /healthz's, /readyz's and the
// short calls'. A call over it is refused at once with too_many_waiters
// (HTTP 429), never queued. Watches and follows have quotas of their own
// besides, of the same shape ([Options.MaxWatchers], [Options.MaxFollowers]).

// Defaults of the held-call quota.
const (
	// DefaultMaxHeldPerToken is what one worker token may hold: its event
	// stream, a question (bridge_ask), a wait for mail and a few watches
	// and follows, with room to spare.
	DefaultMaxHeldPerToken = 16
	// DefaultHeldCalls is the quota's size when Options.Holds is nil: the
	// held calls the listener's default connection cap carries
	// (listener.Limits.HeldCalls of 512 connections).
	DefaultHeldCalls = 384
)

// HeldLimits are the held-call quota's bounds for a listener that carries
// total held calls: [DefaultMaxHeldPerToken] per worker token, and a
// quarter of total kept for the primary.
func HeldLimits(total int) quota.Limits {
	return quota.Limits{PerCaller: DefaultMaxHeldPerToken, Total: total, Reserved: total / 4}
}

// quotaKey is a caller's key in the quotas, and whether it is privileged
// (the primary, who may use the share the workers cannot).
func quotaKey(id tokens.Identity) (string, bool) {
	if isPrimary(id) {
		return PrimaryName, true
	}
	return id.Member, false
}

// hold takes a held-call slot for id, or says why it cannot.
func (s *restServer) hold(id tokens.Identity) (release func(), te *ToolError) {
	key, primary := quotaKey(id)
	release, err := s.holds.Acquire(key, primary)
	var ee *quota.ExceededError
	switch {
	case err == nil:
		return release, nil
	case !errors.As(err, &ee):
		return nil, toolErr(codeInternal, "held-call quota: %v", err)
	case ee.Scope == quota.ScopeCaller:
		return nil, toolErr(codeTooManyWaiters, "this token already holds %d calls held open (waits, watches, log follows, event streams), the most one worker may; end one first", ee.Max)
	case primary:
		return nil, toolErr(codeTooManyWaiters, "%d calls are held open already, the most this fleetd's listener carries; end one first (or raise --max-connections)", ee.Max)
	default:
		return nil, toolErr(codeTooManyWaiters, "the workers hold %d calls open together, the most fleetd keeps for them (the rest is the primary's); retry once one ends", ee.Max)
	}
}

// holdLimit takes a held-call slot for a tool call that may be held
// (heldTool) for as long as it runs, or refuses it with too_many_waiters.
// It runs inside toolMiddleware, as rateLimit does.
func (s *restServer) holdLimit(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ctr, ok := req.(*sdk.CallToolRequest)
		if method != "tools/call" || !ok || ctr.Params == nil || !heldTool(ctr.Params.Name, ctr.Params.Arguments) {
			return next(ctx, method, req)
		}
		id, err := callerOf(ctr)
		if err != nil {
			return next(ctx, method, req) // the tool refuses it
		}
		release, te := s.hold(id)
		if te != nil {
			var res sdk.CallToolResult
			res.SetError(te)
			return &res, nil
		}
		defer release()
		return next(ctx, method, req)
	}
}

// heldTool reports whether a call of tool name with args waits for an
// outcome: bridge_ask always, bridge_send unless wait is false, bridge_poll
// with wait true.
func heldTool(name string, args json.RawMessage) bool {
	var a struct {
		Wait *bool `json:"wait"`
	}
	_ = json.Unmarshal(args, &a) // arguments the tool refuses hold nothing
	switch name {
	case toolAsk:
		return true
	case toolSend:
		return a.Wait == nil || *a.Wait
	case toolPoll:
		return a.Wait != nil && *a.Wait
	}
	return false
}

// streamQuota returns the quota of a kind of stream (watches, follows):
// perToken each worker token, total all together, a quarter kept for the
// primary. The names are the Options fields, 0 their defaults.
func streamQuota(totalName string, total, totalDef int, perTokenName string, perToken, perTokenDef int) (*quota.Quota, error) {
	if total < 0 || perToken < 0 {
		return nil, fmt.Errorf("%s %d, %s %d: want positive numbers, or 0 for the defaults", totalName, total, perTokenName, perToken)
	}
	total, perToken = cmp.Or(total, totalDef), cmp.Or(perToken, perTokenDef)
	return quota.New(quota.Limits{PerCaller: perToken, Total: total, Reserved: total / 4})
}

// holdStream takes, for id, a slot of q — a stream quota of what ("watch
// streams", "terminal follows") — and a held-call slot, or says why it
// cannot; release gives back both.
func (s *restServer) holdStream(q *quota.Quota, what string, id tokens.Identity) (release func(), te *ToolError) {
	key, primary := quotaKey(id)
	stream, err := q.Acquire(key, primary)
	var ee *quota.ExceededError
	switch {
	case err == nil:
		held, te := s.hold(id)
		if te != nil {
			stream()
			return nil, te
		}
		return func() { held(); stream() }, nil
	case !errors.As(err, &ee):
		return nil, toolErr(codeInternal, "%s: %v", what, err)
	case ee.Scope == quota.ScopeCaller:
		return nil, toolErr(codeRateLimited, "this token already holds %d %s, the most one worker may; close one first", ee.Max, what)
	case primary:
		return nil, toolErr(codeRateLimited, "%d %s are open already, the most this fleetd serves at once; retry once one ends", ee.Max, what)
	default:
		return nil, toolErr(codeRateLimited, "the workers hold %d %s together, the most fleetd serves them (the rest is the primary's); retry once one ends", ee.Max, what)
	}
}
