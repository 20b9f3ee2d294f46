package controllers

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/herdr"
)

// How the Manager says that herdr does not answer. The herdr cache retries
// on its own backoff and logs each attempt at debug; these are the
// warnings an operator sees.
const (
	// herdrWarnAfter is how long after Run starts herdr may take to be
	// listed before fleetd warns that it is not reachable and shows every
	// member Ready=Unknown (HerdrUnavailable) instead of a silent Pending.
	herdrWarnAfter = 3 * time.Second
	// herdrWarnEvery is how often the warning repeats while herdr stays
	// away, after a start without it or a loss (onUnsynced warns at once).
	herdrWarnEvery = time.Minute
)

type pinger interface {
	Ping(ctx context.Context) (*herdr.Pong, error)
}

// watchHerdr warns while herdr does not answer: herdrWarnAfter after the
// start, then every herdrWarnEvery, each time with what a ping says and
// how long herdr has been away. The first warning also reconciles every
// member, which before herdr's first listing nothing else does, so that
// `fleetd get` and `describe` say why nothing runs.
func (m *Manager) watchHerdr(ctx context.Context) {
	wait, first := herdrWarnAfter, true
	for {
		m.mu.Lock()
		up := m.herdrUp
		m.mu.Unlock()
		if up {
			// No timer while herdr answers: wait for it to go away
			// (onUnsynced warns at once; the next warning is a period on).
			select {
			case <-ctx.Done():
				return
			case <-m.herdrDown:
			}
			wait = herdrWarnEvery
			continue
		}
		t := m.o.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = herdrWarnEvery
		m.mu.Lock()
		up, since := m.herdrUp, m.herdrDownAt
		m.mu.Unlock()
		if up {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, m.o.CallTimeout)
		_, err := m.pinger.Ping(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			continue // answering again: the cache's next listing brings it back
		}
		m.log.Warn("herdr is not reachable; fleetd creates, adopts and recreates nothing until it answers, and members show Ready=Unknown (HerdrUnavailable)",
			"for", m.o.Clock.Now().Sub(since).Round(time.Second), "err", err)
		if first {
			m.enqueueAll()
			first = false
		}
	}
}

// logDecision logs, at debug, what one reconcile of name decided: the
// member's phase and Ready condition afterwards, its requeue and error.
func (m *Manager) logDecision(ctx context.Context, name string, res Result, err error, took time.Duration) {
	if !m.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	var phase, ready, reason, msg string
	m.mu.Lock()
	if s := m.stateLocked(name); s != nil {
		phase = s.status.Phase
		for _, c := range s.status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				ready, reason, msg = c.Status, c.Reason, c.Message
			}
		}
	}
	m.mu.Unlock()
	attrs := []any{"member", name, "phase", phase, "ready", ready, "reason", reason, "message", msg, "took", took}
	if res.RequeueAfter > 0 {
		attrs = append(attrs, "requeue_after", res.RequeueAfter)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	m.log.Debug("reconciled", attrs...)
}
