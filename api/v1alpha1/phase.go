package v1alpha1

// DisplayPhase is the phase to show a person: Status.Phase, except while
// fleetd cannot tell (the Ready condition is Unknown: herdr does not answer,
// the member's node is lost or it runs on another node), when the phase last
// seen would mislead — a member shown Ready whose herdr is gone — and the
// phase reads "Unknown (REASON)". `fleetd get`, `describe` and the browser
// console all show it.
func (m *Member) DisplayPhase() string {
	for _, c := range m.Status.Conditions {
		if c.Type == ConditionReady && c.Status == ConditionUnknown {
			if c.Reason == "" {
				return "Unknown"
			}
			return "Unknown (" + c.Reason + ")"
		}
	}
	return m.Status.Phase
}
