package herdrprompt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/messaging"
	"github.com/fleetd-dev/fleetd/internal/messaging/herdrprompt"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want messaging.Verdict
	}{
		{"success", nil, messaging.Delivered},
		{"blocked", &herdr.Error{Code: "agent_blocked"}, messaging.NotSent},
		{"not ready", &herdr.Error{Code: "agent_not_ready"}, messaging.NotSent},
		{"stalled", &herdr.Error{Code: "agent_prompt_stalled"}, messaging.Uncertain},
		{"unknown agent", &herdr.Error{Code: "agent_not_found"}, messaging.Failed},
		{"herdr down", &herdr.TransportError{Method: "agent.prompt", Reason: herdr.ReasonUnavailable}, messaging.NotSent},
		{"connection broke", &herdr.TransportError{Method: "agent.prompt", Reason: herdr.ReasonClosed}, messaging.Uncertain},
		{"wrapped", fmt.Errorf("prompt agent w: %w", &herdr.Error{Code: "agent_pane_busy"}), messaging.NotSent},
		{"context cut", fmt.Errorf("prompt: %w", context.Canceled), messaging.Uncertain},
		{"anything else", errors.New("boom"), messaging.Uncertain},
	}
	for _, tt := range tests {
		if got := herdrprompt.Classify(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStatusWords_AreHerdrs pins the mapping of herdr's agent statuses onto
// the core's words: the reconciler passes herdr's statuses to
// Core.ObserveStatus as they are.
func TestStatusWords_AreHerdrs(t *testing.T) {
	for herdrs, core := range map[herdr.AgentStatus]string{
		herdr.StatusIdle:    messaging.StatusIdle,
		herdr.StatusWorking: messaging.StatusWorking,
		herdr.StatusBlocked: messaging.StatusBlocked,
		herdr.StatusDone:    messaging.StatusDone,
		herdr.StatusUnknown: messaging.StatusUnknown,
	} {
		if string(herdrs) != core {
			t.Errorf("herdr status %q is %q in the messaging core", herdrs, core)
		}
	}
}
