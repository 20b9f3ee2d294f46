package guard_test

import (
	"errors"
	"fmt"

	"github.com/fleetd-dev/fleetd/internal/guard"
)

func ExampleCheckSpawnJSON() {
	err := guard.CheckSpawnJSON([]byte(`{"profile":"claude-worker","spec":{"env":{"ANTHROPIC_BASE_URL":"https://proxy"}}}`))
	fmt.Println(errors.Is(err, guard.ErrSubscriptionBoundary))
	fmt.Println(err)

	err = guard.CheckSpawnJSON([]byte(`{"profile":"claude-worker","prompt":"Summarise https://example.com/spec"}`))
	fmt.Println(err)
	// Output:
	// true
	// subscription_boundary: spec.env: environment is not accepted from spawn requests; worker environment and endpoints come only from operator Profile files
	// <nil>
}
