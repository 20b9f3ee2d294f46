package workqueue

import (
	"math"
	"sync"
	"time"
)

// rateLimiter is client-go's default controller rate limiter: the larger of
// a per-item exponential backoff and an overall token bucket.
type rateLimiter struct {
	mu       sync.Mutex
	base     time.Duration
	max      time.Duration
	failures map[string]int

	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newRateLimiter(base, max time.Duration, qps float64, burst int, now time.Time) *rateLimiter {
	return &rateLimiter{
		base: base, max: max, failures: map[string]int{},
		qps: qps, burst: float64(burst), tokens: float64(burst), last: now,
	}
}

// when records one more failure of key and returns how long to wait before
// handing it out again.
func (r *rateLimiter) when(key string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	exp := r.failures[key]
	r.failures[key] = exp + 1
	backoff := float64(r.base) * math.Pow(2, float64(exp))
	d := r.max
	if backoff < float64(r.max) {
		d = time.Duration(backoff)
	}
	if b := r.reserve(now); b > d {
		d = b
	}
	return d
}

// reserve takes one token from the bucket and returns the wait until that
// token is actually available.
func (r *rateLimiter) reserve(now time.Time) time.Duration {
	if r.qps <= 0 {
		return 0
	}
	if elapsed := now.Sub(r.last); elapsed > 0 {
		r.tokens = math.Min(r.burst, r.tokens+elapsed.Seconds()*r.qps)
		r.last = now
	}
	r.tokens--
	if r.tokens >= 0 {
		return 0
	}
	return time.Duration(-r.tokens / r.qps * float64(time.Second))
}

func (r *rateLimiter) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, key)
}

func (r *rateLimiter) numRequeues(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[key]
}
