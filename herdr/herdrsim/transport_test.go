package herdrsim_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetd-dev/fleetd/herdr/herdrsim"
	"github.com/google/go-cmp/cmp"
)

func TestPing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		protocol    int // Options.Protocol
		wantProto   float64
		wantVersion string
		wantHandoff bool
	}{
		{0, 22, "0.9.3", true},
		{22, 22, "0.9.3", true},
		{20, 20, "0.8.2", false},
	}
	for _, tt := range tests {
		h := newHarness(t, &herdrsim.Options{Protocol: tt.protocol})
		res := h.ok("ping", map[string]any{})
		caps, _ := res["capabilities"].(map[string]any)
		if res["type"] != "pong" || res["protocol"] != tt.wantProto || res["version"] != tt.wantVersion || caps["live_handoff"] != tt.wantHandoff {
			t.Errorf("Options.Protocol %d: ping = %v, want protocol %v, version %s, live_handoff %v", tt.protocol, res, tt.wantProto, tt.wantVersion, tt.wantHandoff)
		}
	}
}

func TestOneRequestPerConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	id, first := h.request("ping", map[string]any{})
	_, second := h.request("workspace.create", map[string]any{})
	c := h.dial()
	if _, err := c.Write(append(append(append(first, '\n'), second...), '\n')); err != nil {
		t.Fatal(err)
	}
	lc := &lineConn{h: h, Conn: c, r: newReader(c)}
	line, ok := lc.next()
	if !ok {
		t.Fatal("no response to the first request")
	}
	if r := h.response(line); r.ID != id || r.Result["type"] != "pong" {
		t.Fatalf("response = %s, want the pong for %s", line, id)
	}
	lc.eof()
	if got := h.srv.Calls(); got["workspace.create"] != 0 || got["ping"] != 1 {
		t.Errorf("Calls() = %v: the second line must never be read", got)
	}
	if ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any); len(ws) != 0 {
		t.Errorf("workspace.list = %v: the second request must not run", ws)
	}
}

// TestInvalidRequestID: protocol 20 answers every invalid line with the
// empty id; protocol 22 answers a JSON object with one string id under that
// id, and still "" for invalid JSON, a non-string or a duplicated id.
func TestInvalidRequestID(t *testing.T) {
	t.Parallel()
	for _, protocol := range []int{20, 22} {
		t.Run(fmt.Sprint("protocol ", protocol), func(t *testing.T) { testInvalidRequestID(t, protocol) })
	}
}

func testInvalidRequestID(t *testing.T, protocol int) {
	h := newHarness(t, &herdrsim.Options{Protocol: protocol})
	tests := []struct {
		name, line string
		// schemaAccepts: the line passes the schema and is refused only by
		// the method's own typed decoding (a u64 out of range).
		schemaAccepts bool
		// id22 is the id protocol 22 answers with.
		id22 string
	}{
		{name: "not json", line: `{"id":"a","method":`},
		{name: "unknown method", line: `{"id":"a","method":"pane.explode","params":{}}`, id22: "a"},
		{name: "missing param", line: `{"id":"a","method":"pane.get","params":{}}`, id22: "a"},
		{name: "mistyped param", line: `{"id":"a","method":"pane.get","params":{"pane_id":7}}`, id22: "a"},
		{name: "bad enum", line: `{"id":"a","method":"pane.split","params":{"direction":"left"}}`, id22: "a"},
		{name: "numeric id", line: `{"id":1,"method":"ping","params":{}}`},
		{name: "duplicate id", line: `{"id":"a","id":"b","method":"pane.get","params":{}}`},
		{name: "missing params", line: `{"id":"a","method":"workspace.list"}`, id22: "a"},
		{
			name:          "u64 overflow in a short call",
			line:          `{"id":"a","method":"agent.start","params":{"name":"a","kind":"claude","pane_id":"w1:p1","timeout_ms":100000000000000000000}}`,
			schemaAccepts: true, id22: "a",
		},
		{
			name:          "u64 overflow in a long call",
			line:          `{"id":"a","method":"agent.wait","params":{"target":"a","timeout_ms":100000000000000000000}}`,
			schemaAccepts: true, id22: "a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := h.v.Request([]byte(tt.line)); (err == nil) != tt.schemaAccepts {
				t.Fatalf("schema check of %s = %v, want accepted %v", tt.line, err, tt.schemaAccepts)
			}
			c := h.dial()
			c.Write([]byte(tt.line + "\n"))
			lc := &lineConn{h: h, Conn: c, r: newReader(c)}
			line, ok := lc.next()
			if !ok {
				t.Fatal("no response")
			}
			r := h.response(line)
			wantID := ""
			if protocol == 22 {
				wantID = tt.id22
			}
			if r.ID != wantID || r.Error == nil || r.Error.Code != "invalid_request" || !strings.HasPrefix(r.Error.Message, "invalid request: ") {
				t.Fatalf("response = %s, want invalid_request with id %q", line, wantID)
			}
			lc.eof()
		})
	}
}

func TestClosedWithoutResponse(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	big := func(n int) []byte {
		prefix := `{"id":"big","method":"ping","params":{"pad":"`
		suffix := `"}}`
		return []byte(prefix + strings.Repeat("a", n-len(prefix)-len(suffix)) + suffix)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty line", []byte("\n")},
		{"blank line", []byte("   \n")},
		{"invalid utf-8", []byte("{\"id\":\"a\",\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}\n")},
		{"over 1 MiB", append(big(1<<20+1), '\n')},
		{"no newline before EOF", []byte(`{"id":"a","method":"ping","params":{}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := h.dial()
			c.Write(tt.data)
			if tt.name == "no newline before EOF" {
				c.(interface{ CloseWrite() error }).CloseWrite()
			}
			(&lineConn{h: h, Conn: c, r: newReader(c)}).eof()
		})
	}
	t.Run("exactly 1 MiB is answered", func(t *testing.T) {
		line := big(1 << 20)
		if len(line) != 1<<20 {
			t.Fatalf("len = %d", len(line))
		}
		c := h.dial()
		c.Write(append(line, '\n'))
		got, ok := (&lineConn{h: h, Conn: c, r: newReader(c)}).next()
		if !ok {
			t.Fatal("no response to a 1 MiB request")
		}
		if r := h.response(got); r.ID != "big" {
			t.Fatalf("response = %s", got)
		}
	})
}

func TestRecordsRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wsID, _ := h.workspace(nil)
	env := map[string]any{"FLEETD_AGENT": "a1"}
	h.ok("tab.create", map[string]any{"workspace_id": wsID, "env": env, "label": "a1"})
	h.ok("ping", map[string]any{})
	h.ok("ping", map[string]any{})
	if diff := cmp.Diff(map[string]int{"workspace.create": 1, "tab.create": 1, "ping": 2}, h.srv.Calls()); diff != "" {
		t.Errorf("Calls() (-want +got):\n%s", diff)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 4 || reqs[1].Method != "tab.create" || !bytes.Contains(reqs[1].Params, []byte(`"FLEETD_AGENT":"a1"`)) {
		t.Errorf("Requests()[1] = %+v, want the tab.create with its env", reqs[1])
	}
}

func TestInitialWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &herdrsim.Options{InitialWorkspace: true})
	ws := h.ok("workspace.list", map[string]any{})["workspaces"].([]any)
	if len(ws) != 1 || str(ws[0].(map[string]any), "workspace_id") != "w1" {
		t.Fatalf("workspaces = %v, want w1", ws)
	}
	// tab.create defaults to the active workspace.
	if got := str(h.ok("tab.create", map[string]any{}), "tab", "tab_id"); got != "w1:t2" {
		t.Errorf("tab.create = %s, want w1:t2", got)
	}
	empty := newHarness(t, nil)
	if code, _ := empty.fail("tab.create", map[string]any{}); code != "no_active_workspace" {
		t.Errorf("tab.create with no workspace = %s, want no_active_workspace", code)
	}
	if code, _ := empty.fail("tab.create", map[string]any{"workspace_id": "w7"}); code != "workspace_not_found" {
		t.Errorf("tab.create in a missing workspace = %s, want workspace_not_found", code)
	}
}
