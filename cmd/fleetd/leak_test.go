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
func TestMain(m *testing.M) {
	if os.Getenv(asFleetdEnv) == "1" {
		main()
	}
	goleak.VerifyTestMain(m)
}
