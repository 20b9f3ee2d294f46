// Package notify is fleetd's one change notification: a [Signal] hands out
// a channel that is closed at its next change, so that any number of
// readers wait for "something changed" without a subscription to cancel and
// without a send that could block the writer.
//
// The pattern every reader follows: take the channel, then read the state,
// then wait on the channel. A change between the read and the wait has
// already closed the channel taken before the read, so nothing is missed
// ([Wait] does exactly that).
//
// A Signal can follow others ([Signal.Follow]): it is notified whenever one
// of them is, which merges several sources (this node's members, the
// fleet, the published statuses) into one channel without a goroutine. A
// source that is not a Signal is followed by [Signal.Forward], in a
// goroutine of the caller's.
//
// It never does: hold a reader's channel open after a change, block the
// notifier on a reader, or run a goroutine of its own.
package notify

import (
	"context"
	"sync"
)

// Source is anything that hands out a change channel.
type Source interface {
	// Changed returns a channel closed at the next change.
	Changed() <-chan struct{}
}

// Signal is a change notification. The zero value is ready to use; a
// Signal must not be copied after first use.
type Signal struct {
	mu        sync.Mutex
	ch        chan struct{}
	followers []*Signal
}

var _ Source = (*Signal)(nil)

// Changed returns a channel that is closed at the next Notify (of this
// Signal or of one it follows).
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes every holder of a channel from Changed and every Signal that
// follows this one. It never blocks on a reader.
func (s *Signal) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil // the next Changed makes a new one
	}
	followers := s.followers
	s.mu.Unlock()
	for _, f := range followers {
		f.Notify()
	}
}

// Follow makes s notified whenever any of srcs is, from now on; it is for
// the life of the Signals (there is no unfollow). Follow must not make a
// cycle.
func (s *Signal) Follow(srcs ...*Signal) {
	for _, src := range srcs {
		src.mu.Lock()
		src.followers = append(src.followers[:len(src.followers):len(src.followers)], s)
		src.mu.Unlock()
	}
}

// Forward notifies s at every change of src until ctx ends, for a source
// that is not a Signal ([Signal.Follow] needs one). It blocks: it is the
// caller's goroutine, not one of the package's.
func (s *Signal) Forward(ctx context.Context, src Source) { Each(ctx, src, s.Notify) }

// Each calls fn after every change of src until ctx ends; it blocks. The
// channel is taken before fn runs, so a change made while fn runs (or
// between its return and the next wait) calls fn again: fn sees every
// change, coalesced, never misses the last one.
func Each(ctx context.Context, src Source, fn func()) {
	ch := src.Changed()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		ch = src.Changed()
		fn()
	}
}

// Wait returns nil once cond holds, or, when ctx ends first, its cause
// (context.Cause: ctx's error unless a cause was given). cond is evaluated
// at once and again after every change of src; the channel is taken before
// each evaluation, so a change made while cond runs is not missed.
func Wait(ctx context.Context, src Source, cond func() bool) error {
	for {
		ch := src.Changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
