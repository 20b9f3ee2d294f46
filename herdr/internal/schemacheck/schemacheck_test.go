package schemacheck_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr/internal/schemacheck"
)

func newValidator(t *testing.T, protocol int) *schemacheck.Validator {
	t.Helper()
	v, err := schemacheck.New(protocol)
	if err != nil {
		t.Fatalf("New(%d): %v", protocol, err)
	}
	if v.Protocol() != protocol {
		t.Fatalf("New(%d).Protocol() = %d", protocol, v.Protocol())
	}
	return v
}

const paneInfo = `{"pane_id":"w1:p1","terminal_id":"term_18b0a1c2d3e4f01","workspace_id":"w1","tab_id":"w1:t1","focused":true,"agent_status":"unknown","revision":0}`

// TestValidator checks lines whose validity is the same under both
// protocols' schemas (PROTOCOL-22.md: every protocol-20 request and result
// the client uses is unchanged).
func TestValidator(t *testing.T) {
	for _, p := range schemacheck.Protocols {
		t.Run(fmt.Sprint("protocol ", p), func(t *testing.T) { testValidator(t, newValidator(t, p)) })
	}
}

func testValidator(t *testing.T, v *schemacheck.Validator) {
	type check func([]byte) error
	tests := []struct {
		name  string
		check check
		line  string
		valid bool
	}{
		// Requests.
		{"request ping", v.Request, `{"id":"1","method":"ping","params":{}}`, true},
		{"request agent.start", v.Request, `{"id":"a","method":"agent.start","params":{"name":"w1","kind":"claude","pane_id":"w1:p1","args":["--x"],"timeout_ms":30000}}`, true},
		{"request agent.prompt wait", v.Request, `{"id":"a","method":"agent.prompt","params":{"target":"w1","text":"hi","wait":{"until":["idle","done"],"timeout_ms":1000}}}`, true},
		{"request events.subscribe", v.Request, `{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"pane.created"},{"type":"pane.agent_status_changed","pane_id":"w1:p1"}]}}`, true},
		{"request unknown method", v.Request, `{"id":"1","method":"pane.explode","params":{}}`, false},
		{"request missing params", v.Request, `{"id":"1","method":"ping"}`, false},
		{"request numeric id", v.Request, `{"id":1,"method":"ping","params":{}}`, false},
		{"request agent.start without kind", v.Request, `{"id":"1","method":"agent.start","params":{"name":"w","pane_id":"w1:p1"}}`, false},
		{"request bad status enum", v.Request, `{"id":"1","method":"agent.wait","params":{"target":"w","until":["finished"]}}`, false},
		{"request negative timeout", v.Request, `{"id":"1","method":"agent.wait","params":{"target":"w","timeout_ms":-1}}`, false},
		{"request per-pane subscription without pane_id", v.Request, `{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"pane.agent_status_changed"}]}}`, false},
		{"request env value not string", v.Request, `{"id":"1","method":"tab.create","params":{"env":{"A":1}}}`, false},
		{"request not JSON", v.Request, `{"id":"1",`, false},

		// Success responses.
		{"success pong", v.Success, `{"id":"1","result":{"type":"pong","version":"0.8.0","protocol":20,"capabilities":{"live_handoff":false,"detached_server_daemon":true}}}`, true},
		{"success ok", v.Success, `{"id":"1","result":{"type":"ok"}}`, true},
		{"success pane_info", v.Success, `{"id":"1","result":{"type":"pane_info","pane":` + paneInfo + `}}`, true},
		{"success agent_info without state_change_seq", v.Success, `{"id":"1","result":{"type":"agent_info","agent":{"terminal_id":"t","agent_status":"idle","workspace_id":"w1","tab_id":"w1:t1","pane_id":"w1:p1","focused":false,"revision":0}}}`, true},
		{"success unknown result type", v.Success, `{"id":"1","result":{"type":"pane_exploded"}}`, false},
		{"success pong without protocol", v.Success, `{"id":"1","result":{"type":"pong","version":"0.8.0"}}`, false},
		{"success pane_info missing terminal_id", v.Success, `{"id":"1","result":{"type":"pane_info","pane":{"pane_id":"w1:p1","workspace_id":"w1","tab_id":"w1:t1","focused":true,"agent_status":"unknown","revision":0}}}`, false},
		{"success agent status not an enum value", v.Success, `{"id":"1","result":{"type":"agent_info","agent":{"terminal_id":"t","agent_status":"finished","workspace_id":"w1","tab_id":"w1:t1","pane_id":"w1:p1","focused":false,"revision":0}}}`, false},
		{"success missing id", v.Success, `{"result":{"type":"ok"}}`, false},

		// Error responses.
		{"error empty id", v.Error, `{"id":"","error":{"code":"invalid_request","message":"invalid request: x"}}`, true},
		{"error without message", v.Error, `{"id":"1","error":{"code":"pane_not_found"}}`, false},
		{"error id null", v.Error, `{"id":null,"error":{"code":"x","message":"y"}}`, false},

		// Response picks by shape.
		{"response success", v.Response, `{"id":"1","result":{"type":"ok"}}`, true},
		{"response error", v.Response, `{"id":"1","error":{"code":"timeout","message":"t"}}`, true},
		{"response malformed success", v.Response, `{"id":"1","result":{"kind":"ok"}}`, false},
		{"response neither", v.Response, `{"id":"1"}`, false},

		// Lifecycle events.
		{"event pane_created", v.Event, `{"event":"pane_created","data":{"type":"pane_created","pane":` + paneInfo + `}}`, true},
		{"event pane_exited", v.Event, `{"event":"pane_exited","data":{"type":"pane_exited","pane_id":"w1:p1","workspace_id":"w1"}}`, true},
		{"event dot-named kind", v.Event, `{"event":"pane.created","data":{"type":"pane_created","pane":` + paneInfo + `}}`, false},
		{"event data without type", v.Event, `{"event":"pane_exited","data":{"pane_id":"w1:p1","workspace_id":"w1"}}`, false},
		{"event tab_closed without workspace_id", v.Event, `{"event":"tab_closed","data":{"type":"tab_closed","tab_id":"w1:t2"}}`, false},

		// Per-pane subscription events.
		{"subscription status", v.SubscriptionEvent, `{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p1","workspace_id":"w1","agent_status":"working","agent":"claude"}}`, true},
		{"subscription snake kind", v.SubscriptionEvent, `{"event":"pane_agent_status_changed","data":{"pane_id":"w1:p1","workspace_id":"w1","agent_status":"working"}}`, false},
		{"subscription missing status", v.SubscriptionEvent, `{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p1","workspace_id":"w1"}}`, false},

		// Stream lines dispatch on the event name.
		{"stream lifecycle", v.StreamLine, `{"event":"pane_closed","data":{"type":"pane_closed","pane_id":"w1:p2","workspace_id":"w1"}}`, true},
		{"stream per-pane", v.StreamLine, `{"event":"pane.agent_status_changed","data":{"pane_id":"w1:p1","workspace_id":"w1","agent_status":"idle"}}`, true},
		{"stream error", v.StreamLine, `{"id":"s:sub:0:probe","error":{"code":"pane_not_found","message":"pane w1:p9 not found"}}`, true},
		{"stream bad lifecycle", v.StreamLine, `{"event":"pane_closed","data":{"type":"pane_closed"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check([]byte(tt.line + "\n"))
			if tt.valid && err != nil {
				t.Errorf("want valid, got %v", err)
			}
			if !tt.valid && err == nil {
				t.Errorf("want invalid, got nil error for %s", tt.line)
			}
		})
	}
}

// TestValidator_ProtocolsDiffer proves each protocol gets its own schema:
// protocol 22 removed pane.graphics.* and added pane.scroll and
// pane.selection.read, among others.
func TestValidator_ProtocolsDiffer(t *testing.T) {
	v20, v22 := newValidator(t, 20), newValidator(t, 22)
	tests := []struct {
		line       string
		in20, in22 bool
	}{
		{`{"id":"1","method":"pane.graphics.info","params":{"pane_id":"w1:p1"}}`, true, false},
		{`{"id":"1","method":"pane.scroll","params":{"pane_id":"w1:p1","offset_from_bottom":3}}`, false, true},
		{`{"id":"1","method":"session.snapshot","params":{}}`, true, true},
		{`{"id":"1","method":"workspace.close","params":{"workspace_id":"w1","close_group":true}}`, true, true},
	}
	for _, tt := range tests {
		if got := v20.Request([]byte(tt.line)) == nil; got != tt.in20 {
			t.Errorf("protocol 20 accepts %s: %v, want %v", tt.line, got, tt.in20)
		}
		if got := v22.Request([]byte(tt.line)) == nil; got != tt.in22 {
			t.Errorf("protocol 22 accepts %s: %v, want %v", tt.line, got, tt.in22)
		}
	}
}

func TestNew_UnknownProtocol(t *testing.T) {
	for _, p := range []int{19, 21, 23} {
		if _, err := schemacheck.New(p); err == nil || !strings.Contains(err.Error(), fmt.Sprint(p)) {
			t.Errorf("New(%d) err = %v, want one naming the protocol", p, err)
		}
		if _, err := schemacheck.Shared(p); err == nil {
			t.Errorf("Shared(%d) succeeded", p)
		}
	}
}

func TestValidatorErrorNamesSchemaAndLine(t *testing.T) {
	v := newValidator(t, 22)
	err := v.Success([]byte(`{"id":"7","result":{"type":"pong"}}`))
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"protocol-22", "success_response", `"id":"7"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestSharedIsCompiledOnce(t *testing.T) {
	for _, p := range schemacheck.Protocols {
		a, err := schemacheck.Shared(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := schemacheck.Shared(p)
		if a != b || a.Protocol() != p {
			t.Errorf("Shared(%d) returned two different validators, or one of another protocol", p)
		}
		if err := a.Request([]byte(`{"id":"1","method":"ping","params":{}}`)); err != nil {
			t.Errorf("shared validator rejects ping: %v", err)
		}
	}
}
