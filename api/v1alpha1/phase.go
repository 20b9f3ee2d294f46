package v1alpha1

// DisplayPhase is the phase to show a person: Status.Phase, except while
// fleetd cannot tell (the Ready condition is Unknown: herdr does not answer,
// the member's node is lost or it runs on another node), when the phase last
// seen would mislead — a member shown Ready whose herdr is gone — and the
// phase reads "Unknown (REASON)"; and except while a running member's
// replacement waits for its agent to be idle (UpToDate=False,
// WaitingForIdle), when it reads [PhaseUpdating]. `fleetd get`, `describe`
// and the browser console all show it.
func (m *Member) DisplayPhase() string {
	updating := false
	for _, c := range m.Status.Conditions {
		switch {
		case c.Type == ConditionReady && c.Status == ConditionUnknown:
			if c.Reason == "" {
				return "Unknown"
			}
			return "Unknown (" + c.Reason + ")"
		case c.Type == ConditionUpToDate && c.Status == ConditionFalse && c.Reason == ReasonWaitingForIdle:
			updating = true
		}
	}
	if updating && (m.Status.Phase == PhaseReady || m.Status.Phase == PhaseDegraded) {
		return PhaseUpdating
	}
	return m.Status.Phase
}
