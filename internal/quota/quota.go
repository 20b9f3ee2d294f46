// Package quota counts what callers hold at once — calls held for their
// outcome, event streams, terminal follows — and refuses one more over a
// bound, at once: it never queues. A [Quota] has three bounds: each
// ordinary caller's own ([Limits.PerCaller]), all callers' together
// ([Limits.Total]), and a share of the total that ordinary callers cannot
// take ([Limits.Reserved]), kept for the privileged caller (fleetd's
// primary), so that no number of workers can lock the primary out.
//
// It never does: wait for a slot, know what a slot stands for, or keep a
// caller it does not count (a caller holding nothing is forgotten).
package quota

import (
	"errors"
	"fmt"
	"sync"
)

// Limits are a quota's bounds. Total must be positive; Reserved is at most
// Total; PerCaller 0 means no bound of its own (the shared one still
// holds).
type Limits struct {
	// PerCaller bounds what one ordinary caller holds.
	PerCaller int
	// Total bounds what all callers hold together.
	Total int
	// Reserved is the part of Total that only privileged callers use:
	// ordinary callers together hold at most Total - Reserved.
	Reserved int
}

// Quota is a count of held slots per caller, safe for concurrent use. A nil
// *Quota bounds nothing.
type Quota struct {
	limits Limits

	mu       sync.Mutex
	held     map[string]int // ordinary callers' slots
	ordinary int            // their sum
	total    int            // every slot, privileged ones included
}

// New returns a quota with limits, or an error naming a bound that makes
// no sense.
func New(l Limits) (*Quota, error) {
	if l.Total <= 0 || l.PerCaller < 0 || l.Reserved < 0 || l.Reserved > l.Total {
		return nil, fmt.Errorf("quota: PerCaller %d, Total %d, Reserved %d: want a positive total, and a reserve within it", l.PerCaller, l.Total, l.Reserved)
	}
	return &Quota{limits: l, held: map[string]int{}}, nil
}

// Scope says which bound refused a slot.
type Scope int

const (
	// ScopeCaller is the caller's own bound (Limits.PerCaller).
	ScopeCaller Scope = iota + 1
	// ScopeShared is what ordinary callers hold together (Total -
	// Reserved), or, for a privileged caller, the whole Total.
	ScopeShared
)

// ErrExceeded is matched (errors.Is) by every refusal; errors.As finds the
// *ExceededError with its scope and bound.
var ErrExceeded = errors.New("quota exceeded")

// ExceededError is a refusal: which bound, and its value.
type ExceededError struct {
	Scope Scope
	Max   int
}

func (e *ExceededError) Error() string {
	if e.Scope == ScopeCaller {
		return fmt.Sprintf("this caller already holds %d, its limit", e.Max)
	}
	return fmt.Sprintf("%d are held already, the most there is room for", e.Max)
}

func (e *ExceededError) Is(target error) bool { return target == ErrExceeded }

// Acquire takes a slot for caller, or refuses with an *ExceededError. A
// privileged caller is bound only by Total (it may use the reserve); an
// ordinary one by its own bound and by Total - Reserved for all ordinary
// callers together. The returned release gives the slot back; calling it
// again does nothing.
func (q *Quota) Acquire(caller string, privileged bool) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits
	switch {
	case privileged && q.total >= l.Total:
		return nil, &ExceededError{Scope: ScopeShared, Max: l.Total}
	case privileged:
	case l.PerCaller > 0 && q.held[caller] >= l.PerCaller:
		return nil, &ExceededError{Scope: ScopeCaller, Max: l.PerCaller}
	case q.ordinary >= l.Total-l.Reserved || q.total >= l.Total:
		return nil, &ExceededError{Scope: ScopeShared, Max: l.Total - l.Reserved}
	default:
		q.held[caller]++
		q.ordinary++
	}
	q.total++
	var once sync.Once
	return func() { once.Do(func() { q.release(caller, privileged) }) }, nil
}

func (q *Quota) release(caller string, privileged bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.total--
	if privileged {
		return
	}
	q.ordinary--
	if q.held[caller]--; q.held[caller] <= 0 {
		delete(q.held, caller)
	}
}
