package fencewatch

import "golang.org/x/sys/unix"

// bootClock is CLOCK_BOOTTIME: the same for every process of the
// machine, and it counts the time the machine was suspended.
const bootClock = unix.CLOCK_BOOTTIME
