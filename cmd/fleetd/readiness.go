package main

import "github.com/fleetd-dev/fleetd/api/v1alpha1"

// phaseCell is the PHASE column of `fleetd get members`: the phase, except
// while fleetd cannot tell (its Ready condition is Unknown: herdr does not
// answer), when the phase it last saw would mislead — a member shown Ready
// whose herdr is gone — and the cell says Unknown and why.
func phaseCell(m v1alpha1.Member) string {
	for _, c := range m.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && c.Status == v1alpha1.ConditionUnknown {
			if c.Reason == "" {
				return "Unknown"
			}
			return "Unknown (" + c.Reason + ")"
		}
	}
	return dash(m.Status.Phase)
}
