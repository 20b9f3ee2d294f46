// Package workqueue is the controllers' rate-limited work queue of string
// keys, modelled on client-go's: a key that is added while already waiting is
// kept once ("stingy"), a key that is being processed is never handed to two
// workers at once and is queued again when its worker calls Done if it was
// added meanwhile, failed keys come back after a per-item exponential backoff
// with a cap, and an overall token bucket (golang.org/x/time/rate, as
// client-go's) limits how fast retries flow. A queued key wakes one waiting
// worker, as client-go's Signal does, not every idle one.
//
// Time comes from an injected clock.Clock, so a test can drive delays without
// sleeping: the bucket is read at the clock's time and its wait is a delay
// on the clock's timers, like every other delay of the queue. The queue knows nothing about what a key means and never calls
// out to the rest of fleetd; it only hands keys to workers.
package workqueue
