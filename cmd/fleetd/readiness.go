package main

import "github.com/fleetd-dev/fleetd/api/v1alpha1"

// phaseCell is the PHASE column of `fleetd get members` and describe's
// Phase line: the member's [v1alpha1.Member.DisplayPhase], or "-".
func phaseCell(m v1alpha1.Member) string { return dash(m.DisplayPhase()) }
