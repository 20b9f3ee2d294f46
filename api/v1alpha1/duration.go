package v1alpha1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("60s",
// "15m") in YAML and JSON, like metav1.Duration.
type Duration struct {
	time.Duration `json:",inline"`
}

// MarshalJSON writes the duration as a string such as "1m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"60s\" or \"15m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a form such as \"60s\" or \"15m\"", s)
	}
	d.Duration = v
	return nil
}
