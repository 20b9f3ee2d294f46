package v1alpha1

import "time"

// Event types, as in Kubernetes.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is one thing that happened to an object, kept by fleetd in memory
// for `fleetd describe` (like a Kubernetes Event, without being an object of
// its own). Messages never carry a token or credential.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// Count is how many times the same reason and message repeated in a row.
	Count int32 `json:"count,omitempty"`
}
