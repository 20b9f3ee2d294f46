package fencewatch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Policies of a [Plan]: what the watchdog does with the tabs it does not
// spare.
const (
	// Close closes their tabs.
	Close = "close"
	// Pause sends their working or blocked agents [Plan].Keys (the key
	// that interrupts a turn) and keeps their tabs.
	Pause = "pause"
)

// Plan is what the watchdog does, and when, unless armed again first.
type Plan struct {
	// FireAt is when it acts, in nanoseconds of [BootTime].
	FireAt int64 `json:"fireAt"`
	// Policy is [Close] or [Pause].
	Policy string `json:"policy"`
	// Prefix starts the label of every tab fleetd made for a member (the
	// member's name follows it); the watchdog acts on those tabs alone.
	Prefix string `json:"prefix"`
	// Keep are the members whose tabs it spares: those pinned to the node
	// (spec.nodeName), which no other node may start.
	Keep []string `json:"keep,omitempty"`
	// Keys interrupt an agent's turn, for [Pause].
	Keys []string `json:"keys,omitempty"`
	// Why is the reason the watchdog logs when it acts.
	Why string `json:"why,omitempty"`
}

// check reports what a plan read from the pipe lacks.
func (p Plan) check() error {
	switch {
	case p.Policy != Close && p.Policy != Pause:
		return fmt.Errorf("policy %q: want %s or %s", p.Policy, Close, Pause)
	case p.Prefix == "":
		return fmt.Errorf("no tab label prefix")
	case p.Policy == Pause && len(p.Keys) == 0:
		return fmt.Errorf("policy %s without the keys that interrupt an agent", Pause)
	}
	return nil
}

// BootTime reads the machine's boot clock, in nanoseconds: the clock of
// [Plan].FireAt, the same in fleetd and in its watchdog.
func BootTime() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(bootClock, &ts); err != nil {
		panic(fmt.Sprintf("fencewatch: clock_gettime: %v", err)) // a clock every supported kernel has
	}
	return ts.Nano()
}
