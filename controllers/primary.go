package controllers

import (
	"sync/atomic"

	"github.com/fleetd-dev/fleetd/controllers/herdrcache"
)

// FollowPrimaryPane feeds observe the agent status of the primary's own
// pane (`fleetd serve --primary-pane`), so that the messaging core types
// mail for the primary that nobody waits for into that pane, and only while
// its agent is idle or done (DESIGN §5.3, flow 3). The member controller
// follows member panes only; this pane belongs to the user and fleetd never
// changes it beyond typing those prompts.
//
// It holds no subscription of its own: it asks the shared cache to watch
// the pane and forwards the statuses the cache observes for it, numbered
// the way the cache numbers every pane's (a change of the agent's state
// moves seq; idle and done are one state; a status read again does not).
// The cache reads herdr (or, when only the watched panes change, lists its
// agents) after every acknowledged (re)subscription and retries a pane that does not exist yet with a capped backoff; a
// status is forwarded only once it is known. observe must not block (core.
// ObserveStatus suits it, wrapped with the primary's name). The returned
// func stops following.
func FollowPrimaryPane(cache *herdrcache.Cache, paneID string, observe func(status string, seq uint64)) (stop func()) {
	var stopped atomic.Bool
	cache.AddHandler(herdrcache.Handler{OnAgentStatus: func(pane, status string, seq uint64) {
		if pane == paneID && !stopped.Load() {
			observe(status, seq)
		}
	}})
	unwatch := cache.Watch(func() []string { return []string{paneID} })
	return func() {
		if !stopped.Swap(true) {
			unwatch()
		}
	}
}
