package simagent

import (
	"testing"
	"time"
)

// A prompt "sleep N rest" is a turn that lasts N seconds (or a Go
// duration, at most MaxTurn) and is answered "echo: rest"; anything else
// is answered at once, whole.
func TestTurnOf(t *testing.T) {
	for _, tt := range []struct {
		prompt string
		lasts  time.Duration
		text   string
	}{
		{"hello", 0, "hello"},
		{"sleep 5 write the summary", 5 * time.Second, "write the summary"},
		{"sleep 90s review", 90 * time.Second, "review"},
		{"sleep 1h too long", MaxTurn, "too long"},
		{"sleep 3", 3 * time.Second, ""},
		{"sleep well tonight", 0, "sleep well tonight"},
		{"sleep -2 no", 0, "sleep -2 no"},
		{"sleepy 5 x", 0, "sleepy 5 x"},
	} {
		lasts, text := turnOf(tt.prompt)
		if lasts != tt.lasts || text != tt.text {
			t.Errorf("turnOf(%q) = %s, %q; want %s, %q", tt.prompt, lasts, text, tt.lasts, tt.text)
		}
	}
}
