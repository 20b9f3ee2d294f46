//go:build !linux

package fencewatch

import "golang.org/x/sys/unix"

// bootClock is CLOCK_MONOTONIC, which on macOS and the BSDs counts the
// time the machine was suspended, as Linux's CLOCK_BOOTTIME does.
const bootClock = unix.CLOCK_MONOTONIC
