package validated_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/fleetd-dev/fleetd/herdr/herdrsim/validated"
	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
)

// exchange sends one raw request line and returns herdr's answer's error
// code ("" for a success).
func exchange(t *testing.T, srv *herdrsim.Server, line string) string {
	t.Helper()
	c, err := net.Dial("unix", srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A bound so that a broken fake fails the test instead of hanging it.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no response to %s: %v", line, err)
	}
	var r struct {
		Error *struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("response %s: %v", resp, err)
	}
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// TestStart_ChecksRequestsAgainstTheSchema proves the validation is live: a
// ping without params (herdr: missing field `params`) is refused by a
// validated fake and served by a bare one, which checks no shapes (what
// fleetd's embedded simulation runs).
func TestStart_ChecksRequestsAgainstTheSchema(t *testing.T) {
	const malformed = `{"id":"a","method":"ping"}`
	for _, tt := range []struct {
		name  string
		start func(*herdrsim.Options) (*herdrsim.Server, error)
		want  string
	}{
		{"validated", validated.Start, "invalid_request"},
		{"bare herdrsim", herdrsim.Start, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := tt.start(nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			if got := exchange(t, srv, malformed); got != tt.want {
				t.Errorf("%s answered %q, want %q", malformed, got, tt.want)
			}
			if got := exchange(t, srv, `{"id":"b","method":"ping","params":{}}`); got != "" {
				t.Errorf("a valid ping answered %q", got)
			}
		})
	}
}

func TestStart_KeepsACallersValidator(t *testing.T) {
	srv, err := validated.Start(&herdrsim.Options{Validator: refuser{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if got := exchange(t, srv, `{"id":"b","method":"ping","params":{}}`); got != "invalid_request" {
		t.Errorf("ping answered %q; the caller's validator refuses everything", got)
	}
}

type refuser struct{}

func (refuser) Request([]byte) error { return errors.New("refused") }

// TestSchemaFollowsTheFakesProtocol: pane.scroll exists only in protocol
// 22's schema and pane.graphics.info only in protocol 20's; the fake models
// neither (not_implemented), so the answer shows which schema checked the
// line. SchemaFor pins one schema whatever the fake speaks.
func TestSchemaFollowsTheFakesProtocol(t *testing.T) {
	const scroll = `{"id":"s","method":"pane.scroll","params":{"pane_id":"w1:p1","offset_from_bottom":1}}`
	const graphics = `{"id":"g","method":"pane.graphics.info","params":{"pane_id":"w1:p1"}}`
	tests := []struct {
		name                   string
		opts                   herdrsim.Options
		wantScroll, wantGraphs string
	}{
		{"default (22)", herdrsim.Options{}, "not_implemented", "invalid_request"},
		{"protocol 20", herdrsim.Options{Protocol: 20}, "invalid_request", "not_implemented"},
		{"Schema() on a protocol-20 fake", herdrsim.Options{Protocol: 20, Validator: validated.Schema()}, "invalid_request", "not_implemented"},
		{"SchemaFor(22) on a protocol-20 fake", herdrsim.Options{Protocol: 20, Validator: validated.SchemaFor(22)}, "not_implemented", "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := validated.Start(&tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			if got := exchange(t, srv, scroll); got != tt.wantScroll {
				t.Errorf("pane.scroll answered %q, want %q", got, tt.wantScroll)
			}
			if got := exchange(t, srv, graphics); got != tt.wantGraphs {
				t.Errorf("pane.graphics.info answered %q, want %q", got, tt.wantGraphs)
			}
		})
	}
}

func TestDefaultProtocolHasASchema(t *testing.T) {
	if herdrsim.DefaultProtocol != schemacheck.Latest {
		t.Errorf("herdrsim.DefaultProtocol = %d, the newest embedded schema describes protocol %d", herdrsim.DefaultProtocol, schemacheck.Latest)
	}
}
