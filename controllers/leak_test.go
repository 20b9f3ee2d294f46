package controllers

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: a
// Manager's workers, its work queue and its herdr cache all end with Run
// (or Close, for a Manager never run).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
