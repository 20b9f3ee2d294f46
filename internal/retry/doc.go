// Package retry is how fleetd's background loops wait before they try etcd
// again: jittered exponential backoff ([github.com/cenkalti/backoff/v5]),
// slept on the injected clock (package clock), so that a test under
// testing/synctest or a fake clock drives it like any other wait.
//
// A loop makes one [Backoff], waits [Backoff.Wait] after each failure and
// calls [Backoff.Reset] after a success. The first wait is about the base
// interval (±50%), each next one about twice the last, up to about four
// times the base: many nodes retrying against an etcd that comes back do
// not retry in step, and none waits long once it answers.
//
// [Backoff.OnWake] is the loop of a background writer: a pass at each
// wake, passes that failed again after the backoff.
//
// It never decides what is worth retrying and holds no goroutine.
package retry
