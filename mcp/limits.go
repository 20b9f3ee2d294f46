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
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
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
