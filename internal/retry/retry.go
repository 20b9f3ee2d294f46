package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/fleetd-dev/fleetd/internal/clock"
)

// Shape of every Backoff: waits grow by Multiplier from the base up to
// MaxFactor times it, each drawn within ±Jitter of its nominal value.
const (
	Multiplier = 2
	MaxFactor  = 4
	Jitter     = 0.5
)

// Backoff is one loop's retry pace. It is not safe for concurrent use.
type Backoff struct {
	b     backoff.ExponentialBackOff
	clock clock.Clock
}

// New returns a Backoff from base on clk (nil: the wall clock).
func New(base time.Duration, clk clock.Clock) *Backoff {
	if clk == nil {
		clk = clock.Real{}
	}
	b := &Backoff{clock: clk, b: backoff.ExponentialBackOff{
		InitialInterval:     base,
		RandomizationFactor: Jitter,
		Multiplier:          Multiplier,
		MaxInterval:         MaxFactor * base,
	}}
	b.b.Reset()
	return b
}

// Next returns the next wait, for a loop that waits in a select of its
// own.
func (b *Backoff) Next() time.Duration { return b.b.NextBackOff() }

// Wait sleeps the next wait on the clock; false when ctx ended first.
func (b *Backoff) Wait(ctx context.Context) bool {
	return clock.Sleep(ctx, b.clock, b.Next())
}

// Reset starts again from the base, after a success.
func (b *Backoff) Reset() { b.b.Reset() }

// OnWake runs pass at each value from wake until ctx ends, on the caller's
// goroutine: a pass that reports failed runs again after the backoff — no
// new wake needed — and one that did not resets it. It suits a background
// writer that makes etcd hold what its callers asked for (a pass writes
// all that is asked, and leaves what failed asked).
func (b *Backoff) OnWake(ctx context.Context, wake <-chan struct{}, pass func(context.Context) (failed bool)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		for pass(ctx) {
			if !b.Wait(ctx) {
				return
			}
		}
		b.Reset()
	}
}
