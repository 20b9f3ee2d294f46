package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running once they have all ended. With asFleetdEnv set the test binary is
// fleetd itself (main, then exit): tests run it as a process to see its
// real exit code and output (execFleetd).
//
// FLEETD_TOKEN is cleared once for every test here (the operator's own
// must not reach the fleetds they start, nor their CLI runs); a test that
// sets an environment variable of its own cannot run in parallel.
func TestMain(m *testing.M) {
	if os.Getenv(asFleetdEnv) == "1" {
		main()
	}
	if err := os.Setenv("FLEETD_TOKEN", ""); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}
