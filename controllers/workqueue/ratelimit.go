package workqueue

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateLimiter is client-go's default controller rate limiter: the larger of
// a per-item exponential backoff and an overall token bucket. The bucket is
// a rate.Limiter read only through its ...At/ReserveN(t, n) forms at the
// queue clock's time, never the wall clock; the wait it asks for is a delay
// the queue sleeps on that clock's timers (AddAfter).
type rateLimiter struct {
	mu       sync.Mutex
	base     time.Duration
	max      time.Duration
	failures map[string]int

	bucket *rate.Limiter // nil: no overall limit
}

func newRateLimiter(base, max time.Duration, qps float64, burst int) *rateLimiter {
	r := &rateLimiter{base: base, max: max, failures: map[string]int{}}
	if qps > 0 {
		r.bucket = rate.NewLimiter(rate.Limit(qps), burst) // starts full
	}
	return r
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
	if r.bucket == nil {
		return 0
	}
	return r.bucket.ReserveN(now, 1).DelayFrom(now)
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
